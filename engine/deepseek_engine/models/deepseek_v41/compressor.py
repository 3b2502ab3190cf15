"""DeepSeek V4.1 KV compressor (ratio 1 and 2) as plain functions and a weight holder.

A compressed layer of V4.1 keeps one compressed KV entry per ``r`` tokens
(``r`` = 1 or 2), and only the KV-source layers compute them:

* each token's ``kv_score = x @ [wkv; wgate].T`` in float32 (``wgate`` only for
  ratio 2);
* ratio 1: the entry of token ``p`` is ``norm(kv_p)`` (no gate, no pooling);
* ratio 2: group ``g`` holds tokens ``2g`` and ``2g + 1``; per channel, a
  softmax over the two tokens' scores weighs their kv values, then ``norm``;
  there is no position bias (``ape``) and no overlap with the previous group;
* the entry is emitted when its group closes (token ``p`` with
  ``(p + 1) % r == 0``), rotated with the layer's rope at the group's first
  position ``p - p % r``, and visible to a query at ``t`` when its index is
  below ``(t + 1) // r``.

The pre-rope entry (the "latent") also feeds the index keys of the same
layer's indexer (:mod:`deepseek_engine.models.deepseek_v41.indexer`).

The open ratio-2 group is a one-token state: its raw ``kv_score`` row is kept
in the paged cache at the token's position (vLLM keeps it in a float32 ring),
so chunked prefill and rolled-back speculation read exactly the same numbers.
"""

from __future__ import annotations

import deepseek_kernels as ops
import torch
from torch import nn

from deepseek_engine.layers.norm import RMSNorm
from deepseek_engine.layers.packed_linear import is_packed, matrix
from deepseek_engine.layers.row_invariant import linear


def compressor_scores(x: torch.Tensor, wkv, wgate) -> torch.Tensor:
    """``[T, D]`` hidden -> float32 ``[T, r * head_dim]`` rows ``[kv | score]`` (``score`` only for ratio 2);
    ``wkv`` / ``wgate`` float matrices or packed ones (:mod:`deepseek_engine.layers.packed_linear`)."""
    parts = [wkv] if wgate is None else [wkv, wgate]
    if any(is_packed(w) for w in parts):
        return torch.cat([linear(x.float(), w if is_packed(w) else w.float()) for w in parts], dim=-1)
    return linear(x.float(), torch.cat(parts, dim=0).float())


def pool_groups(rows: torch.Tensor, ratio: int, norm_weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Latents of closed groups from their float32 score rows.

    ``rows`` is ``[n * ratio, ratio * head_dim]`` (every token of ``n`` whole
    groups, in order); returns float32 ``[n, head_dim]``: the pooled kv (ratio 2:
    per-channel softmax over the group's scores) RMS-normed with ``norm_weight``.
    """
    if ratio not in (1, 2):
        raise ValueError(f"V4.1 compress ratio must be 1 or 2, got {ratio}")
    if rows.shape[0] % ratio:
        raise ValueError("rows must hold whole groups")
    return ops.v41_compress_pool(rows.float(), ratio, norm_weight, eps)


def group_positions(closing: torch.Tensor, ratio: int) -> torch.Tensor:
    """Rope position of the groups closed by tokens ``closing``: the group's first token."""
    return closing - closing % ratio


class V41Compressor(nn.Module):
    """Weights of a KV-source layer's compressor: ``wkv``, ``wgate`` (ratio 2 only) and ``norm``."""

    def __init__(self, hidden: int, head_dim: int, ratio: int, eps: float) -> None:
        super().__init__()
        if ratio not in (1, 2):
            raise ValueError(f"V4.1 compress ratio must be 1 or 2, got {ratio}")
        self.ratio = ratio
        self.head_dim = head_dim
        self.eps = eps
        self.wkv = nn.Linear(hidden, head_dim, bias=False)
        self.wgate = nn.Linear(hidden, head_dim, bias=False) if ratio == 2 else None
        self.norm = RMSNorm(head_dim, eps)

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        return compressor_scores(x, matrix(self.wkv), None if self.wgate is None else matrix(self.wgate))

    def pool(self, rows: torch.Tensor) -> torch.Tensor:
        return pool_groups(rows, self.ratio, self.norm.weight, self.eps)
