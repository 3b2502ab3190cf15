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

# The selection's definitions (the reference of ``deepseek_kernels.v41_select``; the component tests check them
# against vLLM's kernels): re-exported here, where the model's indexer is described.
from deepseek_kernels.v41_select.reference import (  # noqa: F401
    apply_candidate_mask,
    select_candidate_blocks,
    stable_topk,
    topk_mask,
)
from torch import nn

from deepseek_engine.layers.norm import RMSNorm
from deepseek_engine.layers.packed_linear import is_packed, matrix
from deepseek_engine.layers.rotary_embedding import apply_rotary, rotary_tables
from deepseek_engine.layers.row_invariant import linear


def index_keys(latent: torch.Tensor, wk: torch.Tensor, k_norm_weight: torch.Tensor, eps: float,
               cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Index keys ``[N, index_head_dim]`` from latents ``[N, head_dim]`` and the group rope tables."""
    return index_keys_with_tables(latent, wk, k_norm_weight, eps, *rotary_tables(cos.float(), sin.float()))


def index_keys_with_tables(latent: torch.Tensor, wk: torch.Tensor, k_norm_weight: torch.Tensor, eps: float,
                           c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """:func:`index_keys` with the full-width tables of ``rotary_tables`` (reusable across layers)."""
    k = linear(latent if is_packed(wk) else latent.to(wk.dtype), wk).float()
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


def select_entries(logits: torch.Tensor, ends: torch.Tensor, topk: int, candidates: torch.Tensor | None,
                   block_size: int, write_blocks: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One index source's choice, ``(mask [T, N], published blocks [T, write_blocks] or None)``: the logits outside
    ``candidates``' blocks dropped (a reading layer), the best ``write_blocks`` blocks published (the candidate
    source), then ``topk_mask`` (the kernel op ``deepseek_kernels.v41_select``, one call)."""
    mask, chosen = ops.v41_select(logits, ends, topk, candidates, block_size, write_blocks)
    return mask, chosen if write_blocks > 0 else None


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
        return index_keys(latent, matrix(self.wk), self.k_norm.weight, self.eps, cos, sin)

    def queries(self, q_latent: torch.Tensor, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """Rotated queries ``[T, H, d]`` and head weights ``[T, H]``."""
        q = linear(q_latent, matrix(self.wq_b)).view(q_latent.shape[0], self.n_heads, self.head_dim)
        return apply_rotary(q, cos, sin), linear(x, matrix(self.weights_proj))
