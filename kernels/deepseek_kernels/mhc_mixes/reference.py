"""PyTorch definition of ``mhc_mixes``: a V4.1 hyper-connection site's linear mixes of the flattened streams.

``mixes = (x @ fn.T) * rsqrt(sum(x * x) / n + eps)`` per row ``x`` (``[n]``, float32), vLLM's order (project, then
scale by the reciprocal RMS), with both sums in ``row_linear``'s fixed order: a row's mixes never depend on the
other rows.
"""

from __future__ import annotations

import torch

from ..row_linear.reference import row_linear_reference


def mhc_mixes_reference(streams: torch.Tensor, fn: torch.Tensor, eps: float) -> torch.Tensor:
    """``streams [T, hc, D]``, ``fn [M, hc * D]`` -> float32 ``[T, M]``."""
    t = streams.shape[0]
    x = streams.reshape(t, -1).float()
    n = x.shape[1]
    sum_sq = row_linear_reference(x.square(), torch.ones(1, n, dtype=torch.float32, device=x.device)).squeeze(-1)
    return row_linear_reference(x, fn.float()) * torch.rsqrt(sum_sq / n + eps)[:, None]
