"""PyTorch definitions of compressor pooling (the window's KV rows weighted by a per-channel softmax of the gate
over the window axis, softmax in float32) and of a step's whole window compression (``compress_windows``)."""

from __future__ import annotations

import torch

from ..rms_norm.reference import rms_norm_reference
from ..rope.reference import rope_reference


def compress_pool_reference(kv: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    weights = gate.softmax(dim=1, dtype=torch.float32).to(kv.dtype)
    return (kv * weights).sum(dim=1)


def compress_windows_reference(entry_pool: torch.Tensor, kv_pool: torch.Tensor, gate_pool: torch.Tensor,
                               ape: torch.Tensor, window_slots: torch.Tensor, prior_slots: torch.Tensor,
                               has_prior: torch.Tensor, overlap: bool, norm_weight: torch.Tensor, eps: float,
                               c: torch.Tensor, s: torch.Tensor, out_slots: torch.Tensor) -> None:
    """Pool the compression windows that a step closes and store their entries (mutates ``entry_pool``).

    Window ``i`` reads the rows ``window_slots[i]`` ``[n, r]`` of the paged ``kv_pool`` / ``gate_pool`` (``ape``
    added to the gate). With ``overlap`` (CSA) the pooled axis is the previous window's first ``d`` channels
    (rows ``prior_slots[i]``; zero KV and ``-inf`` gate where ``has_prior`` is false, the first window) followed by
    this window's last ``d`` channels, ``d`` the entry width; without it (HCA) the window's rows as they are. Then
    ``compress_pool``, the RMS norm with ``norm_weight`` / ``eps``, the rotary embedding with the tables ``c``,
    ``s`` ``[n, R]`` of each entry's position, and the result goes to the rows ``out_slots`` of ``entry_pool``.
    """
    n, r = window_slots.shape
    d, width = entry_pool.shape[-1], kv_pool.shape[-1]
    kv_rows, gate_rows = kv_pool.view(-1, width), gate_pool.view(-1, width)
    kv = kv_rows.index_select(0, window_slots.flatten()).view(n, r, width)
    gate = gate_rows.index_select(0, window_slots.flatten()).view(n, r, width) + ape
    if overlap:
        prior_kv = kv_rows.index_select(0, prior_slots.flatten()).view(n, r, width)[..., :d]
        prior_gate = (gate_rows.index_select(0, prior_slots.flatten()).view(n, r, width) + ape)[..., :d]
        has = has_prior.view(n, 1, 1)
        prior_kv = torch.where(has, prior_kv, torch.zeros_like(prior_kv))
        prior_gate = torch.where(has, prior_gate, torch.full_like(prior_gate, float("-inf")))
        kv = torch.cat([prior_kv, kv[..., d:]], dim=1)
        gate = torch.cat([prior_gate, gate[..., d:]], dim=1)
    pooled = rms_norm_reference(compress_pool_reference(kv, gate), norm_weight, eps)
    entry_pool.view(-1, d).index_copy_(0, out_slots, rope_reference(pooled, c, s).to(entry_pool.dtype))
