"""RMS normalisation layers used throughout DeepSeek V4."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from deepseek_engine.native import rms_norm as native_rms_norm


class RMSNorm(nn.Module):
    """RMS norm with a learned gain; statistics and the gain product run in float32."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32 and self.weight.dtype == torch.float32:
            # One call; the same float32 arithmetic as the lines below, up to summation order.
            out = native_rms_norm(x, self.weight, self.eps)
            return out if out is not None else F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight.float() * xf).to(x.dtype)


def unweighted_rms_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    """RMS norm without a gain (used for per-head query norm and hyper-connection inputs)."""
    if x.dtype == torch.float32:
        out = native_rms_norm(x, None, eps)
        return out if out is not None else F.rms_norm(x, (x.shape[-1],), None, eps)
    return x * torch.rsqrt(x.float().square().mean(-1, keepdim=True) + eps).to(x.dtype)
