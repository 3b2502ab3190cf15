"""``decode_stack``: a decode step's whole decoder stack, written as the composition of the other ops.

Every sequence of the step adds one token (``B`` rows, at ``positions``). The step's layout first:
``decode_layout``'s gather indices for every compression rate of the layers, the windows the step closes, and
the rotary rows of the positions and of those windows' first positions, looked up in whole-position tables.
Then per layer: the hyper-connection boundary before attention (``hc_step``), the fused input product,
``attn_front``, the compressor's and the indexer compressor's closing windows (``compress_windows``), the
indexer's choice (``indexer_select``), ``sink_attention_paged``, ``attn_back``; then the boundary before the MoE
and ``moe_dense_experts`` after the stacked up-projection. The last block is merged into the streams
(``hc_merge``), which are returned.

The per-layer arguments are flat lists with a fixed stride per layer, indexed by the constants below (the C++
kernel reads the same positions):

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
import torch.nn.functional as F

from ..step_layout.reference import closing_windows

# weights, per layer
(W_HC_ATTN_FN, W_HC_ATTN_BASE, W_HC_ATTN_SCALE, W_ATTN_NORM, W_HC_FFN_FN, W_HC_FFN_BASE, W_HC_FFN_SCALE, W_FFN_NORM,
 W_FUSED, W_Q_NORM, W_WQ_B, W_KV_NORM, W_IDX_WQ_B, W_COMP_APE, W_COMP_NORM, W_IDX_APE, W_IDX_NORM, W_SINK, W_WO_A,
 W_WO_B, W_MOE_UP, W_MOE_DOWN, W_TID2EID, W_MOE_BIAS) = range(24)
WEIGHTS = 24
# ints, per layer
(I_HEADS, I_HEAD_DIM, I_IDX_HEADS, I_IDX_DIM, I_GROUPS, I_RATE, I_HAS_INDEXER, I_HW_START, I_HW_END, I_TOPK,
 I_COMP_OVERLAP, I_IDX_OVERLAP, I_MOE_EXPERTS, I_MOE_INTER, I_MOE_TOPK, I_SCORE_FUNC, I_ROPE, I_COMP_ROPE, I_IDX_ROPE,
 I_COPIES, I_COPY_OFFSETS) = range(21)
MAX_COPIES = 4
#: ``ints[I_SCORE_FUNC]`` indexes this (the routing score function's name)
SCORE_FUNCS = ("sqrtsoftplus", "softmax", "sigmoid")
INTS = I_COPY_OFFSETS + MAX_COPIES
# floats, per layer
(F_ATTN_NORM_EPS, F_FFN_NORM_EPS, F_Q_EPS, F_HEAD_EPS, F_KV_EPS, F_SCALE, F_COMP_EPS, F_IDX_EPS, F_IDX_QSCALE,
 F_IDX_WSCALE, F_MOE_SCALE, F_MOE_LIMIT) = range(12)
FLOATS = 12
# pools, per layer
P_KV, P_COMP_KV, P_COMP_GATE, P_ENTRIES, P_IDX_KV, P_IDX_GATE, P_IDX_ENTRIES = range(7)
POOLS = 7


def stack_layers(streams: torch.Tensor, n_layers: int, sites: Callable[[int], Sequence[tuple]],
                 attend: Callable[[int, torch.Tensor], torch.Tensor], feed: Callable[[int, torch.Tensor], torch.Tensor],
                 hc: int, iters: int, hc_eps: float, norm_eps: float) -> torch.Tensor:
    """The decoder stack's order, the one place it is written (the engine's layer loop and this op's reference
    both run it; the CPU kernel follows it call for call).

    Per layer, attention then the MoE, each wrapped in a hyper-connection. Every boundary between sub-blocks is
    one ``hc_step``: merge the finished block's output into the streams (with the previous site's ``post`` /
    ``comb``), compute the next site's weights and the next block's normed input; after the last layer the last
    block is merged (``hc_merge``). ``sites(i)`` gives layer ``i``'s two sites (attention, MoE) as ``(fn, base,
    scale, norm_weight, norm_eps)``; ``attend(i, x)`` / ``feed(i, x)`` run its attention / MoE on ``x``.
    """
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
        sink_attention_paged,
    )
    b = streams.shape[0]
    starts = positions.tolist()
    rates = sorted({r for r in ints[I_RATE::INTS] if r})
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
        return ((w[W_HC_ATTN_FN], w[W_HC_ATTN_BASE], w[W_HC_ATTN_SCALE], w[W_ATTN_NORM], f[F_ATTN_NORM_EPS]),
                (w[W_HC_FFN_FN], w[W_HC_FFN_BASE], w[W_HC_FFN_SCALE], w[W_FFN_NORM], f[F_FFN_NORM_EPS]))

    def attend(layer: int, x: torch.Tensor) -> torch.Tensor:
        w, n = record(weights, layer, WEIGHTS), record(ints, layer, INTS)
        f, p = record(floats, layer, FLOATS), record(pools, layer, POOLS)
        c, s, s_inv = rope_rows(n[I_ROPE], positions)
        y = F.linear(x, w[W_FUSED])
        rate, indexed = n[I_RATE], bool(n[I_HAS_INDEXER])
        copy_pools = ([p[P_COMP_KV], p[P_COMP_GATE]] if rate else []) + \
            ([p[P_IDX_KV], p[P_IDX_GATE]] if indexed else [])
        offsets = list(n[I_COPY_OFFSETS:I_COPY_OFFSETS + n[I_COPIES]])
        _, q, qi = attn_front(y, w[W_Q_NORM], f[F_Q_EPS], w[W_WQ_B], n[I_HEADS], n[I_HEAD_DIM], f[F_HEAD_EPS],
                              w[W_KV_NORM], f[F_KV_EPS], c, s, slots, p[P_KV], offsets, copy_pools, w[W_IDX_WQ_B],
                              n[I_IDX_HEADS], n[I_IDX_DIM])
        entry_pool = entry_slots = entry_visible = threshold = None
        if rate:
            info = per_rate[rate]
            if info["w"] is not None:
                cw, sw, _ = rope_rows(n[I_COMP_ROPE], info["w"] * rate)
                compress_windows(p[P_ENTRIES], p[P_COMP_KV], p[P_COMP_GATE], w[W_COMP_APE], info["window_slots"],
                                 info["prior_slots"], info["has_prior"], bool(n[I_COMP_OVERLAP]), w[W_COMP_NORM],
                                 f[F_COMP_EPS], cw, sw, info["entry_out_slots"])
            entry_pool, entry_slots = p[P_ENTRIES], info["entry_slots"]
            if indexed:
                if info["w"] is not None:
                    cw, sw, _ = rope_rows(n[I_IDX_ROPE], info["w"] * rate)
                    compress_windows(p[P_IDX_ENTRIES], p[P_IDX_KV], p[P_IDX_GATE], w[W_IDX_APE],
                                     info["window_slots"], info["prior_slots"], info["has_prior"],
                                     bool(n[I_IDX_OVERLAP]), w[W_IDX_NORM], f[F_IDX_EPS], cw, sw,
                                     info["entry_out_slots"])
                if entry_slots.shape[1] == 0:
                    entry_visible = torch.zeros((b, 1, 0), dtype=torch.bool, device=streams.device)
                else:
                    heads = n[I_IDX_HEADS]
                    entry_visible = indexer_select(qi.view(b, 1, heads, n[I_IDX_DIM]),
                                                   y[:, n[I_HW_START]:n[I_HW_END]].view(b, 1, heads),
                                                   p[P_IDX_ENTRIES], entry_slots, info["threshold"],
                                                   f[F_IDX_QSCALE], f[F_IDX_WSCALE], n[I_TOPK], info["totals"])
            else:
                threshold = info["threshold"]
        heads, dim = n[I_HEADS], n[I_HEAD_DIM]
        core = sink_attention_paged(q.view(b, 1, heads, dim), p[P_KV], key_slots, window_visible, w[W_SINK],
                                    f[F_SCALE], entry_pool, entry_slots, entry_visible, threshold)
        return attn_back(core.reshape(b, heads, dim).contiguous(), c, s_inv, w[W_WO_A], n[I_GROUPS], w[W_WO_B])

    def feed(layer: int, x: torch.Tensor) -> torch.Tensor:
        w, n, f = record(weights, layer, WEIGHTS), record(ints, layer, INTS), record(floats, layer, FLOATS)
        hashed = w[W_TID2EID] is not None
        return moe_dense_experts(F.linear(x, w[W_MOE_UP]), n[I_MOE_EXPERTS], n[I_MOE_INTER], n[I_MOE_TOPK],
                                 SCORE_FUNCS[n[I_SCORE_FUNC]], w[W_TID2EID], input_ids if hashed else None,
                                 w[W_MOE_BIAS], f[F_MOE_SCALE], f[F_MOE_LIMIT], w[W_MOE_DOWN])

    return stack_layers(streams, len(ints) // INTS, sites, attend, feed, hc, iters, hc_eps, norm_eps)
