"""Triton hyper-connection kernels: one program per token (and channel block for the stream products)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._triton_common import pow2


@triton.jit
def hc_merge_kernel(streams_ptr, block_ptr, post_ptr, comb_ptr, out_ptr, D, HC: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < D
    blk = tl.load(block_ptr + t * D + cols, mask=mask, other=0.0).to(tl.float32)
    for j in tl.static_range(HC):
        acc = tl.load(comb_ptr + t * HC * HC + j) * tl.load(streams_ptr + t * HC * D + cols, mask=mask,
                                                              other=0.0).to(tl.float32)
        for i in tl.static_range(1, HC):
            st = tl.load(streams_ptr + (t * HC + i) * D + cols, mask=mask, other=0.0).to(tl.float32)
            acc = acc + tl.load(comb_ptr + t * HC * HC + i * HC + j) * st
        y = tl.load(post_ptr + t * HC + j) * blk + acc
        tl.store(out_ptr + (t * HC + j) * D + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def hc_weights_kernel(mix_ptr, base_ptr, scale_ptr, pre_ptr, post_ptr, comb_ptr, iters, hc_eps,
                      HC: tl.constexpr, BLOCK: tl.constexpr):
    """pre / post (sigmoids) and comb (row softmax, then Sinkhorn) of one token, as [BLOCK, BLOCK] tiles."""
    t = tl.program_id(0)
    W: tl.constexpr = (2 + HC) * HC
    i = tl.arange(0, BLOCK)
    vm = i < HC
    ps = tl.load(scale_ptr + 0)
    qs = tl.load(scale_ptr + 1)
    cs = tl.load(scale_ptr + 2)
    a = tl.load(mix_ptr + t * W + i, mask=vm, other=0.0) * ps + tl.load(base_ptr + i, mask=vm, other=0.0)
    tl.store(pre_ptr + t * HC + i, 1.0 / (1.0 + tl.exp(-a)) + hc_eps, mask=vm)
    b = tl.load(mix_ptr + t * W + HC + i, mask=vm, other=0.0) * qs + tl.load(base_ptr + HC + i, mask=vm, other=0.0)
    tl.store(post_ptr + t * HC + i, 2.0 * (1.0 / (1.0 + tl.exp(-b))), mask=vm)
    r = i[:, None]
    c = i[None, :]
    m2 = (r < HC) & (c < HC)
    v = tl.load(mix_ptr + t * W + 2 * HC + r * HC + c, mask=m2, other=0.0) * cs
    v = v + tl.load(base_ptr + 2 * HC + r * HC + c, mask=m2, other=0.0)
    v = tl.where(m2, v, float("-inf"))
    e = tl.exp(v - tl.max(v, axis=1)[:, None])
    e = tl.where(m2, e, 0.0)
    comb = e / tl.sum(e, axis=1)[:, None] + hc_eps
    comb = tl.where(m2, comb, 0.0)
    comb = comb / (tl.sum(comb, axis=0)[None, :] + hc_eps)
    for _ in range(iters - 1):
        comb = comb / (tl.sum(comb, axis=1)[:, None] + hc_eps)
        comb = comb / (tl.sum(comb, axis=0)[None, :] + hc_eps)
    tl.store(comb_ptr + t * HC * HC + r * HC + c, comb, mask=m2)


@triton.jit
def hc_collapse_kernel(streams_ptr, pre_ptr, out_ptr, D, HC: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < D
    acc = tl.load(pre_ptr + t * HC) * tl.load(streams_ptr + t * HC * D + cols, mask=mask, other=0.0).to(tl.float32)
    for i in tl.static_range(1, HC):
        acc = acc + tl.load(pre_ptr + t * HC + i) * tl.load(streams_ptr + (t * HC + i) * D + cols, mask=mask,
                                                            other=0.0).to(tl.float32)
    tl.store(out_ptr + t * D + cols, acc.to(out_ptr.dtype.element_ty), mask=mask)


def hc_merge_triton(streams, block, post, comb):
    t, hc, d = streams.shape
    streams, block = streams.contiguous(), block.contiguous()
    out = torch.empty_like(streams)
    if t:
        bd = min(pow2(d), 1024)
        hc_merge_kernel[(t, triton.cdiv(d, bd))](streams, block, post.float().contiguous(), comb.float().contiguous(),
                                                 out, d, HC=hc, BLOCK_D=bd)
    return out


def hc_mix_triton(mixes, base, scale, hc: int, iters: int, hc_eps: float, streams):
    t, d = streams.shape[0], streams.shape[-1]
    dev = streams.device
    pre = torch.empty(t, hc, device=dev)
    post = torch.empty(t, hc, device=dev)
    comb = torch.empty(t, hc, hc, device=dev)
    collapsed = torch.empty(t, d, dtype=streams.dtype, device=dev)
    if t:
        hc_weights_kernel[(t,)](mixes.float().contiguous(), base.float().contiguous(), scale.float().contiguous(),
                                pre, post, comb, iters, hc_eps, HC=hc, BLOCK=pow2(hc, 2))
        bd = min(pow2(d), 1024)
        hc_collapse_kernel[(t, triton.cdiv(d, bd))](streams.contiguous(), pre, collapsed, d, HC=hc, BLOCK_D=bd)
    return pre, post, comb, collapsed
