"""DeepSeek V4 causal language model for single-sequence, cache-driven execution.

Parameter names of this module tree are DeepSeek's own checkpoint names
(``embed.weight``, ``layers.N.attn.wq_a.weight``, ``layers.N.hc_attn_fn``,
``layers.N.ffn.gate.tid2eid``, ``hc_head_fn``, ``head.weight`` ...), except
that routed experts are stacked (``layers.N.ffn.experts.w1`` holds every
``layers.N.ffn.experts.E.w1.weight``).  See :mod:`deepseek_engine.models.loader`.

The cache contract is documented in :mod:`deepseek_engine.models.deepseek_v4.kv_cache`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import deepseek_kernels as ops
import torch
from torch import nn

from deepseek_engine.layers.hyper_connection import add_hc_sites, hyper_head
from deepseek_engine.layers.moe import DeepseekV4MoE
from deepseek_engine.layers.norm import RMSNorm
from deepseek_engine.layers.rotary_embedding import RotaryEmbedding
from deepseek_engine.models.deepseek_v4.attention import DeepseekV4Attention
from deepseek_engine.models.deepseek_v4.config import DeepseekV4ModelConfig
from deepseek_engine.models.deepseek_v4.kv_cache import KVCachePool, SequenceCache

#: The sub-blocks of a decoder layer, in order: (hyper-connection site, input norm, block) attribute names.
SUB_BLOCKS = (("attn", "attn_norm", "attn"), ("ffn", "ffn_norm", "ffn"))


def hc_sites(layer: nn.Module) -> tuple[tuple, tuple]:
    """Per sub-block of ``layer`` (``SUB_BLOCKS`` order): its hyper-connection ``(fn, base, scale)`` and input
    norm ``(weight, eps)`` as one tuple, the arguments ``ops.hc_step`` takes for that site."""
    sites = []
    for site, norm_name, _ in SUB_BLOCKS:
        norm = getattr(layer, norm_name)
        sites.append((*layer.hc_params(site), norm.weight, norm.eps))
    return tuple(sites)


def run_layers(layers: Iterable[nn.Module], streams: torch.Tensor, config: DeepseekV4ModelConfig,
               attend: Callable[[nn.Module, torch.Tensor], torch.Tensor],
               feed: Callable[[nn.Module, torch.Tensor], torch.Tensor],
               sites: Sequence[tuple[tuple, tuple]] | None = None) -> torch.Tensor:
    """The decoder stack over ``layers``: the model's layer order, written here once.

    Per layer, attention then the MoE (``SUB_BLOCKS``), each wrapped in a hyper-connection. Every boundary between
    sub-blocks is one ``ops.hc_step``: merge the finished block's output into the streams (with the previous site's
    ``post`` / ``comb``), compute the next site's weights and the next block's normed input; after the last layer
    the last block is merged (``ops.hc_merge``). The one-call decode step (``deepseek_kernels.decode_stack``)
    computes the same order; ``tests/engine/test_decode_stack.py`` holds the two to the same bits.

    ``attend(layer, x)`` and ``feed(layer, x)`` run a layer's attention and MoE on their input ``x``
    ``[T, hidden]``. ``sites``: each layer's :func:`hc_sites`, when the caller keeps them (looked up otherwise).
    """
    c = config
    block = post = comb = None
    for i, layer in enumerate(layers):
        layer_sites = sites[i] if sites is not None else hc_sites(layer)
        for (fn, base, scale, norm_weight, block_eps), run in zip(layer_sites, (attend, feed)):
            streams, post, comb, x = ops.hc_step(streams, block, post, comb, fn, base, scale, c.hc_mult,
                                                 c.hc_sinkhorn_iters, c.hc_eps, c.rms_norm_eps, norm_weight, block_eps)
            block = run(layer, x)
    return streams if block is None else ops.hc_merge(streams, block, post, comb)


class DeepseekV4DecoderLayer(nn.Module):
    """Attention and MoE sub-blocks, each wrapped in a hyper-connection."""

    def __init__(self, config: DeepseekV4ModelConfig, layer_idx: int, main_rope: RotaryEmbedding,
                 compress_rope: RotaryEmbedding) -> None:
        super().__init__()
        c = config
        self.config = c
        self.attn = DeepseekV4Attention(c, layer_idx, main_rope, compress_rope)
        self.ffn = DeepseekV4MoE(c, layer_idx)
        self.attn_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.ffn_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        add_hc_sites(self, c)

    def hc_params(self, site: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(fn, base, scale)`` of the hyper-connection around sub-block ``site`` (``"attn"`` or ``"ffn"``)."""
        return getattr(self, f"hc_{site}_fn"), getattr(self, f"hc_{site}_base"), getattr(self, f"hc_{site}_scale")

    def forward(self, streams: torch.Tensor, input_ids: torch.Tensor, positions: torch.Tensor,
                cache: SequenceCache) -> torch.Tensor:
        return run_layers([self], streams, self.config, lambda layer, x: layer.attn(x, positions, cache),
                          lambda layer, x: layer.ffn(x, input_ids))


class DeepseekV4ForCausalLM(nn.Module):
    """The full text model: embedding, decoder layers, final stream collapse, norm and head."""

    def __init__(self, config: DeepseekV4ModelConfig) -> None:
        super().__init__()
        c = config
        self.config = c
        rope_dim = c.qk_rope_head_dim
        self.main_rope = RotaryEmbedding(c.rope_main, rope_dim)
        self.compress_rope = RotaryEmbedding(c.rope_compress, rope_dim)
        self.embed = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(
            DeepseekV4DecoderLayer(c, i, self.main_rope, self.compress_rope) for i in range(c.num_hidden_layers)
        )
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        self.hc_head_fn = nn.Parameter(torch.zeros(c.hc_mult, c.hc_mult * c.hidden_size))
        self.hc_head_base = nn.Parameter(torch.zeros(c.hc_mult))
        self.hc_head_scale = nn.Parameter(torch.ones(1))

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, cache) -> torch.Tensor:
        """Run new tokens and return float32 logits.

        ``cache`` is a :class:`SequenceCache` (one sequence, logits ``[T, vocab]``)
        or a batch context (``kv``, ``block_tables``, ``query_start_loc``,
        ``logits_indices``); see :mod:`deepseek_engine.models.deepseek_v4.kv_cache` for the contract.
        """
        if isinstance(cache, SequenceCache):
            return self.forward_sequence(input_ids, positions, cache)
        return self.forward_batch(input_ids, positions, cache)

    @torch.no_grad()
    def forward_sequence(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: SequenceCache) -> torch.Tensor:
        """Run ``T`` new tokens of one sequence; return float32 logits ``[T, vocab]`` and advance the cache."""
        input_ids = input_ids.reshape(-1).to(self.device, torch.long)
        positions = positions.reshape(-1).to(self.device, torch.long)
        if input_ids.shape != positions.shape:
            raise ValueError("input_ids and positions must have the same length")
        if input_ids.numel() == 0:
            raise ValueError("at least one token is needed")
        if int(input_ids.min()) < 0 or int(input_ids.max()) >= self.config.vocab_size:
            raise ValueError(f"token ids must lie in [0, {self.config.vocab_size})")
        if cache.pool.config is not self.config and cache.pool.config != self.config:
            raise ValueError("the cache pool was built for a different model config")
        cache.check_step(positions)
        h = self.embed(input_ids)
        streams = h.unsqueeze(1).expand(-1, self.config.hc_mult, -1).contiguous()
        streams = run_layers(self.layers, streams, self.config, lambda layer, x: layer.attn(x, positions, cache),
                             lambda layer, x: layer.ffn(x, input_ids))
        c = self.config
        h = self.norm(hyper_head(streams, self.hc_head_fn, self.hc_head_base, self.hc_head_scale, c.hc_eps,
                                 c.rms_norm_eps))
        cache.num_tokens += input_ids.numel()
        return self.head(h).float()

    @torch.no_grad()
    def forward_batch(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx) -> torch.Tensor:
        """Several sequences laid out back to back (see :mod:`deepseek_engine.models.deepseek_v4.kv_cache`)."""
        pool = ctx.kv
        if not isinstance(pool, KVCachePool):
            raise TypeError("batch context must carry a KVCachePool as `kv`")
        starts = list(ctx.query_start_loc)
        if len(starts) != len(ctx.block_tables) + 1 or starts[-1] != input_ids.numel():
            raise ValueError("query_start_loc must have one entry per sequence plus the total token count")
        rows = []
        for i, table in enumerate(ctx.block_tables):
            a, b = starts[i], starts[i + 1]
            if b <= a:
                raise ValueError(f"sequence {i} has no tokens in this step")
            seq = SequenceCache(pool, table, num_tokens=int(positions[a]))
            rows.append(self.forward_sequence(input_ids[a:b], positions[a:b], seq))
        logits = torch.cat(rows, dim=0)
        indices = getattr(ctx, "logits_indices", None)
        return logits if indices is None else logits[indices.to(logits.device)]

    @torch.no_grad()
    def forward_full(self, input_ids: torch.Tensor, block_size: int = 16) -> torch.Tensor:
        """One-shot forward over a whole sequence with a private throw-away cache."""
        ids = input_ids.reshape(-1)
        cache = SequenceCache.fresh(self.config, ids.numel(), block_size, self.dtype, self.device)
        return self.forward(ids, torch.arange(ids.numel()), cache)

    def new_cache(self, max_tokens: int, block_size: int = 16) -> SequenceCache:
        """Convenience: a private cache able to hold ``max_tokens`` tokens."""
        return SequenceCache.fresh(self.config, max_tokens, block_size, self.dtype, self.device)
