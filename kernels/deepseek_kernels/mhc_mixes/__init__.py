"""``mhc_mixes(streams, fn, eps)``: a V4.1 hyper-connection site's mixes ``(x @ fn.T) * rsqrt(mean(x * x) + eps)``
of the flattened streams ``x`` (see ``reference.py``), the input of ``mhc_pre_delayed``.

CPU: ``cpu.cpp`` (``row_linear``'s sums; bit for bit the reference). CUDA / Ascend: the Triton kernel of
``triton.py`` (one program per row). Float32 result.
"""

from __future__ import annotations

import torch

from .._registry import entry_point, fake, triton_impl
from .reference import mhc_mixes_reference


@fake("mhc_mixes")
def _(streams, fn, eps):
    return streams.new_empty(streams.shape[0], fn.shape[0], dtype=torch.float32)


triton_impl("mhc_mixes", "mhc_mixes.triton", "mhc_mixes_triton")


mhc_mixes = entry_point("mhc_mixes", mhc_mixes_reference)


__all__ = ["mhc_mixes", "mhc_mixes_reference"]
