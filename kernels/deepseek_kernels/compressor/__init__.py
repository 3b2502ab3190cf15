"""``compress_pool(kv, gate)``: pooling of a compressor's window (see ``reference.py``).

CPU: ``cpu.cpp``; CUDA / Ascend: ``triton.py``.
"""

from __future__ import annotations

from .._mode import reference_mode
from .._registry import device_impl, fake, op
from .reference import compress_pool_reference

_op = op("compress_pool")


@fake("compress_pool")
def _(kv, gate):
    return kv.new_empty(kv.shape[0], kv.shape[2])


def _accelerator(kv, gate):
    from .triton import compress_pool_triton

    return compress_pool_triton(kv, gate)


device_impl("compress_pool", _accelerator, "triton")


def compress_pool(kv, gate):
    if reference_mode():
        return compress_pool_reference(kv, gate)
    return _op(kv, gate)


__all__ = ["compress_pool", "compress_pool_reference"]
