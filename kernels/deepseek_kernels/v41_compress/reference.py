"""PyTorch reference of V4.1's compressor pooling (ratio 1 and 2) with its RMS norm.

``rows`` are the float32 ``[kv | score]`` rows of ``n`` whole groups of ``ratio`` tokens
(``[n * ratio, ratio * head_dim]``; ratio 1 has no score). Ratio 1 keeps each token's kv;
ratio 2 weighs the pair's kv by a per-channel softmax over their two scores. The pooled
kv is RMS-normed with ``norm_weight``; the result is the group's latent ``[n, head_dim]``.
"""

from __future__ import annotations

import torch


def v41_compress_pool_reference(rows: torch.Tensor, ratio: int, norm_weight: torch.Tensor, eps: float) -> torch.Tensor:
    if ratio not in (1, 2):
        raise ValueError(f"V4.1 compress ratio must be 1 or 2, got {ratio}")
    if rows.shape[0] % ratio:
        raise ValueError("rows must hold whole groups")
    head_dim = rows.shape[-1] // ratio
    rows = rows.float()
    if ratio == 1:
        pooled = rows
    else:
        grouped = rows.view(-1, 2, 2 * head_dim)
        kv, score = grouped[..., :head_dim], grouped[..., head_dim:]
        pooled = (kv * torch.softmax(score, dim=1)).sum(dim=1)
    variance = pooled.square().mean(-1, keepdim=True)
    return pooled * torch.rsqrt(variance + eps) * norm_weight.float()
