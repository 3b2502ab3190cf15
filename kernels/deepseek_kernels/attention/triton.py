"""Triton attention with a sink logit: one program per (sequence, query, block of heads).

The heads of a query share one KV head, so a program holds ``BLOCK_H`` heads' queries as the rows of one
``tl.dot`` against a tile of keys (tensor cores: ``tcgen05.mma`` on SM100, ``wgmma`` on SM90). The online
softmax starts from the sink: running maximum ``sink[h]`` and running sum ``exp(sink - sink) = 1``, so the
sink takes its share of the probability without contributing a value.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._triton_common import pow2, upcast


@triton.jit
def sink_attention_kernel(q_ptr, k_ptr, vis_ptr, sink_ptr, out_ptr, TQ, H, K, D, scale,
                          BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
                          UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    row = tl.program_id(0)  # b * TQ + tq
    b = row // TQ
    hs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    ds = tl.arange(0, BLOCK_D)
    hm = hs < H
    dm = ds < D
    q = tl.load(q_ptr + (row * H + hs[:, None]) * D + ds[None, :], mask=hm[:, None] & dm[None, :], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    m = tl.load(sink_ptr + hs, mask=hm, other=0.0).to(tl.float32)
    l = tl.full([BLOCK_H], 1.0, tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_D], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        km = ks < K
        keys = tl.load(k_ptr + (b * K + ks[:, None]) * D + ds[None, :], mask=km[:, None] & dm[None, :], other=0.0)
        if UPCAST:
            keys = keys.to(tl.float32)
        vis = tl.load(vis_ptr + row * K + ks, mask=km, other=0) != 0
        s = tl.dot(q, tl.trans(keys), input_precision=PRECISION) * scale
        s = tl.where(vis[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        p = tl.where(vis[None, :], p, 0.0)
        l = l * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(keys.dtype), keys, input_precision=PRECISION)
        m = m_new
    out = acc / l[:, None]
    tl.store(out_ptr + (row * H + hs[:, None]) * D + ds[None, :], out.to(out_ptr.dtype.element_ty),
             mask=hm[:, None] & dm[None, :])


def sink_attention_triton(q: torch.Tensor, keys: torch.Tensor, visible: torch.Tensor, sink: torch.Tensor,
                          scale: float) -> torch.Tensor:
    b, tq, h, d = q.shape
    k = keys.shape[1]
    q, keys = q.contiguous(), keys.to(q.dtype).contiguous()
    vis = visible.to(torch.uint8).contiguous()
    out = torch.empty_like(q)
    if out.numel():
        bh = min(pow2(h), 64)
        precision = "ieee"  # exact float32 products (narrow dtypes ignore it; Ascend rejects tf32)
        sink_attention_kernel[(b * tq, triton.cdiv(h, bh))](
            q, keys, vis, sink.float().contiguous(), out, tq, h, k, d, scale, BLOCK_H=bh, BLOCK_K=32,
            BLOCK_D=pow2(d), UPCAST=upcast(q), PRECISION=precision)
    return out
