"""DeepSeek V4 attention block (all three layer kinds).

Per token: a low-rank query (``wq_a`` -> ``q_norm`` -> ``wq_b``) with an
unweighted per-head RMS norm; one shared KV head (``wkv`` -> ``norm``) read as
both key and value; RoPE on the trailing ``rope_dim`` channels of queries and
keys.  Keys are the sliding window of the last ``sliding_window`` tokens
(including the query itself) plus, for compressed layers, the compressed
entries (HCA: every complete entry; CSA: the indexer's top-k picks).  A learned
per-head sink logit joins the softmax and is dropped afterwards.  Because the
value carries RoPE, the output's rope channels are rotated back by the query
position, then heads go through the grouped output projection
(``wo_a`` per group, ``wo_b`` across groups).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from deepseek_engine.layers.norm import RMSNorm, unweighted_rms_norm
from deepseek_engine.layers.rotary_embedding import RotaryEmbedding, apply_rotary
from deepseek_engine.models.deepseek_v4.compressor import KVCompressor, LightningIndexer
from deepseek_engine.models.deepseek_v4.config import CSA, HCA, SLIDING, DeepseekV4ModelConfig
from deepseek_engine.models.deepseek_v4.kv_cache import SequenceCache, read_rows, write_rows


class GroupedOutputProjection(nn.Linear):
    """Block-diagonal projection: group ``g`` of the heads goes through its own slice of ``weight``."""

    def __init__(self, in_per_group: int, out_features: int, groups: int) -> None:
        super().__init__(in_per_group, out_features, bias=False)
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[T, groups, in_per_group]`` -> ``[T, groups * out_per_group]``."""
        t = x.shape[0]
        w = self.weight.view(self.groups, -1, x.shape[-1]).transpose(1, 2)  # [G, in, out]
        y = torch.bmm(x.transpose(0, 1), w)  # [G, T, out]
        return y.transpose(0, 1).reshape(t, -1)


def add_attention_projections(module: nn.Module, c) -> None:
    """Give ``module`` the projections every V4 / V4.1 attention block holds (checkpoint names): the low-rank
    query (``wq_a``, ``q_norm``, ``wq_b``), the shared KV head (``wkv``, ``norm``), the grouped output
    (``wo_a``, ``wo_b``) and the per-head sink logit ``attn_sink``."""
    module.wq_a = nn.Linear(c.hidden_size, c.q_lora_rank, bias=False)
    module.q_norm = RMSNorm(c.q_lora_rank, c.rms_norm_eps)
    module.wq_b = nn.Linear(c.q_lora_rank, c.num_attention_heads * c.head_dim, bias=False)
    module.wkv = nn.Linear(c.hidden_size, c.head_dim, bias=False)
    module.norm = RMSNorm(c.head_dim, c.rms_norm_eps)
    module.wo_a = GroupedOutputProjection(c.num_attention_heads * c.head_dim // c.o_groups,
                                          c.o_groups * c.o_lora_rank, c.o_groups)
    module.wo_b = nn.Linear(c.o_groups * c.o_lora_rank, c.hidden_size, bias=False)
    module.attn_sink = nn.Parameter(torch.zeros(c.num_attention_heads))


class DeepseekV4Attention(nn.Module):
    """Attention of one decoder layer; parameter names follow DeepSeek checkpoints."""

    def __init__(self, config: DeepseekV4ModelConfig, layer_idx: int, main_rope: RotaryEmbedding,
                 compress_rope: RotaryEmbedding) -> None:
        super().__init__()
        c = config
        self.kind = c.layer_types[layer_idx]
        self.layer_idx = layer_idx
        self.n_heads = c.num_attention_heads
        self.head_dim = c.head_dim
        self.window = c.sliding_window
        self.eps = c.rms_norm_eps
        self.o_groups = c.o_groups
        self.scale = c.head_dim**-0.5
        self.rope = main_rope if self.kind == SLIDING else compress_rope
        add_attention_projections(self, c)
        self.compressor: KVCompressor | None = None
        self.indexer: LightningIndexer | None = None
        if self.kind != SLIDING:
            rate = c.compress_rate(layer_idx)
            self.compressor = KVCompressor(c.hidden_size, c.head_dim, rate, self.kind == CSA, c.rms_norm_eps,
                                           compress_rope)
        if self.kind == CSA:
            self.indexer = LightningIndexer(c.hidden_size, c.q_lora_rank, c.index_n_heads, c.index_head_dim,
                                            c.compress_rate(layer_idx), c.index_topk, c.rms_norm_eps, compress_rope)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, cache: SequenceCache) -> torch.Tensor:
        """``x``: ``[T, hidden]`` for consecutive ``positions`` continuing ``cache``; returns ``[T, hidden]``."""
        t = x.shape[0]
        lp = cache.pool.layers[self.layer_idx]
        cos, sin = self.rope(positions, x.dtype)

        q_latent = self.q_norm(self.wq_a(x))
        q = unweighted_rms_norm(self.wq_b(q_latent).view(t, self.n_heads, self.head_dim), self.eps)
        q = apply_rotary(q, cos, sin)
        kv = apply_rotary(self.norm(self.wkv(x)), cos, sin)
        write_rows(lp.kv, cache.slots(positions), kv)

        start = int(positions[0])
        first = max(0, start - self.window + 1)
        key_pos = torch.arange(first, start + t, device=x.device)
        keys = read_rows(lp.kv, cache.slots(key_pos))
        visible = (key_pos[None, :] <= positions[:, None]) & (key_pos[None, :] > positions[:, None] - self.window)

        if self.kind == HCA:
            entries = self.compressor(x, positions, cache, (lp.comp_kv, lp.comp_gate, lp.entries))
            entry_ids = torch.arange(entries.shape[0], device=x.device)
            allowed = entry_ids[None, :] < ((positions + 1) // self.compressor.rate)[:, None]
            keys = torch.cat([keys, entries], dim=0)
            visible = torch.cat([visible, allowed], dim=1)
        elif self.kind == CSA:
            entries = self.compressor(x, positions, cache, (lp.comp_kv, lp.comp_gate, lp.entries))
            allowed = self.indexer(x, q_latent, positions, cache, (lp.idx_kv, lp.idx_gate, lp.idx_entries))
            keys = torch.cat([keys, entries], dim=0)
            visible = torch.cat([visible, allowed], dim=1)

        bias = torch.zeros(visible.shape, dtype=q.dtype, device=x.device).masked_fill(~visible, float("-inf"))
        logits = torch.matmul(q.transpose(0, 1), keys.transpose(0, 1)) * self.scale  # [H, T, K]
        logits = logits + bias[None]
        sinks = self.attn_sink.to(logits.dtype).view(-1, 1, 1).expand(-1, t, 1)
        logits = torch.cat([logits, sinks], dim=-1)
        logits = logits - logits.max(dim=-1, keepdim=True).values
        probs = F.softmax(logits, dim=-1, dtype=logits.dtype)[..., :-1].to(keys.dtype)
        out = torch.matmul(probs, keys).transpose(0, 1)  # [T, H, D]
        out = apply_rotary(out, cos, -sin)
        out = self.wo_a(out.reshape(t, self.o_groups, -1))
        return self.wo_b(out)
