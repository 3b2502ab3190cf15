"""Triton ``mhc_mixes``: one program per token row, all mixes in one block; the column blocks (and the sum of
squares) fixed by the widths, so a row's result never depends on the other rows."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._triton_common import pow2


@triton.jit
def mhc_mixes_kernel(x_ptr, w_ptr, out_ptr, N, M, eps, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    outs = tl.arange(0, BLOCK_M)
    out_mask = outs < M
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    sq = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for k0 in range(0, N, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        col_mask = cols < N
        x = tl.load(x_ptr + row * N + cols, mask=col_mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + outs[:, None] * N + cols[None, :], mask=out_mask[:, None] & col_mask[None, :],
                    other=0.0).to(tl.float32)
        acc += tl.sum(w * x[None, :], axis=1)
        sq += x * x
    inv = 1.0 / tl.sqrt(tl.sum(sq, axis=0) / N + eps)
    tl.store(out_ptr + row * M + outs, acc * inv, mask=out_mask)


def mhc_mixes_triton(streams: torch.Tensor, fn: torch.Tensor, eps: float) -> torch.Tensor:
    t = streams.shape[0]
    x = streams.reshape(t, -1).contiguous()
    n, m = x.shape[1], fn.shape[0]
    out = torch.empty(t, m, dtype=torch.float32, device=streams.device)
    if t:
        mhc_mixes_kernel[(t,)](x, fn.contiguous(), out, n, m, eps, BLOCK_M=pow2(m), BLOCK_K=min(256, pow2(n)))
    return out
