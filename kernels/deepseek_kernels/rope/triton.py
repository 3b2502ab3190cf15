"""Triton rotary embedding: one program per (token, inner row); the partner of channel ``j`` is ``j ^ 1``."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._triton_common import pow2


@triton.jit
def rope_kernel(x_ptr, c_ptr, s_ptr, out_ptr, INNER, D, R, BLOCK_D: tl.constexpr):
    row = tl.program_id(0)
    t = row // INNER
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    x = tl.load(x_ptr + row * D + cols, mask=mask, other=0.0)
    rot = cols >= D - R
    j = cols - (D - R)  # position inside the rotated channels
    rmask = mask & rot
    partner = tl.load(x_ptr + row * D + ((D - R) + (j ^ 1)), mask=rmask, other=0.0).to(tl.float32)
    c = tl.load(c_ptr + t * R + j, mask=rmask, other=0.0)
    s = tl.load(s_ptr + t * R + j, mask=rmask, other=0.0)
    y = tl.where(rot, x.to(tl.float32) * c + partner * s, x.to(tl.float32))
    tl.store(out_ptr + row * D + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def rope_triton(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    t, d, r = x.shape[0], x.shape[-1], c.shape[-1]
    out = torch.empty_like(x)
    rows = x.numel() // d if d else 0
    if rows:
        rope_kernel[(rows,)](x, c.float().contiguous(), s.float().contiguous(), out, rows // t, d, r,
                             BLOCK_D=pow2(d))
    return out
