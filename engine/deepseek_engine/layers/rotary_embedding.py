"""Partial, interleaved rotary position embedding (plain and YaRN-scaled).

DeepSeek V4 rotates only the trailing ``rope_dim`` channels of every head and
pairs *adjacent* channels ``(2i, 2i+1)`` (interleaved layout).  Sliding-window
layers use the plain ``main`` rope; layers with a compressor (and the
compressors / indexer themselves) use the ``compress`` rope, optionally
YaRN-scaled.
"""

from __future__ import annotations

import math

import deepseek_kernels as ops
import torch
from torch import nn

from deepseek_engine.models.deepseek_v4.config import RopeSpec, yarn_mscale


def _inverse_frequencies(spec: RopeSpec, rope_dim: int) -> tuple[torch.Tensor, float]:
    base = float(spec.rope_theta)
    exponents = torch.arange(0, rope_dim, 2, dtype=torch.int64, device="cpu").float() / rope_dim
    if spec.rope_type == "default":
        return 1.0 / (base ** exponents), 1.0
    if spec.rope_type != "yarn":
        raise ValueError(f"unsupported rope_type {spec.rope_type!r}")
    factor = float(spec.factor)
    original = float(spec.original_max_position_embeddings)
    attention_factor = spec.attention_factor
    if attention_factor is None:
        if spec.mscale and spec.mscale_all_dim:
            attention_factor = yarn_mscale(factor, spec.mscale) / yarn_mscale(factor, spec.mscale_all_dim)
        else:
            attention_factor = yarn_mscale(factor)
    beta_fast = spec.beta_fast or 32
    beta_slow = spec.beta_slow or 1

    def correction_dim(rotations: float) -> float:
        return (rope_dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    # The correction range is always rounded outwards, whatever the spec's ``truncate`` says: the
    # reference implementation reads ``truncate`` from the outer {"main", "compress"} mapping,
    # where it never is, so it always truncates (as DeepSeek's own inference code does).
    low, high = math.floor(correction_dim(beta_fast)), math.ceil(correction_dim(beta_slow))
    low, high = max(low, 0), min(high, rope_dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(rope_dim // 2, dtype=torch.float32, device="cpu") - low) / (high - low), 0, 1)
    keep = 1 - ramp  # share of the un-interpolated frequency
    pos_freqs = base ** exponents
    inv = (1.0 / (factor * pos_freqs)) * (1 - keep) + (1.0 / pos_freqs) * keep
    return inv, float(attention_factor)


class RotaryEmbedding(nn.Module):
    """Produces half-width cos/sin tables for given absolute positions."""

    def __init__(self, spec: RopeSpec, rope_dim: int) -> None:
        super().__init__()
        inv_freq, scaling = _inverse_frequencies(spec, rope_dim)
        self.inv_freq = inv_freq  # plain CPU tensor: derived from the config, never loaded
        self.scaling = scaling
        self.rope_dim = rope_dim

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(cos, sin)`` of shape ``[T, rope_dim // 2]`` in ``dtype``."""
        if self.inv_freq.device != positions.device:
            self.inv_freq = self.inv_freq.to(positions.device)
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        return (freqs.cos() * self.scaling).to(dtype), (freqs.sin() * self.scaling).to(dtype)


def rotary_tables(cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Full-width float32 tables ``[T, R]`` for :func:`apply_rotary_tables`.

    ``c`` repeats every cosine for both channels of its pair; ``s`` holds ``-sin``
    for the even channel and ``sin`` for the odd one.
    """
    c = cos.float().repeat_interleave(2, dim=-1)
    s = sin.float()
    return c, torch.stack((-s, s), dim=-1).flatten(-2)


def apply_rotary_tables(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """:func:`apply_rotary` with tables from :func:`rotary_tables` (reusable across calls).

    Pair ``(e, o)`` becomes ``(e*cos - o*sin, o*cos + e*sin)``: the swapped pair
    ``(o, e)`` times ``s`` supplies the sine terms, exactly as in ``apply_rotary``.
    """
    return ops.rope(x, c, s)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the trailing ``2 * cos.shape[-1]`` channels of ``x`` (interleaved pairs).

    ``x`` is ``[T, ..., D]``; ``cos`` / ``sin`` are ``[T, R/2]`` and broadcast
    over the middle axes.  The rotation runs in float32.
    """
    return apply_rotary_tables(x, *rotary_tables(cos, sin))
