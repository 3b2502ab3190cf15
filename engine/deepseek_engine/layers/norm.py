"""RMS normalisation layers used throughout DeepSeek V4 (the ``deepseek_kernels.rms_norm`` op)."""

from __future__ import annotations

import deepseek_kernels as ops
import torch
from torch import nn


class RMSNorm(nn.Module):
    """RMS norm with a learned gain; statistics and the gain product run in float32."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.rms_norm(x, self.weight, self.eps)


def unweighted_rms_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    """RMS norm without a gain (used for per-head query norm and hyper-connection inputs)."""
    return ops.rms_norm(x, None, eps)
