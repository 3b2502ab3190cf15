"""Triton ``engram_gate``: one program per (token, stream), the row's sums over ``D`` in one block."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._triton_common import pow2


@triton.jit
def engram_gate_kernel(h_ptr, kv_ptr, qw_ptr, kw_ptr, keep_ptr, out_ptr, D, eps, HC: tl.constexpr,
                       BLOCK_D: tl.constexpr):
    r = tl.program_id(0)
    i = tl.program_id(1)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    h = tl.load(h_ptr + (r * HC + i) * D + cols, mask=mask, other=0.0).to(tl.float32)
    key = tl.load(kv_ptr + r * (HC + 1) * D + i * D + cols, mask=mask, other=0.0).to(tl.float32)
    value = tl.load(kv_ptr + r * (HC + 1) * D + HC * D + cols, mask=mask, other=0.0).to(tl.float32)
    qw = tl.load(qw_ptr + i * D + cols, mask=mask, other=0.0).to(tl.float32)
    kw = tl.load(kw_ptr + i * D + cols, mask=mask, other=0.0).to(tl.float32)
    h_sq = tl.sum(h * h, axis=0)
    k_sq = tl.sum(key * key, axis=0)
    dot = tl.sum(h * qw * kw * key, axis=0)
    dot = dot * (1.0 / tl.sqrt(h_sq / D + eps)) * (1.0 / tl.sqrt(k_sq / D + eps)) / tl.sqrt(D.to(tl.float32))
    signed = tl.sqrt(tl.maximum(tl.abs(dot), 1e-6)) * tl.where(dot < 0, -1.0, 1.0)
    gate = (1.0 / (1.0 + tl.exp(-signed))) * tl.load(keep_ptr + r).to(tl.float32)
    tl.store(out_ptr + (r * HC + i) * D + cols, (h + gate * value).to(out_ptr.dtype.element_ty), mask=mask)


def engram_gate_triton(streams, kv, q_weight, k_weight, keep, eps: float):
    t, hc, d = streams.shape
    out = torch.empty_like(streams.contiguous())
    if t:
        engram_gate_kernel[(t, hc)](streams.contiguous(), kv.contiguous(), q_weight.contiguous(),
                                    k_weight.contiguous(), keep.to(torch.int8).contiguous(), out, d, eps, HC=hc,
                                    BLOCK_D=pow2(d))
    return out
