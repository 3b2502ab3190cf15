"""PyTorch reference of V4.1's engram n-gram hashing (table rows of every engram layer per token).

``compressed`` holds the tokenizer-normalised ids of positions ``positions[0] - L ..
positions[-1]`` (``L = max_ngram - 1`` lookback entries first; entries before position 0
may hold anything), ``dead_id`` for image tokens. For each token and engram layer, the
n-grams ending at it (n = 2 .. max_ngram) are hashed by a rolling XOR of ``id *
multiplier[layer, shift]``; an n-gram reaching before position 0 or across an image token
uses ``pad_id`` from there on. Hash ``h`` of head ``j`` selects row ``h mod prime[layer,
col] + offset[layer, col]`` (floor modulo, as Python's). Integer products wrap modulo 2^64.
"""

from __future__ import annotations

import torch


def engram_hash_reference(compressed: torch.Tensor, positions: torch.Tensor, multipliers: torch.Tensor,
                          primes: torch.Tensor, offsets: torch.Tensor, n_heads: int, pad_id: int,
                          dead_id: int) -> torch.Tensor:
    """``[T, layers, (max_ngram - 1) * n_heads]`` int64 table rows."""
    layers, max_ngram = multipliers.shape
    lookback = max_ngram - 1
    t = positions.numel()
    device = compressed.device
    rolling = torch.zeros((t, layers), dtype=torch.int64, device=device)
    blocked = torch.zeros(t, dtype=torch.bool, device=device)
    out = []
    base = torch.arange(t, device=device) + lookback
    for shift in range(max_ngram):
        source = compressed[base - shift]
        blocked = blocked | (positions - shift < 0) | (source == dead_id)
        value = torch.where(blocked, torch.full_like(source, pad_id), source)
        rolling = rolling ^ (value[:, None] * multipliers[None, :, shift])
        if shift:
            cols = slice((shift - 1) * n_heads, shift * n_heads)
            out.append(rolling[:, :, None] % primes[None, :, cols] + offsets[None, :, cols])
    return torch.cat(out, dim=-1)
