"""Triton V4.1 compressor pooling: one program per group, the whole head width in one tile (the RMS norm
needs the full row). ``RATIO`` (1 or 2) is a constexpr; rows and the result are float32."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._triton_common import pow2


@triton.jit
def v41_compress_pool_kernel(rows_ptr, w_ptr, out_ptr, D, eps, RATIO: tl.constexpr, BLOCK_D: tl.constexpr):
    g = tl.program_id(0)
    ds = tl.arange(0, BLOCK_D)
    m = ds < D
    first = rows_ptr + g * RATIO * RATIO * D  # row g * RATIO of width RATIO * D
    if RATIO == 1:
        pooled = tl.load(first + ds, mask=m, other=0.0).to(tl.float32)
    else:
        second = first + 2 * D
        kv_a = tl.load(first + ds, mask=m, other=0.0).to(tl.float32)
        kv_b = tl.load(second + ds, mask=m, other=0.0).to(tl.float32)
        s_a = tl.load(first + D + ds, mask=m, other=0.0).to(tl.float32)
        s_b = tl.load(second + D + ds, mask=m, other=0.0).to(tl.float32)
        top = tl.maximum(s_a, s_b)
        e_a = tl.exp(s_a - top)
        e_b = tl.exp(s_b - top)
        total = e_a + e_b
        pooled = kv_a * (e_a / total) + kv_b * (e_b / total)
    inv = 1.0 / tl.sqrt(tl.sum(pooled * pooled, axis=0) / D + eps)
    w = tl.load(w_ptr + ds, mask=m, other=0.0).to(tl.float32)
    tl.store(out_ptr + g * D + ds, pooled * inv * w, mask=m)


def v41_compress_pool_triton(rows: torch.Tensor, ratio: int, norm_weight: torch.Tensor, eps: float) -> torch.Tensor:
    if ratio not in (1, 2) or rows.shape[0] % ratio or rows.shape[1] % ratio:
        raise ValueError("deepseek_kernels::v41_compress_pool: ratio must be 1 or 2 and rows whole groups")
    d = rows.shape[1] // ratio
    groups = rows.shape[0] // ratio
    out = torch.empty(groups, d, dtype=torch.float32, device=rows.device)
    if groups:
        v41_compress_pool_kernel[(groups,)](rows.float().contiguous(), norm_weight.float().contiguous(), out, d,
                                            float(eps), RATIO=ratio, BLOCK_D=pow2(d))
    return out
