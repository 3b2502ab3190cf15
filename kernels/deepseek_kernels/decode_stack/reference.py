"""``decode_stack``: a decode step's whole decoder stack, written as the composition of the other ops.

Every sequence of the step adds one token (``B`` rows, at ``positions``). The step's layout first:
``decode_layout``'s gather indices for every compression rate of the layers, the windows the step closes, and
the rotary rows of the positions and of those windows' first positions, looked up in whole-position tables.
Then per layer: the hyper-connection boundary before attention (``hc_step``), the fused input product,
``attn_front``, the compressor's and the indexer compressor's closing windows (``compress_windows``), the
indexer's choice (``indexer_select``), ``sink_attention_paged``, ``attn_back``; then the boundary before the MoE
and ``moe_dense_experts`` after the stacked up-projection (both products ``row_linear``: a row's bits never
depend on the step's other rows). The last block is merged into the streams
(``hc_merge``), which are returned.

The per-layer arguments are flat lists with a fixed stride per layer, indexed by the enums of ``layout.py``
(the one table: the C++ kernel reads the same positions from the ``layout.h`` written from it):

* ``weights`` (``WEIGHTS`` per layer): parameters, and the derived stacked matrices of the fused input
  product and of the experts;
* ``ints`` / ``floats``: per-layer sizes and settings, among them the indices into ``rope_tables`` of the
  layer's attention and of its two compressors;
* ``pools`` (``POOLS`` per layer): the layer's paged pools (written: the new rows and closed entries);
* ``rope_tables``: per rotary module, its ``[3, n, R]`` table of ``(c, s, -s)`` rows for every position
  below ``n`` (``n`` past the step's last position).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..step_layout.reference import closing_windows
from .layout import FLOATS, INTS, MAX_COPIES, POOLS, SCORE_FUNCS, WEIGHTS, Float, Int, Pool, Weight

__all__ = ["FLOATS", "INTS", "MAX_COPIES", "POOLS", "SCORE_FUNCS", "WEIGHTS", "Float", "Int", "Pool", "Weight",
           "decode_stack_reference"]


def _stack(streams: torch.Tensor, n_layers: int, sites: Callable[[int], Sequence[tuple]],
           attend: Callable[[int, torch.Tensor], torch.Tensor], feed: Callable[[int, torch.Tensor], torch.Tensor],
           hc: int, iters: int, hc_eps: float, norm_eps: float) -> torch.Tensor:
    """The op's decoder stack: per layer, attention then the MoE, each wrapped in a hyper-connection; every
    boundary between sub-blocks is one ``hc_step`` (merge the finished block with the previous site's ``post`` /
    ``comb``, the next site's weights and the next block's normed input), and after the last layer the last block
    is merged (``hc_merge``). It computes the model's order (``deepseek_engine.models.deepseek_v4.model
    .run_layers``, which the engine's tests hold this op to, bit for bit); the CPU kernel follows it call for call.
    ``sites(i)`` gives layer ``i``'s two sites as ``(fn, base, scale, norm_weight, norm_eps)``."""
    from .. import hc_merge, hc_step

    block = post = comb = None
    for i in range(n_layers):
        for (fn, base, scale, norm_weight, block_eps), run in zip(sites(i), (attend, feed)):
            streams, post, comb, x = hc_step(streams, block, post, comb, fn, base, scale, hc, iters, hc_eps, norm_eps,
                                             norm_weight, block_eps)
            block = run(i, x)
    return streams if block is None else hc_merge(streams, block, post, comb)


def decode_stack_reference(streams: torch.Tensor, input_ids: torch.Tensor, positions: torch.Tensor,
                           slots: torch.Tensor, tables: torch.Tensor, prompt_lens: torch.Tensor | None,
                           block_size: int, window: int, rope_tables: list[torch.Tensor], weights: list,
                           ints: list[int], floats: list[float], pools: list, hc: int, iters: int, hc_eps: float,
                           norm_eps: float) -> torch.Tensor:
    from .. import (
        attn_back,
        attn_front,
        compress_windows,
        decode_layout,
        indexer_select,
        moe_dense_experts,
        row_linear,
        sink_attention_paged,
    )
    b = streams.shape[0]
    starts = positions.tolist()
    rates = sorted({r for r in ints[Int.RATE::INTS] if r})
    found = decode_layout(positions, tables, prompt_lens, block_size, window, rates)
    rank_ends, key_slots, window_visible = found[:3]
    closed = found[-1].tolist()
    per_rate = {}
    for j, rate in enumerate(rates):
        info = {"entry_slots": found[3 + 3 * j], "threshold": found[5 + 3 * j],
                "totals": (rank_ends // rate).tolist(), "w": None}
        if closed[j]:
            info.update(closing_windows(starts, [p + 1 for p in starts], tables, block_size, rate))
        per_rate[rate] = info

    def rope_rows(index: int, at: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(rope_tables[index].index_select(1, at))  # c, s, -s

    def record(values: list, layer: int, width: int) -> list:
        return values[layer * width:(layer + 1) * width]

    def sites(layer: int) -> tuple[tuple, tuple]:
        w, f = record(weights, layer, WEIGHTS), record(floats, layer, FLOATS)
        return ((w[Weight.HC_ATTN_FN], w[Weight.HC_ATTN_BASE], w[Weight.HC_ATTN_SCALE], w[Weight.ATTN_NORM], f[Float.ATTN_NORM_EPS]),
                (w[Weight.HC_FFN_FN], w[Weight.HC_FFN_BASE], w[Weight.HC_FFN_SCALE], w[Weight.FFN_NORM], f[Float.FFN_NORM_EPS]))

    def attend(layer: int, x: torch.Tensor) -> torch.Tensor:
        w, n = record(weights, layer, WEIGHTS), record(ints, layer, INTS)
        f, p = record(floats, layer, FLOATS), record(pools, layer, POOLS)
        c, s, s_inv = rope_rows(n[Int.ROPE], positions)
        y = row_linear(x, w[Weight.FUSED])
        rate, indexed = n[Int.RATE], bool(n[Int.HAS_INDEXER])
        copy_pools = ([p[Pool.COMP_KV], p[Pool.COMP_GATE]] if rate else []) + \
            ([p[Pool.IDX_KV], p[Pool.IDX_GATE]] if indexed else [])
        offsets = list(n[Int.COPY_OFFSETS:Int.COPY_OFFSETS + n[Int.COPIES]])
        _, q, qi = attn_front(y, w[Weight.Q_NORM], f[Float.Q_EPS], w[Weight.WQ_B], n[Int.HEADS], n[Int.HEAD_DIM], f[Float.HEAD_EPS],
                              w[Weight.KV_NORM], f[Float.KV_EPS], c, s, slots, p[Pool.KV], offsets, copy_pools, w[Weight.IDX_WQ_B],
                              n[Int.IDX_HEADS], n[Int.IDX_DIM])
        entry_pool = entry_slots = entry_visible = threshold = None
        if rate:
            info = per_rate[rate]
            if info["w"] is not None:
                cw, sw, _ = rope_rows(n[Int.COMP_ROPE], info["w"] * rate)
                compress_windows(p[Pool.ENTRIES], p[Pool.COMP_KV], p[Pool.COMP_GATE], w[Weight.COMP_APE], info["window_slots"],
                                 info["prior_slots"], info["has_prior"], bool(n[Int.COMP_OVERLAP]), w[Weight.COMP_NORM],
                                 f[Float.COMP_EPS], cw, sw, info["entry_out_slots"])
            entry_pool, entry_slots = p[Pool.ENTRIES], info["entry_slots"]
            if indexed:
                if info["w"] is not None:
                    cw, sw, _ = rope_rows(n[Int.IDX_ROPE], info["w"] * rate)
                    compress_windows(p[Pool.IDX_ENTRIES], p[Pool.IDX_KV], p[Pool.IDX_GATE], w[Weight.IDX_APE],
                                     info["window_slots"], info["prior_slots"], info["has_prior"],
                                     bool(n[Int.IDX_OVERLAP]), w[Weight.IDX_NORM], f[Float.IDX_EPS], cw, sw,
                                     info["entry_out_slots"])
                if entry_slots.shape[1] == 0:
                    entry_visible = torch.zeros((b, 1, 0), dtype=torch.bool, device=streams.device)
                else:
                    heads = n[Int.IDX_HEADS]
                    entry_visible = indexer_select(qi.view(b, 1, heads, n[Int.IDX_DIM]),
                                                   y[:, n[Int.HW_START]:n[Int.HW_END]].view(b, 1, heads),
                                                   p[Pool.IDX_ENTRIES], entry_slots, info["threshold"],
                                                   f[Float.IDX_QSCALE], f[Float.IDX_WSCALE], n[Int.TOPK], info["totals"])
            else:
                threshold = info["threshold"]
        heads, dim = n[Int.HEADS], n[Int.HEAD_DIM]
        core = sink_attention_paged(q.view(b, 1, heads, dim), p[Pool.KV], key_slots, window_visible, w[Weight.SINK],
                                    f[Float.SCALE], entry_pool, entry_slots, entry_visible, threshold)
        return attn_back(core.reshape(b, heads, dim).contiguous(), c, s_inv, w[Weight.WO_A], n[Int.GROUPS], w[Weight.WO_B])

    def feed(layer: int, x: torch.Tensor) -> torch.Tensor:
        w, n, f = record(weights, layer, WEIGHTS), record(ints, layer, INTS), record(floats, layer, FLOATS)
        hashed = w[Weight.TID2EID] is not None
        return moe_dense_experts(row_linear(x, w[Weight.MOE_UP]), n[Int.MOE_EXPERTS], n[Int.MOE_INTER], n[Int.MOE_TOPK],
                                 SCORE_FUNCS[n[Int.SCORE_FUNC]], w[Weight.TID2EID], input_ids if hashed else None,
                                 w[Weight.MOE_BIAS], f[Float.MOE_SCALE], f[Float.MOE_LIMIT], w[Weight.MOE_DOWN])

    return _stack(streams, len(ints) // INTS, sites, attend, feed, hc, iters, hc_eps, norm_eps)
