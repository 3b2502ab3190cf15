"""Triton ``engram_hash``: one program per token, the reference's rolling XOR over the n-gram sizes for every
engram layer, in int64 (products wrap modulo 2^64 as the CPU kernel's uint64 ones; the row is the floor modulo
of the signed hash, as Python's ``%``)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def engram_hash_kernel(comp_ptr, pos_ptr, mult_ptr, prime_ptr, offset_ptr, out_ptr, LAYERS, pad_id, dead_id,
                       MAX_NGRAM: tl.constexpr, N_HEADS: tl.constexpr):
    r = tl.program_id(0)
    LOOKBACK: tl.constexpr = MAX_NGRAM - 1
    COLS: tl.constexpr = LOOKBACK * N_HEADS
    p = tl.load(pos_ptr + r)
    for layer in range(LAYERS):
        rolling = tl.zeros((), dtype=tl.int64)
        blocked = p < 0
        for s in tl.static_range(MAX_NGRAM):
            src = tl.load(comp_ptr + r + LOOKBACK - s)
            blocked = blocked | (p - s < 0) | (src == dead_id)
            value = tl.where(blocked, pad_id, src).to(tl.int64)
            rolling = rolling ^ (value * tl.load(mult_ptr + layer * MAX_NGRAM + s))
            if s > 0:
                for j in tl.static_range(N_HEADS):
                    col = (s - 1) * N_HEADS + j
                    prime = tl.load(prime_ptr + layer * COLS + col)
                    m = rolling % prime
                    m = tl.where(m < 0, m + prime, m)
                    tl.store(out_ptr + (r * LAYERS + layer) * COLS + col, m + tl.load(offset_ptr + layer * COLS + col))


def engram_hash_triton(compressed, positions, multipliers, primes, offsets, n_heads: int, pad_id: int, dead_id: int):
    layers, max_ngram = multipliers.shape
    t = positions.numel()
    cols = (max_ngram - 1) * n_heads
    if compressed.numel() != t + max_ngram - 1:
        raise ValueError("compressed must hold max_ngram - 1 lookback ids, then one per position")
    out = torch.empty(t, layers, cols, dtype=torch.int64, device=compressed.device)
    if t and layers:
        engram_hash_kernel[(t,)](compressed.contiguous(), positions.contiguous(), multipliers.contiguous(),
                                 primes.contiguous(), offsets.contiguous(), out, layers, pad_id, dead_id,
                                 MAX_NGRAM=max_ngram, N_HEADS=n_heads)
    return out
