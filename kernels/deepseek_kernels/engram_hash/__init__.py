"""``engram_hash``: V4.1's engram n-gram hashes and table rows (see ``reference.py``).

CPU: ``cpu.cpp`` (exact 64-bit integer arithmetic, the reference's wrap-around and floor modulo). CUDA /
Ascend: the PyTorch reference on the device (no Triton kernel yet).
"""

from __future__ import annotations

from .._registry import device_impl, entry_point, fake
from .reference import engram_hash_reference


@fake("engram_hash")
def _(compressed, positions, multipliers, primes, offsets, n_heads, pad_id, dead_id):
    return compressed.new_empty(positions.numel(), multipliers.shape[0], primes.shape[1])


device_impl("engram_hash", engram_hash_reference, "PyTorch reference")


engram_hash = entry_point("engram_hash", engram_hash_reference)


__all__ = ["engram_hash", "engram_hash_reference"]
