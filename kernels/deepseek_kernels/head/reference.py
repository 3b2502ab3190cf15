"""PyTorch definition of the greedy head: the arg-max of ``h @ weight.T`` per row (ties to the lowest ID)."""

from __future__ import annotations

import torch


def head_argmax_reference(h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.argmax(h.float() @ weight.float().T, dim=-1)
