"""``rope(x, c, s)``: interleaved partial rotary embedding of ``x`` ``[T, ..., D]`` (see ``reference.py``).

CPU: ``cpu.cpp``; CUDA / Ascend: ``triton.py``.
"""

from __future__ import annotations

import torch

from .._mode import reference_mode
from .._registry import device_impl, fake, op
from .reference import rope_reference

_op = op("rope")


@fake("rope")
def _(x, c, s):
    return torch.empty_like(x)


def _accelerator(x, c, s):
    from .triton import rope_triton

    return rope_triton(x, c, s)


device_impl("rope", _accelerator, "triton")


def rope(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    if reference_mode():
        return rope_reference(x, c, s)
    return _op(x, c, s)


__all__ = ["rope", "rope_reference"]
