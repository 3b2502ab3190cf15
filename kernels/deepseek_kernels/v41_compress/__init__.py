"""``v41_compress_pool``: V4.1's ratio-1 / ratio-2 compressor pooling and norm (see ``reference.py``).

CPU: ``cpu.cpp``. CUDA / Ascend: ``triton.py``.
"""

from __future__ import annotations

from .._registry import entry_point, fake, triton_impl
from .reference import v41_compress_pool_reference


@fake("v41_compress_pool")
def _(rows, ratio, norm_weight, eps):
    return rows.new_empty(rows.shape[0] // ratio, rows.shape[1] // ratio)


triton_impl("v41_compress_pool", "v41_compress.triton", "v41_compress_pool_triton")


v41_compress_pool = entry_point("v41_compress_pool", v41_compress_pool_reference)


__all__ = ["v41_compress_pool", "v41_compress_pool_reference"]
