"""``sample_tokens(probs, noise)``: exponential-race sampling of one token per row (see ``reference.py``).

CPU: ``cpu.cpp``; CUDA / Ascend: ``triton.py`` (a per-row arg-max reduction of ``probs / noise``).
"""

from __future__ import annotations

import torch

from .._mode import reference_mode
from .._registry import device_impl, fake, op
from .reference import sample_tokens_reference

_op = op("sample_tokens")


@fake("sample_tokens")
def _(probs, noise):
    return probs.new_empty(probs.shape[0], dtype=torch.long)


def _accelerator(probs, noise):
    from .triton import sample_tokens_triton

    return sample_tokens_triton(probs, noise)


device_impl("sample_tokens", _accelerator, "triton")


def sample_tokens(probs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    if reference_mode():
        return sample_tokens_reference(probs, noise)
    return _op(probs, noise)


__all__ = ["sample_tokens", "sample_tokens_reference"]
