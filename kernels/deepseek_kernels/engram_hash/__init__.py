"""``engram_hash``: V4.1's engram n-gram hashes and table rows (see ``reference.py``).

CPU: ``cpu.cpp`` (exact 64-bit integer arithmetic, the reference's wrap-around and floor modulo). CUDA /
Ascend: the Triton kernel of ``triton.py`` (the same integers, one program per token).
"""

from __future__ import annotations

from .._registry import entry_point, fake, triton_impl
from .reference import engram_hash_reference


@fake("engram_hash")
def _(compressed, positions, multipliers, primes, offsets, n_heads, pad_id, dead_id):
    return compressed.new_empty(positions.numel(), multipliers.shape[0], primes.shape[1])


triton_impl("engram_hash", "engram_hash.triton", "engram_hash_triton")


engram_hash = entry_point("engram_hash", engram_hash_reference)


__all__ = ["engram_hash", "engram_hash_reference"]
