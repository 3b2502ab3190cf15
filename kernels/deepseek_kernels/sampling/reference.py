"""PyTorch definition of exponential-race sampling: ``argmax(probs / noise)`` per row.

With ``noise ~ Exp(1)`` i.i.d. this picks index ``i`` with probability ``probs[i]``; the caller draws the
noise from the request's own generator, so the op itself is deterministic.
"""

from __future__ import annotations

import torch


def sample_tokens_reference(probs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    return torch.argmax(probs.float() / noise.float(), dim=-1)
