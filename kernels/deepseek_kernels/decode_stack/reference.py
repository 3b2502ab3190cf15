"""``decode_stack``: a decode step's whole decoder stack, written as the composition of the other ops.

Every sequence of the step adds one token (``B`` rows). Per layer: the hyper-connection boundary before
attention (``hc_step``), the fused input product, ``attn_front``, the compressor's and the indexer
compressor's closing windows (``compress_windows``), the indexer's choice (``indexer_select``),
``sink_attention_paged``, ``attn_back``; then the boundary before the MoE and ``moe_dense_experts`` after
the stacked up-projection. The last block is merged into the streams (``hc_merge``), which are returned.

The arguments are flat lists with a fixed stride per layer, indexed by the constants below (the C++ kernel
reads the same positions):

* ``weights`` (``WEIGHTS`` per layer): parameters, and the derived stacked matrices of the fused input
  product and of the experts;
* ``ints`` / ``floats``: per-layer sizes and settings;
* ``step`` (``STEP`` per layer): this step's tensors: rotary rows, the layer's compression-rate gather
  indices, the closing windows' indices and rotary rows (``None`` when no window closes), and the layer's
  paged pools;
* ``totals``: for each layer with an indexer, in layer order, one row length per sequence (the reference's
  ranking length, ``indexer_select``'s ``totals``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

# weights, per layer
(W_HC_ATTN_FN, W_HC_ATTN_BASE, W_HC_ATTN_SCALE, W_ATTN_NORM, W_HC_FFN_FN, W_HC_FFN_BASE, W_HC_FFN_SCALE, W_FFN_NORM,
 W_FUSED, W_Q_NORM, W_WQ_B, W_KV_NORM, W_IDX_WQ_B, W_COMP_APE, W_COMP_NORM, W_IDX_APE, W_IDX_NORM, W_SINK, W_WO_A,
 W_WO_B, W_MOE_UP, W_MOE_DOWN, W_TID2EID, W_MOE_BIAS) = range(24)
WEIGHTS = 24
# ints, per layer
(I_HEADS, I_HEAD_DIM, I_IDX_HEADS, I_IDX_DIM, I_GROUPS, I_RATE, I_HAS_INDEXER, I_HW_START, I_HW_END, I_TOPK,
 I_COMP_OVERLAP, I_IDX_OVERLAP, I_MOE_EXPERTS, I_MOE_INTER, I_MOE_TOPK, I_SCORE_FUNC, I_COPIES, I_COPY_OFFSETS) = range(18)
MAX_COPIES = 4
#: ``ints[I_SCORE_FUNC]`` indexes this (the routing score function's name)
SCORE_FUNCS = ("sqrtsoftplus", "softmax", "sigmoid")
INTS = I_COPY_OFFSETS + MAX_COPIES
# floats, per layer
(F_ATTN_NORM_EPS, F_FFN_NORM_EPS, F_Q_EPS, F_HEAD_EPS, F_KV_EPS, F_SCALE, F_COMP_EPS, F_IDX_EPS, F_IDX_QSCALE,
 F_IDX_WSCALE, F_MOE_SCALE, F_MOE_LIMIT) = range(12)
FLOATS = 12
# step tensors, per layer
(S_COS, S_SIN, S_COS_INV, S_SIN_INV, S_ENTRY_SLOTS, S_THRESHOLD, S_WINDOW_SLOTS, S_PRIOR_SLOTS, S_HAS_PRIOR,
 S_ENTRY_OUT_SLOTS, S_COMP_COS, S_COMP_SIN, S_IDX_COS, S_IDX_SIN, S_KV, S_COMP_KV, S_COMP_GATE, S_ENTRIES, S_IDX_KV,
 S_IDX_GATE, S_IDX_ENTRIES) = range(21)
STEP = 21


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


def decode_stack_reference(streams: torch.Tensor, input_ids: torch.Tensor, slots: torch.Tensor,
                           key_slots: torch.Tensor, window_visible: torch.Tensor, weights: list, ints: list[int],
                           floats: list[float], step: list, totals: list[int], hc: int, iters: int, hc_eps: float,
                           norm_eps: float) -> torch.Tensor:
    from .. import (
        attn_back,
        attn_front,
        compress_windows,
        indexer_select,
        moe_dense_experts,
        sink_attention_paged,
    )

    b = streams.shape[0]
    used = [0]  # entries of ``totals`` read so far

    def record(values: list, layer: int, width: int) -> list:
        return values[layer * width:(layer + 1) * width]

    def sites(layer: int) -> tuple[tuple, tuple]:
        w, f = record(weights, layer, WEIGHTS), record(floats, layer, FLOATS)
        return ((w[W_HC_ATTN_FN], w[W_HC_ATTN_BASE], w[W_HC_ATTN_SCALE], w[W_ATTN_NORM], f[F_ATTN_NORM_EPS]),
                (w[W_HC_FFN_FN], w[W_HC_FFN_BASE], w[W_HC_FFN_SCALE], w[W_FFN_NORM], f[F_FFN_NORM_EPS]))

    def attend(layer: int, x: torch.Tensor) -> torch.Tensor:
        w, n = record(weights, layer, WEIGHTS), record(ints, layer, INTS)
        f, s = record(floats, layer, FLOATS), record(step, layer, STEP)
        y = F.linear(x, w[W_FUSED])
        rate, indexed = n[I_RATE], bool(n[I_HAS_INDEXER])
        copy_pools = ([s[S_COMP_KV], s[S_COMP_GATE]] if rate else []) + \
            ([s[S_IDX_KV], s[S_IDX_GATE]] if indexed else [])
        offsets = list(n[I_COPY_OFFSETS:I_COPY_OFFSETS + n[I_COPIES]])
        _, q, qi = attn_front(y, w[W_Q_NORM], f[F_Q_EPS], w[W_WQ_B], n[I_HEADS], n[I_HEAD_DIM], f[F_HEAD_EPS],
                              w[W_KV_NORM], f[F_KV_EPS], s[S_COS], s[S_SIN], slots, s[S_KV], offsets, copy_pools,
                              w[W_IDX_WQ_B], n[I_IDX_HEADS], n[I_IDX_DIM])
        entry_pool = entry_slots = entry_visible = threshold = None
        if rate:
            closing = s[S_WINDOW_SLOTS] is not None
            if closing:
                compress_windows(s[S_ENTRIES], s[S_COMP_KV], s[S_COMP_GATE], w[W_COMP_APE], s[S_WINDOW_SLOTS],
                                 s[S_PRIOR_SLOTS], s[S_HAS_PRIOR], bool(n[I_COMP_OVERLAP]), w[W_COMP_NORM],
                                 f[F_COMP_EPS], s[S_COMP_COS], s[S_COMP_SIN], s[S_ENTRY_OUT_SLOTS])
            entry_pool, entry_slots = s[S_ENTRIES], s[S_ENTRY_SLOTS]
            if indexed:
                if closing:
                    compress_windows(s[S_IDX_ENTRIES], s[S_IDX_KV], s[S_IDX_GATE], w[W_IDX_APE], s[S_WINDOW_SLOTS],
                                     s[S_PRIOR_SLOTS], s[S_HAS_PRIOR], bool(n[I_IDX_OVERLAP]), w[W_IDX_NORM],
                                     f[F_IDX_EPS], s[S_IDX_COS], s[S_IDX_SIN], s[S_ENTRY_OUT_SLOTS])
                row_lengths = list(totals[used[0]:used[0] + b])
                used[0] += b
                if entry_slots.shape[1] == 0:
                    entry_visible = torch.zeros((b, 1, 0), dtype=torch.bool, device=streams.device)
                else:
                    heads = n[I_IDX_HEADS]
                    entry_visible = indexer_select(qi.view(b, 1, heads, n[I_IDX_DIM]),
                                                   y[:, n[I_HW_START]:n[I_HW_END]].view(b, 1, heads),
                                                   s[S_IDX_ENTRIES], entry_slots, s[S_THRESHOLD], f[F_IDX_QSCALE],
                                                   f[F_IDX_WSCALE], n[I_TOPK], row_lengths)
            else:
                threshold = s[S_THRESHOLD]
        heads, dim = n[I_HEADS], n[I_HEAD_DIM]
        core = sink_attention_paged(q.view(b, 1, heads, dim), s[S_KV], key_slots, window_visible, w[W_SINK],
                                    f[F_SCALE], entry_pool, entry_slots, entry_visible, threshold)
        return attn_back(core.reshape(b, heads, dim).contiguous(), s[S_COS_INV], s[S_SIN_INV], w[W_WO_A],
                         n[I_GROUPS], w[W_WO_B])

    def feed(layer: int, x: torch.Tensor) -> torch.Tensor:
        w, n, f = record(weights, layer, WEIGHTS), record(ints, layer, INTS), record(floats, layer, FLOATS)
        hashed = w[W_TID2EID] is not None
        return moe_dense_experts(F.linear(x, w[W_MOE_UP]), n[I_MOE_EXPERTS], n[I_MOE_INTER], n[I_MOE_TOPK],
                                 SCORE_FUNCS[n[I_SCORE_FUNC]], w[W_TID2EID], input_ids if hashed else None,
                                 w[W_MOE_BIAS], f[F_MOE_SCALE], f[F_MOE_LIMIT], w[W_MOE_DOWN])

    return stack_layers(streams, len(ints) // INTS, sites, attend, feed, hc, iters, hc_eps, norm_eps)
