"""Weight-only low-precision products with the weights kept in their stored format (packed once at load time,
:mod:`.pack`; formats in :mod:`.reference`).

* ``wo_linear(x, weight, scale, fmt, block_rows, block_cols)``: ``x @ dequant(weight).T``, GEMV / small-M GEMM.
* ``wo_experts(x, experts, weights, w13, s13, w2, s2, fmt, block_rows, block_cols, down_block_rows,
  down_block_cols, limit)``: a MoE layer's routed
  experts in one pass over the experts the tokens pick (tokens gathered per expert; no loop over all experts).

CPU: ``cpu.cpp`` (weights decoded eight at a time in AVX2 registers, scaled, FMA dot products; threads over output
rows, and over (expert, output rows) for the experts). CUDA / Ascend: the Triton kernel of ``triton.py`` (one
program per row of x and 64 outputs, weights decoded in registers); ``wo_experts`` gathers the (token, slot) pairs
and runs the same kernel with a per-row expert index.

Exactness: every dequantised weight has the reference's bits (decode, then one float32 multiplication by its
scale); only the order of the additions of each dot product differs (eight partial sums, fused multiply-adds).
So ``|kernel - reference| <= 2 * K * 2^-24 * (|x| @ |dequant(W)|.T)`` per output (the standard bound for two
summation orders of K products), and for the experts the same bound through both projections;
``tests/kernels/test_weight_only.py`` checks it for every format.
"""

from __future__ import annotations

from .._registry import entry_point, fake, triton_impl
from .pack import PackedWeight, pack, split_rows, stack_experts, stack_rows
from .reference import (
    BF16,
    FORMATS,
    FP8,
    INT8,
    MXFP4,
    dequantize_packed,
    wo_experts_reference,
    wo_linear_reference,
)


@fake("wo_linear")
def _(x, weight, scale, fmt, block_rows, block_cols):
    return x.new_empty(*x.shape[:-1], weight.shape[0])


@fake("wo_experts")
def _(x, experts, weights, w13, s13, w2, s2, fmt, block_rows, block_cols, down_block_rows, down_block_cols, limit):
    return x.new_empty(x.shape)


triton_impl("wo_linear", "weight_only.triton", "wo_linear_triton")
triton_impl("wo_experts", "weight_only.triton", "wo_experts_triton")

wo_linear = entry_point("wo_linear", wo_linear_reference)
wo_experts = entry_point("wo_experts", wo_experts_reference)


def packed_linear(x, packed: PackedWeight):
    """``wo_linear`` on a :class:`PackedWeight`."""
    return wo_linear(x, *packed.args())


def packed_experts(x, experts, weights, w13: PackedWeight, w2: PackedWeight, limit: float):
    """``wo_experts`` on stacked :class:`PackedWeight` experts (gate/up ``w13``, down ``w2``)."""
    if w13.fmt != w2.fmt:
        raise ValueError("the gate/up and down experts must share one format")
    return wo_experts(x, experts, weights, w13.weight, w13.scale, w2.weight, w2.scale, w13.fmt, w13.block_rows,
                      w13.block_cols, w2.block_rows, w2.block_cols, limit)


__all__ = ["BF16", "FORMATS", "FP8", "INT8", "MXFP4", "PackedWeight", "dequantize_packed", "pack", "packed_experts", "packed_linear", "split_rows",
           "stack_experts", "stack_rows", "wo_experts", "wo_experts_reference", "wo_linear", "wo_linear_reference"]
