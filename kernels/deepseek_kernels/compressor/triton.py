"""Triton compressor pooling: one program per (entry, block of channels), the window in one tile."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._triton_common import pow2


@triton.jit
def compress_pool_kernel(kv_ptr, gate_ptr, out_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    n = tl.program_id(0)
    cs = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    rs = tl.arange(0, BLOCK_R)
    m = (rs[:, None] < R) & (cs[None, :] < C)
    offs = n * R * C + rs[:, None] * C + cs[None, :]
    g = tl.load(gate_ptr + offs, mask=m, other=float("-inf")).to(tl.float32)
    g = tl.where(cs[None, :] < C, g, 0.0)  # columns past the edge: finite, so their (unused) lanes stay NaN-free
    kv = tl.load(kv_ptr + offs, mask=m, other=0.0).to(tl.float32)
    e = tl.exp(g - tl.max(g, axis=0)[None, :])
    e = tl.where(m, e, 0.0)
    w = e / tl.sum(e, axis=0)[None, :]
    tl.store(out_ptr + n * C + cs, tl.sum(kv * w, axis=0).to(out_ptr.dtype.element_ty), mask=cs < C)


def compress_pool_triton(kv: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    n, r, c = kv.shape
    out = torch.empty(n, c, dtype=kv.dtype, device=kv.device)
    if n:
        bc = min(pow2(c), 128)
        compress_pool_kernel[(n, triton.cdiv(c, bc))](kv.contiguous(), gate.contiguous(), out, r, c,
                                                      BLOCK_R=pow2(r, 2), BLOCK_C=bc)
    return out
