"""``rope(x, c, s)``: interleaved partial rotary embedding of ``x`` ``[T, ..., D]`` (see ``reference.py``).

CPU: ``cpu.cpp``; CUDA / Ascend: ``triton.py``.
"""

from __future__ import annotations

import torch

from .._registry import entry_point, fake, triton_impl
from .reference import rope_reference


@fake("rope")
def _(x, c, s):
    return torch.empty_like(x)


triton_impl("rope", "rope.triton", "rope_triton")


rope = entry_point("rope", rope_reference)


__all__ = ["rope", "rope_reference"]
