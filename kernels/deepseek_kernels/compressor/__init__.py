"""``compress_pool(kv, gate)``: pooling of a compressor's window (see ``reference.py``).

CPU: ``cpu.cpp``; CUDA / Ascend: ``triton.py``.
"""

from __future__ import annotations

from .._registry import entry_point, fake, triton_impl
from .reference import compress_pool_reference


@fake("compress_pool")
def _(kv, gate):
    return kv.new_empty(kv.shape[0], kv.shape[2])


triton_impl("compress_pool", "compressor.triton", "compress_pool_triton")


compress_pool = entry_point("compress_pool", compress_pool_reference)


__all__ = ["compress_pool", "compress_pool_reference"]
