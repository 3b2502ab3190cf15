"""DeepSeek V4 multi-token prediction (``mtp.0.*``) as a drafter.

Layout (read from vLLM 0.33's ``deepseek_v4`` MTP model): the MTP layer at
position ``p`` combines the target's final residual streams at ``p`` (before the
head mix) with the embedding of the token at ``p + 1``:

    h = h_proj(hnorm(streams[p])) + e_proj(enorm(embed(token[p + 1])))   # per stream

(the embedding row is zeroed at position 0), runs one V4 decoder layer
(sliding-window attention with its own window cache, learned-routing MoE),
and predicts the token at ``p + 2`` through its own head mix
(``hc_head_fn/base/scale``), ``norm`` and the target's head. Drafting ``k``
tokens re-feeds the MTP output streams as the next step's ``streams``.

Checkpoint names: ``mtp.0.{enorm,hnorm,e_proj,h_proj,hc_head_fn,hc_head_base,
hc_head_scale,norm}`` and the decoder layer's own names under ``mtp.0.``
(``attn.*``, ``ffn.*``, ``attn_norm``, ``ffn_norm``, ``hc_attn_*``, ``hc_ffn_*``).

The MTP window cache is addressed by position like every other cache here:
rows written while drafting are rewritten by the next step's pass over the
accepted positions before anything reads them.
"""

from __future__ import annotations

import torch
from torch import nn

from deepseek_engine.layers.hyper_connection import hyper_head
from deepseek_engine.layers.norm import RMSNorm
from deepseek_engine.layers.rotary_embedding import RotaryEmbedding
from deepseek_engine.models.deepseek_v4.config import SLIDING, DeepseekV4ModelConfig
from deepseek_engine.models.deepseek_v4.kv_cache import SequenceCache
from deepseek_engine.models.deepseek_v4.model import DeepseekV4DecoderLayer


def mtp_config(config: DeepseekV4ModelConfig) -> DeepseekV4ModelConfig:
    """A one-layer config for the MTP block: sliding-window attention, learned routing."""
    return config.model_copy(update={"num_hidden_layers": 1, "layer_types": [SLIDING], "mlp_layer_types": ["moe"]})


class DeepseekV4MTP(nn.Module):
    def __init__(self, config: DeepseekV4ModelConfig) -> None:
        super().__init__()
        c = mtp_config(config)
        self.config = c
        d = c.hidden_size
        self.main_rope = RotaryEmbedding(c.rope_main, c.qk_rope_head_dim)
        self.compress_rope = RotaryEmbedding(c.rope_compress, c.qk_rope_head_dim)
        self.block = DeepseekV4DecoderLayer(c, 0, self.main_rope, self.compress_rope)
        self.enorm = RMSNorm(d, c.rms_norm_eps)
        self.hnorm = RMSNorm(d, c.rms_norm_eps)
        self.e_proj = nn.Linear(d, d, bias=False)
        self.h_proj = nn.Linear(d, d, bias=False)
        self.hc_head_fn = nn.Parameter(torch.zeros(c.hc_mult, c.hc_mult * d))
        self.hc_head_base = nn.Parameter(torch.zeros(c.hc_mult))
        self.hc_head_scale = nn.Parameter(torch.ones(1))
        self.norm = RMSNorm(d, c.rms_norm_eps)

    def new_cache(self, max_tokens: int, block_size: int, dtype: torch.dtype, device) -> SequenceCache:
        return SequenceCache.fresh(self.config, max_tokens, block_size, dtype, device)

    @torch.no_grad()
    def step(self, streams: torch.Tensor, next_ids: torch.Tensor, positions: torch.Tensor, embed: nn.Embedding,
             cache: SequenceCache) -> torch.Tensor:
        """MTP output streams ``[T, hc, D]`` at ``positions`` (``next_ids``: the tokens one position later)."""
        e = embed(next_ids)
        e = torch.where((positions == 0)[:, None], torch.zeros_like(e), e)
        h = self.h_proj(self.hnorm(streams)) + self.e_proj(self.enorm(e)).unsqueeze(1)
        cache.num_tokens = int(positions[0])
        out = self.block(h, next_ids, positions, cache)
        cache.num_tokens = int(positions[-1]) + 1
        return out

    def logits(self, streams: torch.Tensor, head: nn.Linear) -> torch.Tensor:
        c = self.config
        h = hyper_head(streams, self.hc_head_fn, self.hc_head_base, self.hc_head_scale, c.hc_eps, c.rms_norm_eps)
        return head(self.norm(h)).float()
