"""``rms_norm(x, weight, eps)``: RMS norm over the last axis, with an optional gain.

CPU: ``cpu.cpp`` (eight-lane partial sums added in lane order for rows of 16 or more channels). CUDA / Ascend:
the Triton kernel of ``triton.py``. Every device computes in float32 and returns ``x``'s dtype.
"""

from __future__ import annotations

import torch

from .._mode import reference_mode
from .._registry import device_impl, fake, op
from .reference import rms_norm_reference

_op = op("rms_norm")


@fake("rms_norm")
def _(x, weight, eps):
    return torch.empty_like(x)


def _accelerator(x, weight, eps):
    from .triton import rms_norm_triton

    return rms_norm_triton(x, weight, eps)


device_impl("rms_norm", _accelerator, "triton")


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    if reference_mode():
        return rms_norm_reference(x, weight, eps)
    return _op(x, weight, eps)


__all__ = ["rms_norm", "rms_norm_reference"]
