"""Triton lightning-indexer scores: one program per (query, block of entries); the indexer heads are the
rows of one ``tl.dot`` against the gathered entry rows."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._triton_common import pow2, upcast


@triton.jit
def indexer_scores_kernel(q_ptr, w_ptr, pool_ptr, slots_ptr, thr_ptr, out_ptr, TQ, HI, DI, N, qscale, wscale,
                          BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                          UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    row = tl.program_id(0)
    b = row // TQ
    ns = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    hs = tl.arange(0, BLOCK_H)
    ds = tl.arange(0, BLOCK_D)
    nm = ns < N
    hm = hs < HI
    dm = ds < DI
    q = tl.load(q_ptr + (row * HI + hs[:, None]) * DI + ds[None, :], mask=hm[:, None] & dm[None, :], other=0.0)
    slots = tl.load(slots_ptr + b * N + ns, mask=nm, other=0)
    e = tl.load(pool_ptr + slots[:, None] * DI + ds[None, :], mask=nm[:, None] & dm[None, :], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
        e = e.to(tl.float32)
    s = tl.dot(q, tl.trans(e.to(q.dtype)), input_precision=PRECISION)  # [BLOCK_H, BLOCK_N]
    w = tl.load(w_ptr + row * HI + hs, mask=hm, other=0.0).to(tl.float32) * wscale
    s = tl.maximum(s, 0.0) * qscale * w[:, None]
    total = tl.sum(s, axis=0)
    thr = tl.load(thr_ptr + row)
    total = tl.where(ns < thr, total, float("-inf"))
    tl.store(out_ptr + row * N + ns, total, mask=nm)


def indexer_scores_triton(q, weights, entry_pool, entry_slots, threshold, qscale: float, wscale: float):
    b, tq, hi, di = q.shape
    n = entry_slots.shape[1]
    out = torch.empty(b, tq, n, device=q.device)
    if out.numel():
        q = q.contiguous()
        precision = "ieee"  # exact float32 products (narrow dtypes ignore it; Ascend rejects tf32)
        indexer_scores_kernel[(b * tq, triton.cdiv(n, 32))](
            q, weights.contiguous(), entry_pool.contiguous(), entry_slots.contiguous(), threshold.contiguous(), out,
            tq, hi, di, n, qscale, wscale, BLOCK_H=pow2(hi), BLOCK_N=32, BLOCK_D=pow2(di), UPCAST=upcast(q),
            PRECISION=precision)
    return out
