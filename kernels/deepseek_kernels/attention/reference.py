"""PyTorch definitions of attention with a per-head sink logit.

Per query row: logits ``q . key * scale`` over the visible keys, a softmax over those logits and the
head's sink logit, then the probability-weighted sum of the keys (the single shared KV head is both key
and value). The sink takes probability mass but contributes no value.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sink_attention_reference(q: torch.Tensor, keys: torch.Tensor, visible: torch.Tensor, sink: torch.Tensor,
                             scale: float) -> torch.Tensor:
    """``q`` ``[B, Tq, H, D]``, ``keys`` ``[B, K, D]``, ``visible`` ``[B, Tq, K]`` -> ``[B, Tq, H, D]``."""
    b, tq, h, d = q.shape
    qf, kf = q.float(), keys.float()
    logits = torch.bmm(qf.reshape(b, tq * h, d), kf.transpose(1, 2)).view(b, tq, h, -1) * scale
    logits = torch.where(visible[:, :, None], logits, float("-inf"))
    sinks = sink.float().view(1, 1, h, 1).expand(b, tq, h, 1)
    logits = torch.cat([logits, sinks], dim=-1)
    logits = logits - logits.max(dim=-1, keepdim=True).values
    probs = F.softmax(logits, dim=-1)[..., :-1]
    out = torch.bmm(probs.reshape(b, tq * h, -1), kf).view(b, tq, h, d)
    return out.to(q.dtype)


def gather_paged_keys(kv_pool, key_slots, win_visible, entry_pool=None, entry_slots=None, entry_visible=None,
                      threshold=None):
    """The keys ``[B, K, D]`` and visibility ``[B, Tq, K]`` that ``sink_attention_paged`` reads from the pools."""
    b, kw = key_slots.shape
    keys = kv_pool.reshape(-1, kv_pool.shape[-1])[key_slots.flatten()].view(b, kw, kv_pool.shape[-1])
    visible = win_visible
    if entry_pool is not None:
        n = entry_slots.shape[1]
        entries = entry_pool.reshape(-1, entry_pool.shape[-1])[entry_slots.flatten()].view(b, n, entry_pool.shape[-1])
        if entry_visible is None:
            entry_visible = torch.arange(n, device=kv_pool.device)[None, None, :] < threshold[..., None]
        keys = torch.cat([keys, entries.to(keys.dtype)], dim=1)
        visible = torch.cat([visible, entry_visible], dim=2)
    return keys, visible


def sink_attention_paged_reference(q, kv_pool, key_slots, win_visible, sink, scale, entry_pool=None, entry_slots=None,
                                   entry_visible=None, threshold=None):
    keys, visible = gather_paged_keys(kv_pool, key_slots, win_visible, entry_pool, entry_slots, entry_visible,
                                      threshold)
    return sink_attention_reference(q, keys, visible, sink, scale)
