"""``rms_norm(x, weight, eps)``: RMS norm over the last axis, with an optional gain.

CPU: ``cpu.cpp`` (eight-lane partial sums added in lane order for rows of 16 or more channels). CUDA / Ascend:
the Triton kernel of ``triton.py``. Every device computes in float32 and returns ``x``'s dtype.
"""

from __future__ import annotations

import torch

from .._registry import entry_point, fake, triton_impl
from .reference import rms_norm_reference


@fake("rms_norm")
def _(x, weight, eps):
    return torch.empty_like(x)


triton_impl("rms_norm", "rms_norm.triton", "rms_norm_triton")


rms_norm = entry_point("rms_norm", rms_norm_reference)


__all__ = ["rms_norm", "rms_norm_reference"]
