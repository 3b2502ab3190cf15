"""DeepSeek V4.1 lightning indexer: keys from the compressor latent, two-level candidate filtering.

Only ``index_source_layer_ids`` have an indexer; the other compressed layers
reuse the top-k choice of the latest index source at or below them.

* Keys: an index source that is also a KV source turns each compressor latent
  into a key ``k_norm(wk(latent))`` rotated at the group's first position
  (trailing ``rope_dim`` channels, interleaved pairs). Other index sources
  read the keys of their KV source.
* Queries: ``wq_b`` of the attention's normed q-LoRA latent, rotated at the
  token position; per-head weights ``weights_proj(x)``.
* Logits: ``sum_h w_h * head_dim**-0.5 * n_heads**-0.5 * relu(q_h . k)``
  over the entries the query may see (index ``< (t + 1) // r``).
* Candidate filtering: the indexer at ``candidate_source_layer_id`` publishes,
  per query, the ``candidate_topk_blocks`` blocks of ``candidate_block_size``
  entries with the largest block maximum (the block holding the newest
  visible entry is always taken); later indexers set every logit outside
  those blocks to ``-inf`` before their own top-k.
* Top-k: the ``index_topk`` largest finite logits; when a query sees at most
  ``index_topk`` entries it takes all of them (no candidates written or used).
  Equal logits (relu makes exact zeros common) go to the lower entry index, so
  the choice never depends on how many entries a step's rows hold (vLLM's
  top-k kernels leave the order of ties unspecified).
"""

from __future__ import annotations

import deepseek_kernels as ops
import torch
from torch import nn

from deepseek_engine.layers.norm import RMSNorm
from deepseek_engine.layers.rotary_embedding import apply_rotary, rotary_tables
from deepseek_engine.layers.row_invariant import linear


def index_keys(latent: torch.Tensor, wk: torch.Tensor, k_norm_weight: torch.Tensor, eps: float,
               cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Index keys ``[N, index_head_dim]`` from latents ``[N, head_dim]`` and the group rope tables."""
    return index_keys_with_tables(latent, wk, k_norm_weight, eps, *rotary_tables(cos.float(), sin.float()))


def index_keys_with_tables(latent: torch.Tensor, wk: torch.Tensor, k_norm_weight: torch.Tensor, eps: float,
                           c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """:func:`index_keys` with the full-width tables of ``rotary_tables`` (reusable across layers)."""
    k = linear(latent.to(wk.dtype), wk).float()
    return ops.rope(ops.rms_norm(k, k_norm_weight.float(), eps), c, s)


def index_logits(q: torch.Tensor, weights: torch.Tensor, keys: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """Float32 logits ``[T, N]``; ``-inf`` where ``visible`` (``[T, N]``) is false.

    ``q``: ``[T, H, d]`` rotated queries; ``weights``: ``[T, H]`` head weights
    (raw ``weights_proj`` output); ``keys``: ``[N, d]``.
    """
    t, n_heads, head_dim = q.shape
    n = keys.shape[0]
    # The indexer kernel op: every query row's scores on their own, heads added in order.
    slots = torch.arange(n, device=q.device)[None, :]
    threshold = torch.full((1, t), n, dtype=torch.long, device=q.device)
    logits = ops.indexer_scores(q.float()[None], weights.float()[None], keys.float(), slots, threshold, 1.0,
                                head_dim**-0.5 * n_heads**-0.5)[0]
    return logits.masked_fill(~visible, float("-inf"))


def select_candidate_blocks(logits: torch.Tensor, ends: torch.Tensor, topk_blocks: int, block_size: int) -> torch.Tensor:
    """Per row, the ids of the ``topk_blocks`` best blocks (``-1`` padded), ``[T, topk_blocks]``.

    A block's score is the maximum of its logits among the row's visible
    columns ``[0, ends[t])``; the block holding column ``ends[t] - 1`` scores
    ``+inf``. Blocks without a visible column are never picked.
    """
    t, n = logits.shape
    out = torch.full((t, topk_blocks), -1, dtype=torch.long, device=logits.device)
    if n == 0:
        return out
    nblocks = -(-n // block_size)
    cols = torch.arange(n, device=logits.device)
    valid = cols[None, :] < ends[:, None]
    padded = torch.full((t, nblocks * block_size), float("-inf"), dtype=torch.float32, device=logits.device)
    padded[:, :n] = logits.float().masked_fill(~valid, float("-inf"))
    scores = padded.view(t, nblocks, block_size).amax(dim=-1)
    newest = ((ends - 1).clamp_min(0) // block_size)
    pinned = (ends > 0)[:, None] & (torch.arange(nblocks, device=logits.device)[None, :] == newest[:, None])
    scores = scores.masked_fill(pinned, float("inf"))
    k = min(topk_blocks, nblocks)
    values, indices = stable_topk(scores, k)
    out[:, :k] = torch.where(values != float("-inf"), indices, torch.full_like(indices, -1))
    return out


def stable_topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row-wise top-``k`` where equal values go to the lower index.

    ``torch.topk`` breaks ties in a way that depends on the row's length, and
    relu scores tie often (exact zeros); a stable order keeps the choice the
    same whether a prompt arrives in one piece or in chunks.
    """
    values, indices = torch.sort(x, dim=-1, descending=True, stable=True)
    return values[..., :k], indices[..., :k]


def apply_candidate_mask(logits: torch.Tensor, candidates: torch.Tensor, block_size: int) -> torch.Tensor:
    """``logits`` with every column outside the row's candidate blocks set to ``-inf``."""
    t, n = logits.shape
    if n == 0:
        return logits
    nblocks = -(-n // block_size)
    keep_block = torch.zeros((t, nblocks + 1), dtype=torch.bool, device=logits.device)
    ids = torch.where(candidates >= 0, candidates.clamp_max(nblocks), torch.full_like(candidates, nblocks))
    keep_block.scatter_(1, ids, True)
    keep = keep_block[:, :nblocks].repeat_interleave(block_size, dim=1)[:, :n]
    return logits.masked_fill(~keep, float("-inf"))


def topk_mask(logits: torch.Tensor, ends: torch.Tensor, topk: int) -> torch.Tensor:
    """Boolean ``[T, N]``: the entries each row attends to.

    Rows that see at most ``topk`` entries take all of them; other rows take
    their ``topk`` largest finite logits.
    """
    t, n = logits.shape
    cols = torch.arange(n, device=logits.device)
    visible = cols[None, :] < ends[:, None]
    if n == 0:
        return visible
    k = min(topk, n)
    values, indices = stable_topk(logits, k)
    picked = torch.zeros((t, n + 1), dtype=torch.bool, device=logits.device)
    idx = torch.where(values != float("-inf"), indices, torch.full_like(indices, n))
    picked.scatter_(1, idx, True)
    picked = picked[:, :n] & visible
    short = ends <= topk
    return torch.where(short[:, None], visible, picked)


class V41Indexer(nn.Module):
    """Indexer weights of one index-source layer; ``owns_keys`` adds ``wk`` and ``k_norm``."""

    def __init__(self, hidden: int, q_lora_rank: int, n_heads: int, head_dim: int, main_head_dim: int,
                 eps: float, owns_keys: bool) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = head_dim
        self.eps = eps
        self.wq_b = nn.Linear(q_lora_rank, n_heads * head_dim, bias=False)
        self.weights_proj = nn.Linear(hidden, n_heads, bias=False)
        self.owns_keys = owns_keys
        if owns_keys:
            self.wk = nn.Linear(main_head_dim, head_dim, bias=False)
            self.k_norm = RMSNorm(head_dim, eps)

    def keys(self, latent: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return index_keys(latent, self.wk.weight, self.k_norm.weight, self.eps, cos, sin)

    def queries(self, q_latent: torch.Tensor, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """Rotated queries ``[T, H, d]`` and head weights ``[T, H]``."""
        q = linear(q_latent, self.wq_b.weight).view(q_latent.shape[0], self.n_heads, self.head_dim)
        return apply_rotary(q, cos, sin), linear(x, self.weights_proj.weight)
