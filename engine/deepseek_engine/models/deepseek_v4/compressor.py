"""KV compressors and the lightning indexer of DeepSeek V4.

A compressor turns every closed window of ``r`` tokens into one compressed
entry: a softmax-gated (over the window, per channel) mix of projected token
vectors, RMS-normed, then rotated with the ``compress`` rope at the window's
first position ``w * r``.

* Heavily compressed attention (HCA): windows do not overlap; projections are
  ``head_dim`` wide.
* Compressed sparse attention (CSA): projections are ``2 * head_dim`` wide.
  The first half of each token ("A" part) belongs to the *next* entry, the
  second half ("B" part) to the entry of its own window, so entry ``w`` mixes
  ``2r`` slots: A parts of window ``w-1`` and B parts of window ``w``.  Entry 0
  has no predecessor; those slots get zero weight.

The raw projections of every token are kept in the paged cache, so a window
that closes during a later chunk (or decode step) is computed from exactly the
same numbers as in a one-shot forward.  Entry ``w`` is stored in the cache row
of the token that closes its window, ``(w + 1) * r - 1``, so every cache block
only holds data determined by the tokens up to its own end (which keeps
block sharing between sequences with a common prefix sound).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from deepseek_engine.layers.norm import RMSNorm
from deepseek_engine.layers.rotary_embedding import RotaryEmbedding, apply_rotary
from deepseek_engine.models.deepseek_v4.kv_cache import SequenceCache, read_rows, write_rows


class KVCompressor(nn.Module):
    """Window compressor; ``overlap=True`` gives the CSA layout, ``False`` the HCA one.

    Parameter names follow DeepSeek's checkpoints: ``wkv``, ``wgate``, ``ape``
    (per-slot gate bias) and ``norm``.
    """

    def __init__(self, hidden: int, head_dim: int, rate: int, overlap: bool, eps: float, rope: RotaryEmbedding):
        super().__init__()
        width = (2 if overlap else 1) * head_dim
        self.head_dim = head_dim
        self.rate = rate
        self.overlap = overlap
        self.wkv = nn.Linear(hidden, width, bias=False)
        self.wgate = nn.Linear(hidden, width, bias=False)
        self.ape = nn.Parameter(torch.zeros(rate, width))
        self.norm = RMSNorm(head_dim, eps)
        self.rope = rope  # shared module, not a parameter holder

    def _pool(self, kv: torch.Tensor, gate: torch.Tensor, first_window: int, prior: tuple | None) -> torch.Tensor:
        """Compress ``kv``/``gate`` of shape ``[n, r, width]`` into ``[n, head_dim]`` entries."""
        n, r, _ = kv.shape
        d = self.head_dim
        gate = gate + self.ape
        if self.overlap:
            slots_kv = kv.new_zeros((n, 2 * r, d))
            slots_gate = gate.new_full((n, 2 * r, d), float("-inf"))
            slots_kv[:, r:] = kv[..., d:]
            slots_gate[:, r:] = gate[..., d:]
            if n > 1:
                slots_kv[1:, :r] = kv[:-1, :, :d]
                slots_gate[1:, :r] = gate[:-1, :, :d]
            if prior is not None:
                prior_kv, prior_gate = prior
                slots_kv[0, :r] = prior_kv[:, :d]
                slots_gate[0, :r] = (prior_gate + self.ape)[:, :d]
            kv, gate = slots_kv, slots_gate
        weights = gate.softmax(dim=1, dtype=torch.float32).to(kv.dtype)
        pooled = self.norm((kv * weights).sum(dim=1))
        positions = torch.arange(n, device=kv.device) * r + first_window * r
        cos, sin = self.rope(positions, pooled.dtype)
        return apply_rotary(pooled, cos, sin)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, cache: SequenceCache,
                pools: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Record this chunk's projections, emit newly closed entries, return all entries ``[N, head_dim]``."""
        kv_pool, gate_pool, entry_pool = pools
        write_rows(kv_pool, cache.slots(positions), self.wkv(x))
        write_rows(gate_pool, cache.slots(positions), self.wgate(x))
        start = int(positions[0])
        end = start + positions.numel()
        r = self.rate
        done, total = start // r, end // r
        device = positions.device
        if total > done:
            lead = 1 if (self.overlap and done > 0) else 0
            rows = torch.arange((done - lead) * r, total * r, device=device)
            slots = cache.slots(rows)
            kv = read_rows(kv_pool, slots).view(-1, r, kv_pool.shape[-1])
            gate = read_rows(gate_pool, slots).view(-1, r, gate_pool.shape[-1])
            prior = None
            if lead:
                prior = (kv[0], gate[0])
                kv, gate = kv[1:], gate[1:]
            entries = self._pool(kv, gate, done, prior)
            write_rows(entry_pool, cache.slots(self.entry_rows(done, total, device)), entries)
        return read_rows(entry_pool, cache.slots(self.entry_rows(0, total, device)))

    def entry_rows(self, first: int, last: int, device: torch.device) -> torch.Tensor:
        """Cache rows of entries ``first .. last-1``: the position of the token closing each window."""
        return (torch.arange(first, last, device=device) + 1) * self.rate - 1


class LightningIndexer(nn.Module):
    """Scores compressed entries per query and keeps the top ``index_topk`` of them.

    Owns its own overlapping compressor at ``index_head_dim`` (``compressor``),
    the query up-projection ``wq_b`` (fed with the attention's normed q-LoRA
    latent) and ``weights_proj`` (per-head mixing weights).
    """

    def __init__(self, hidden: int, q_lora_rank: int, n_heads: int, head_dim: int, rate: int, topk: int,
                 eps: float, rope: RotaryEmbedding):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = head_dim
        self.rate = rate
        self.topk = topk
        self.wq_b = nn.Linear(q_lora_rank, n_heads * head_dim, bias=False)
        self.weights_proj = nn.Linear(hidden, n_heads, bias=False)
        self.compressor = KVCompressor(hidden, head_dim, rate, True, eps, rope)
        self.rope = rope

    def forward(self, x: torch.Tensor, q_latent: torch.Tensor, positions: torch.Tensor, cache: SequenceCache,
                pools: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Return a ``[T, N]`` boolean mask of the entries each query may attend to."""
        keys = self.compressor(x, positions, cache, pools)  # [N, d]
        t = x.shape[0]
        n = keys.shape[0]
        threshold = (positions + 1) // self.rate  # entries strictly below are complete for the query
        if n == 0:
            return torch.zeros((t, 0), dtype=torch.bool, device=x.device)
        cos, sin = self.rope(positions, x.dtype)
        q = self.wq_b(q_latent).view(t, self.n_heads, self.head_dim)
        q = apply_rotary(q, cos, sin)
        # Same shapes as a batch-of-one computation so that ranking ties break identically.
        scores = torch.matmul(q.float()[None], keys.transpose(0, 1).float()[None, None])  # [1, T, H, N]
        scores = F.relu(scores) * self.head_dim**-0.5
        weights = self.weights_proj(x).float() * self.n_heads**-0.5
        scores = (scores * weights[None, :, :, None]).sum(dim=2)  # [1, T, N]
        entry = torch.arange(n, device=x.device)
        future = entry.view(1, 1, -1) >= threshold.view(1, -1, 1)
        scores = scores.masked_fill(future, float("-inf"))
        picked = scores.topk(min(self.topk, n), dim=-1).indices[0]  # [T, k]
        allowed = torch.zeros((t, n + 1), dtype=torch.bool, device=x.device)
        picked = torch.where(picked < threshold[:, None], picked, torch.full_like(picked, n))
        allowed.scatter_(1, picked, True)
        return allowed[:, :n]
