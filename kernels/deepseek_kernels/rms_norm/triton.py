"""Triton RMS norm: one program per row, the whole row in one block (rows up to 16K channels)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._triton_common import pow2


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, out_ptr, stride_x, D, eps, HAS_W: tl.constexpr, BLOCK_D: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / D + eps)
    y = x * inv
    if HAS_W:
        y = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32) * y
    tl.store(out_ptr + row * D + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm_triton(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    d = x.shape[-1]
    flat = x.reshape(-1, d)
    if flat.stride(-1) != 1:
        flat = flat.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    rows = flat.shape[0]
    if rows:
        w = weight.contiguous() if weight is not None else flat
        rms_norm_kernel[(rows,)](flat, w, out, flat.stride(0), d, eps, HAS_W=weight is not None, BLOCK_D=pow2(d))
    return out
