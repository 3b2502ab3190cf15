"""Triton row-independent linear map: one program per (row, block of outputs), the columns in fixed blocks.

Each program reads one row of ``x`` and ``BLOCK_M`` rows of ``weight`` and adds the column blocks' partial dots
in order; the blocking depends on the widths only, never on the number of rows, so a row's result is the same
whatever other rows share the call (a tensor-core GEMM would pick its tiles from the row count too).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._triton_common import pow2


@triton.jit
def row_linear_kernel(x_ptr, w_ptr, out_ptr, stride_x, N, M, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    block = tl.program_id(1)
    outs = block * BLOCK_M + tl.arange(0, BLOCK_M)
    out_mask = outs < M
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for k0 in range(0, N, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        col_mask = cols < N
        x = tl.load(x_ptr + row * stride_x + cols, mask=col_mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + outs[:, None] * N + cols[None, :], mask=out_mask[:, None] & col_mask[None, :],
                    other=0.0).to(tl.float32)
        acc += tl.sum(w * x[None, :], axis=1)
    tl.store(out_ptr + row * M + outs, acc.to(out_ptr.dtype.element_ty), mask=out_mask)


def row_linear_triton(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    n, m = x.shape[-1], weight.shape[0]
    flat = x.reshape(-1, n)
    if flat.stride(-1) != 1:
        flat = flat.contiguous()
    w = weight.contiguous()
    out = torch.empty(*x.shape[:-1], m, dtype=x.dtype, device=x.device)
    rows = flat.shape[0]
    if rows and m:
        block_m = 32
        row_linear_kernel[(rows, triton.cdiv(m, block_m))](flat, w, out, flat.stride(0), n, m, BLOCK_M=block_m,
                                                            BLOCK_K=min(128, pow2(n)))
    elif rows:
        out.zero_()
    return out
