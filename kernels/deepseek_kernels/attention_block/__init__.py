"""The per-token work around the attention core, fused for the CPU decode step.

* ``attn_front``: q-LoRA norm, query up-projection, per-head norm, RoPE, the shared KV's norm and RoPE, the
  stores into the paged pools (mutates ``kv_pool`` and ``copy_pools``), and the indexer queries.
* ``attn_back``: inverse RoPE and the grouped output projection.

CPU: ``cpu.cpp``. CUDA / Ascend: the composition in ``reference.py`` (GEMMs, and the rms_norm / rope ops).
"""

from __future__ import annotations

import torch

from .._mode import reference_mode
from .._registry import device_impl, fake, op
from .reference import attn_back_reference, attn_front_reference

_front, _back = op("attn_front"), op("attn_back")


@fake("attn_front")
def _(proj, q_norm_w, q_eps, wq_b, n_heads, head_dim, head_eps, kv_norm_w, kv_eps, c, s, slots, kv_pool,
      copy_offsets, copy_pools, idx_wq_b, idx_heads, idx_dim):
    t = proj.shape[0]
    qi = proj.new_empty(t, idx_heads, idx_dim) if idx_wq_b is not None else proj.new_empty(0)
    return proj.new_empty(t, q_norm_w.shape[0]), proj.new_empty(t, n_heads, head_dim), qi


@fake("attn_back")
def _(x, c, s, wo_a, groups, wo_b):
    return x.new_empty(x.shape[0], wo_b.shape[0])


device_impl("attn_front", attn_front_reference, "PyTorch composition")
device_impl("attn_back", attn_back_reference, "PyTorch composition")


def attn_front(proj, q_norm_w, q_eps: float, wq_b, n_heads: int, head_dim: int, head_eps: float, kv_norm_w,
               kv_eps: float, c, s, slots, kv_pool, copy_offsets: list[int], copy_pools: list[torch.Tensor],
               idx_wq_b=None, idx_heads: int = 0, idx_dim: int = 0):
    fn = attn_front_reference if reference_mode() else _front
    return fn(proj, q_norm_w, q_eps, wq_b, n_heads, head_dim, head_eps, kv_norm_w, kv_eps, c, s, slots, kv_pool,
              copy_offsets, copy_pools, idx_wq_b, idx_heads, idx_dim)


def attn_back(x, c, s, wo_a, groups: int, wo_b):
    if reference_mode():
        return attn_back_reference(x, c, s, wo_a, groups, wo_b)
    return _back(x, c, s, wo_a, groups, wo_b)


__all__ = ["attn_front", "attn_back", "attn_front_reference", "attn_back_reference"]
