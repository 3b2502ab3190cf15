"""Attention for many one-token sequences at once (the decode step), over the paged pool.

``layers.attention.DeepseekV4Attention`` handles one sequence per call, which is
right for prefill but makes a decode step cost one Python-level attention call per
sequence and layer. ``DecodeBatch`` does the same computation for ``B`` sequences
that each add one token: the cache rows each sequence needs (its sliding window,
its compressed entries, the window its compressor may close) are gathered through
padded block tables with validity masks, so every layer runs a fixed number of
tensor operations whatever ``B`` is.

It reuses the attention module's weights and follows its arithmetic step by step
(tested against the per-sequence path in ``tests/engine/test_serving_model.py``):
query and key projections with RoPE, the compressor closing a window when the new
token is its last one (CSA windows overlap the previous window), the lightning
indexer's top-k choice of compressed entries, a softmax with the learned sink
logit, and the grouped output projection.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .config import CSA, HCA
from .kv_cache import read_rows, write_rows
from .layers.norm import unweighted_rms_norm
from .layers.rotary_embedding import apply_rotary


class DecodeBatch:
    """Per-step gather indices for ``B`` sequences adding the token at ``positions[b]``."""

    def __init__(self, positions: torch.Tensor, slots: torch.Tensor, block_tables: list[list[int]],
                 block_size: int, window: int) -> None:
        self.positions = positions
        self.slots = slots
        self.block_size = block_size
        width = max(len(t) for t in block_tables)
        self.tables = torch.tensor([t + [0] * (width - len(t)) for t in block_tables], dtype=torch.long,
                                   device=positions.device)
        # Sliding window: positions p-window+1 .. p (those below 0 are masked out).
        pos = positions[:, None] - window + 1 + torch.arange(window, device=positions.device)[None, :]
        self.window_valid = pos >= 0
        self.window_slots = self.rows_to_slots(pos.clamp_min(0))
        self._per_rate: dict[int, dict[str, torch.Tensor]] = {}

    def rows_to_slots(self, rows: torch.Tensor) -> torch.Tensor:
        """Flat pool rows of logical rows ``rows`` ``[B, K]`` of each sequence."""
        bs = self.block_size
        return torch.gather(self.tables, 1, rows // bs) * bs + rows % bs

    def rate_info(self, rate: int) -> dict[str, torch.Tensor]:
        """Gather indices for a compressor of rate ``rate`` (shared by layers with that rate)."""
        info = self._per_rate.get(rate)
        if info is None:
            p = self.positions
            count = (p + 1) // rate  # entries complete once this token is in
            n_max = int(count.max())
            e = torch.arange(n_max, device=p.device)[None, :]
            closing = torch.nonzero((p + 1) % rate == 0).flatten()
            w = count[closing] - 1  # the entry each closing sequence completes
            offs = torch.arange(rate, device=p.device)[None, :]
            sub_tables = self.tables[closing]
            bs = self.block_size

            def slots_of(rows: torch.Tensor) -> torch.Tensor:
                return torch.gather(sub_tables, 1, rows // bs) * bs + rows % bs

            info = {
                "entry_valid": e < count[:, None],
                "entry_slots": self.rows_to_slots(((e + 1) * rate - 1).clamp_max(p[:, None])),
                "count": count,
                "closing": closing,
                "w": w,
                "window_slots": slots_of(w[:, None] * rate + offs),
                "prior_slots": slots_of(((w[:, None] - 1) * rate + offs).clamp_min(0)),
                "has_prior": w > 0,
            }
            self._per_rate[rate] = info
        return info


def _compress(comp, x: torch.Tensor, batch: DecodeBatch, pools) -> tuple[torch.Tensor, torch.Tensor]:
    """Record the new tokens' projections, close finished windows; return entries ``[B, N, d]`` and their mask."""
    kv_pool, gate_pool, entry_pool = pools
    write_rows(kv_pool, batch.slots, comp.wkv(x))
    write_rows(gate_pool, batch.slots, comp.wgate(x))
    info = batch.rate_info(comp.rate)
    closing = info["closing"]
    if closing.numel():
        r, d = comp.rate, comp.head_dim
        n = closing.numel()
        kv = read_rows(kv_pool, info["window_slots"].flatten()).view(n, r, -1)
        gate = read_rows(gate_pool, info["window_slots"].flatten()).view(n, r, -1) + comp.ape
        if comp.overlap:
            prior_kv = read_rows(kv_pool, info["prior_slots"].flatten()).view(n, r, -1)[..., :d]
            prior_gate = (read_rows(gate_pool, info["prior_slots"].flatten()).view(n, r, -1) + comp.ape)[..., :d]
            has = info["has_prior"].view(n, 1, 1)
            prior_kv = torch.where(has, prior_kv, torch.zeros_like(prior_kv))
            prior_gate = torch.where(has, prior_gate, torch.full_like(prior_gate, float("-inf")))
            kv = torch.cat([prior_kv, kv[..., d:]], dim=1)
            gate = torch.cat([prior_gate, gate[..., d:]], dim=1)
        weights = gate.softmax(dim=1, dtype=torch.float32).to(kv.dtype)
        pooled = comp.norm((kv * weights).sum(dim=1))
        cos, sin = comp.rope(info["w"] * r, pooled.dtype)
        # Entry w sits in the row of the token closing its window: this step's token.
        write_rows(entry_pool, batch.slots[closing], apply_rotary(pooled, cos, sin))
    valid = info["entry_valid"]
    b, n_max = valid.shape
    entries = read_rows(entry_pool, info["entry_slots"].flatten()).view(b, n_max, entry_pool.shape[-1])
    return entries, valid


def _index(indexer, x: torch.Tensor, q_latent: torch.Tensor, batch: DecodeBatch, pools) -> torch.Tensor:
    """The lightning indexer's choice: a ``[B, N]`` mask of the entries each query attends to."""
    keys, valid = _compress(indexer.compressor, x, batch, pools)
    b, n = valid.shape
    if n == 0:
        return valid
    cos, sin = indexer.rope(batch.positions, x.dtype)
    q = apply_rotary(indexer.wq_b(q_latent).view(b, indexer.n_heads, indexer.head_dim), cos, sin)
    scores = F.relu(torch.matmul(q.float(), keys.float().transpose(1, 2))) * indexer.head_dim**-0.5  # [B, H, N]
    weights = indexer.weights_proj(x).float() * indexer.n_heads**-0.5
    scores = (scores * weights[:, :, None]).sum(dim=1).masked_fill(~valid, float("-inf"))
    picked = scores.topk(min(indexer.topk, n), dim=-1).indices
    count = batch.rate_info(indexer.rate)["count"]
    picked = torch.where(picked < count[:, None], picked, torch.full_like(picked, n))
    allowed = torch.zeros((b, n + 1), dtype=torch.bool, device=x.device)
    allowed.scatter_(1, picked, True)
    return allowed[:, :n]


def decode_attention(attn, x: torch.Tensor, batch: DecodeBatch, pool) -> torch.Tensor:
    """``DeepseekV4Attention`` for one new token per sequence: ``x`` ``[B, hidden]`` -> ``[B, hidden]``."""
    b = x.shape[0]
    lp = pool.layers[attn.layer_idx]
    cos, sin = attn.rope(batch.positions, x.dtype)
    q_latent = attn.q_norm(attn.wq_a(x))
    q = unweighted_rms_norm(attn.wq_b(q_latent).view(b, attn.n_heads, attn.head_dim), attn.eps)
    q = apply_rotary(q, cos, sin)
    write_rows(lp.kv, batch.slots, apply_rotary(attn.norm(attn.wkv(x)), cos, sin))
    keys = read_rows(lp.kv, batch.window_slots.flatten()).view(b, -1, attn.head_dim)
    visible = batch.window_valid
    if attn.kind in (HCA, CSA):
        entries, allowed = _compress(attn.compressor, x, batch, (lp.comp_kv, lp.comp_gate, lp.entries))
        if attn.kind == CSA:
            allowed = _index(attn.indexer, x, q_latent, batch, (lp.idx_kv, lp.idx_gate, lp.idx_entries))
        keys = torch.cat([keys, entries], dim=1)
        visible = torch.cat([visible, allowed], dim=1)
    logits = torch.matmul(q, keys.transpose(1, 2)) * attn.scale  # [B, H, K]
    logits = logits.masked_fill(~visible[:, None, :], float("-inf"))
    sinks = attn.attn_sink.to(logits.dtype).view(1, -1, 1).expand(b, -1, 1)
    logits = torch.cat([logits, sinks], dim=-1)
    logits = logits - logits.max(dim=-1, keepdim=True).values
    probs = F.softmax(logits, dim=-1, dtype=logits.dtype)[..., :-1].to(keys.dtype)
    out = apply_rotary(torch.matmul(probs, keys), cos, -sin)  # [B, H, D]
    return attn.wo_b(attn.wo_a(out.reshape(b, attn.o_groups, -1)))
