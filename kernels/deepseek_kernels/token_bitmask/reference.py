"""PyTorch definition of applying a token bitmask in place: disallowed logits become ``-inf``.

``bitmask`` is int32 ``[R, W]``: token ``v`` of row ``r`` is allowed when bit ``v % 32`` of word
``bitmask[r, v // 32]`` is set (the layout grammar matchers fill, e.g. ``GrammarMatcher.fill_bitmask``).
Tokens at or beyond ``32 * W`` are disallowed (a matcher over a smaller vocabulary than the model's head);
bits beyond the logits' width are ignored. Allowed logits are left as they are.
"""

from __future__ import annotations

import torch


def token_allowed(bitmask: torch.Tensor, vocab: int) -> torch.Tensor:
    """The bitmask as booleans ``[R, vocab]`` (``True``: allowed)."""
    rows = bitmask.shape[0]
    shifts = torch.arange(32, dtype=torch.int32, device=bitmask.device)
    bits = ((bitmask.to(torch.int32).unsqueeze(-1) >> shifts) & 1).bool().reshape(rows, -1)
    if bits.shape[1] < vocab:
        bits = torch.cat([bits, bits.new_zeros(rows, vocab - bits.shape[1])], dim=1)
    return bits[:, :vocab]


def apply_token_bitmask_reference(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
    logits.masked_fill_(~token_allowed(bitmask, logits.shape[1]).to(logits.device), float("-inf"))
