"""PyTorch definition of ``engram_gate``: V4.1's engram update of the hyper-connection streams.

Per token and stream ``i``: ``h_i + sigmoid(signed_sqrt(<h_i * q_w_i * k_w_i, key_i> * rms(h_i) * rms(key_i) /
sqrt(D))) * value`` where ``kv`` holds the ``hc`` keys then the value, ``rms(v) = rsqrt(mean(v * v) + eps)`` and
``signed_sqrt(d) = sign(d) * sqrt(max(|d|, 1e-6))``; tokens with ``keep`` false get no update. Float32 arithmetic,
the three row sums in ``row_linear``'s fixed order.
"""

from __future__ import annotations

import torch

from ..row_linear.reference import row_linear_reference

SIGNED_SQRT_FLOOR = 1e-6


def engram_gate_reference(streams: torch.Tensor, kv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
                          keep: torch.Tensor, eps: float) -> torch.Tensor:
    """``streams [T, hc, D]``, ``kv [T, (hc + 1) * D]``, weights ``[hc, D]``, ``keep [T]`` -> ``[T, hc, D]``."""
    t, hc, dim = streams.shape
    h = streams.float()
    keys = kv.float()[:, : hc * dim].view(t, hc, dim)
    value = kv.float()[:, hc * dim:]
    parts = torch.stack((h.square(), keys.square(), h * q_weight.float() * k_weight.float() * keys))
    h_sq, k_sq, dot = row_linear_reference(parts, torch.ones(1, dim, device=streams.device)).squeeze(-1)
    dot = dot * torch.rsqrt(h_sq / dim + eps) * torch.rsqrt(k_sq / dim + eps) * dim**-0.5
    signed = torch.sqrt(dot.abs().clamp_min(SIGNED_SQRT_FLOOR)) * torch.where(dot < 0, -1.0, 1.0)
    gate = torch.sigmoid(signed) * keep[:, None].float()
    return (h + gate[..., None] * value[:, None, :]).to(streams.dtype)
