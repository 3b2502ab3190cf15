"""PyTorch definition of compressor pooling: the window's KV rows weighted by a per-channel softmax of the gate
over the window axis (softmax in float32)."""

from __future__ import annotations

import torch


def compress_pool_reference(kv: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    weights = gate.softmax(dim=1, dtype=torch.float32).to(kv.dtype)
    return (kv * weights).sum(dim=1)
