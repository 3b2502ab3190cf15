"""PyTorch definitions of the fused front and back of an attention block."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..rms_norm.reference import rms_norm_reference
from ..rope.reference import rope_reference


def attn_front_reference(proj, q_norm_w, q_eps, wq_b, n_heads, head_dim, head_eps, kv_norm_w, kv_eps, c, s, slots,
                         kv_pool, copy_offsets, copy_pools, idx_wq_b, idx_heads, idx_dim):
    """From the fused input projection ``proj`` ``[T, P]`` (q-LoRA input, shared KV, then the rest):
    ``q_latent = RMSNorm(proj[:, :qa])``, ``q = rope(rms_per_head(q_latent @ wq_b.T))``, the rotated normed
    shared KV stored at rows ``slots`` of ``kv_pool``, raw column ranges copied into ``copy_pools``, and
    (with ``idx_wq_b``) the rotated indexer queries. Returns ``(q_latent, q, qi)`` (``qi`` empty without)."""
    t = proj.shape[0]
    qa = q_norm_w.shape[0]
    q_latent = rms_norm_reference(proj[:, :qa], q_norm_w, q_eps)
    q = rms_norm_reference(F.linear(q_latent, wq_b).view(t, n_heads, head_dim), None, head_eps)
    q = rope_reference(q, c, s)
    kv = rope_reference(rms_norm_reference(proj[:, qa:qa + head_dim], kv_norm_w, kv_eps), c, s)
    kv_pool.reshape(-1, head_dim)[slots] = kv.to(kv_pool.dtype)
    for off, pool in zip(copy_offsets, copy_pools):
        w = pool.shape[-1]
        pool.reshape(-1, w)[slots] = proj[:, off:off + w].to(pool.dtype)
    if idx_wq_b is None:
        qi = proj.new_empty(0)
    else:
        qi = rope_reference(F.linear(q_latent, idx_wq_b).view(t, idx_heads, idx_dim), c, s)
    return q_latent, q, qi


def attn_back_reference(x, c, s, wo_a, groups: int, wo_b):
    """Heads' outputs ``x`` ``[T, H, D]`` rotated back (``s`` is the negated sine table), then the grouped
    ``wo_a`` (group ``g`` through its own rows) and ``wo_b``."""
    t = x.shape[0]
    out = rope_reference(x, c, s).reshape(t, groups, -1)
    w = wo_a.view(groups, -1, out.shape[-1]).transpose(1, 2)  # [G, in, rank]
    y = torch.bmm(out.transpose(0, 1), w).transpose(0, 1).reshape(t, -1)
    return F.linear(y, wo_b)
