"""DeepSeek V4.1 causal language model for single-sequence, cache-driven execution.

What differs from :mod:`deepseek_engine.models.deepseek_v4.model` (each point is
checked against vLLM 0.33's ``deepseek_v41`` code; see ``docs/engine-serving.md``):

* delayed hyper-connection pre-mix: a sub-block's input is collapsed with the
  *previous* sub-block's ``pre`` weights (layer 0's attention reads stream 0,
  the embedding), and its own ``pre`` goes to the next sub-block; there is no
  learned ``hc_head``: the final collapse uses the last MoE's ``pre``;
* no per-head query RMS norm;
* per-layer compression ratios 0/1/2; compressors and compressed caches only on
  ``kv_source_layer_ids``, indexers only on ``index_source_layer_ids``; the
  other compressed layers read the latest source at or below them (entries and
  top-k choice); every compressed layer (ratio 1 too) uses the YaRN
  ``compress`` rope, sliding-window layers the plain ``main`` rope;
* two-level candidate filtering of the indexers (:mod:`~deepseek_engine.models.deepseek_v41.indexer`);
* learned routing on every MoE layer, with ``gate.bias_vl`` for image tokens;
* engram layers before the attention pre-mix (:mod:`~deepseek_engine.models.deepseek_v41.engram`).

The cache contract is :mod:`deepseek_engine.models.deepseek_v41.kv_cache`; the forward contract
(``forward(input_ids, positions, cache) -> logits``) is the V4 one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import deepseek_kernels as ops
import torch
from torch import nn

from deepseek_engine.layers.hyper_connection import add_hc_sites, hyper_merge
from deepseek_engine.layers.norm import RMSNorm
from deepseek_engine.layers.packed_linear import group_matrices, matrix
from deepseek_engine.layers.rotary_embedding import RotaryEmbedding, apply_rotary
from deepseek_engine.layers.row_invariant import linear, rotary
from deepseek_engine.models.deepseek_v4.attention import add_attention_projections
from deepseek_engine.models.deepseek_v4.kv_cache import SequenceCache, read_rows, write_rows
from deepseek_engine.models.deepseek_v41.compressor import V41Compressor
from deepseek_engine.models.deepseek_v41.config import DeepseekV41ModelConfig
from deepseek_engine.models.deepseek_v41.engram import (
    DEAD_ID,
    Engram,
    EngramLayout,
    image_token_mask,
    ngram_hashes,
)
from deepseek_engine.models.deepseek_v41.hyper_connection import collapse, mhc_pre_delayed
from deepseek_engine.models.deepseek_v41.indexer import V41Indexer, index_logits, select_entries
from deepseek_engine.models.deepseek_v41.kv_cache import V41CachePool, fresh_v41_cache
from deepseek_engine.models.deepseek_v41.moe import DeepseekV41MoE


@dataclass
class StepState:
    """What one forward step passes from layer to layer: top-k choices and published candidate blocks."""

    topk: dict[int, torch.Tensor] = field(default_factory=dict)
    candidates: torch.Tensor | None = None


def sink_attention(q: torch.Tensor, keys: torch.Tensor, visible: torch.Tensor, sink: torch.Tensor,
                   scale: float) -> torch.Tensor:
    """Single-KV-head attention with a per-head sink logit: ``q [T, H, D]``, ``keys [K, D]`` -> ``[T, H, D]``
    (the kernel op ``deepseek_kernels.sink_attention``: each query on its own, visible keys in order)."""
    return ops.sink_attention(q[None], keys[None].to(q.dtype), visible[None], sink, scale)[0]


def grouped_output(wo_a: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``wo_a`` (a :class:`GroupedOutputProjection`, or kept packed) on ``x [T, groups, in]``, each group row by
    row."""
    return torch.cat([linear(x[:, g], w) for g, w in enumerate(group_matrices(wo_a))], dim=-1)


class DeepseekV41Attention(nn.Module):
    """Attention of one V4.1 decoder layer; parameter names follow DeepSeek checkpoints."""

    def __init__(self, config: DeepseekV41ModelConfig, layer_idx: int, main_rope: RotaryEmbedding,
                 compress_rope: RotaryEmbedding) -> None:
        super().__init__()
        c = config
        self.layer_idx = layer_idx
        self.ratio = c.ratio(layer_idx)
        self.n_heads, self.head_dim, self.window = c.num_attention_heads, c.head_dim, c.sliding_window
        self.o_groups = c.o_groups
        self.scale = c.head_dim**-0.5
        self.rope = compress_rope if self.ratio > 0 else main_rope
        add_attention_projections(self, c)  # no per-head query norm in V4.1: the forward skips it
        self.kv_source = c.kv_source(layer_idx)
        self.index_source = c.index_source(layer_idx)
        is_kv_source = layer_idx in c.kv_source_layer_ids
        self.compressor = V41Compressor(c.hidden_size, c.head_dim, self.ratio, c.rms_norm_eps) if is_kv_source else None
        self.indexer = None
        if layer_idx in c.index_source_layer_ids:
            self.indexer = V41Indexer(c.hidden_size, c.q_lora_rank, c.index_n_heads, c.index_head_dim, c.head_dim,
                                      c.rms_norm_eps, owns_keys=is_kv_source)
        self.index_topk = c.index_topk
        self.candidate_write = c.uses_candidates and layer_idx == c.candidate_source_layer_id
        self.candidate_read = c.uses_candidates and self.indexer is not None and layer_idx > c.candidate_source_layer_id
        self.candidate_blocks, self.candidate_block_size = c.candidate_topk_blocks, c.candidate_block_size

    def forward(self, x: torch.Tensor, positions: torch.Tensor, cache: SequenceCache, step: StepState) -> torch.Tensor:
        t = x.shape[0]
        pool = cache.pool
        lp = pool.layers[self.layer_idx]
        cos, sin = rotary(self.rope, positions, x.dtype)
        q_latent = self.q_norm(linear(x, matrix(self.wq_a)))
        q = apply_rotary(linear(q_latent, matrix(self.wq_b)).view(t, self.n_heads, self.head_dim), cos, sin)
        kv = apply_rotary(self.norm(linear(x, matrix(self.wkv))), cos, sin)
        ring = getattr(cache, "window_ring", None)
        if ring is not None and t > ring.max_step:
            raise ValueError(f"{t} tokens in one step exceed the window ring's max_step={ring.max_step}")
        store, rows_of = (ring.layers[self.layer_idx], ring.rows) if ring is not None else (lp.kv, cache.slots)
        write_rows(store, rows_of(positions), kv)

        start = int(positions[0])
        # Bounded replay: window reads never reach below ``replay_start`` (0 otherwise).
        first = max(0, start - self.window + 1, getattr(cache, "replay_start", 0))
        key_pos = torch.arange(first, start + t, device=x.device)
        keys = read_rows(store, rows_of(key_pos))
        visible = (key_pos[None, :] <= positions[:, None]) & (key_pos[None, :] > positions[:, None] - self.window)

        if self.ratio > 0:
            if self.compressor is not None and not getattr(cache, "replaying", False):
                self._compress(x, positions, cache, lp)
            r = self.ratio
            total = (start + t) // r
            rows = cache.slots((torch.arange(total, device=x.device) + 1) * r - 1)
            entries = read_rows(pool.layers[self.kv_source].entries, rows)
            if self.indexer is not None:
                step.topk[self.layer_idx] = self._select(x, q_latent, positions, cache, rows, step, cos, sin)
            keys = torch.cat([keys, entries], dim=0)
            visible = torch.cat([visible, step.topk[self.index_source]], dim=1)

        out = sink_attention(q, keys, visible, self.attn_sink, self.scale)
        out = apply_rotary(out, cos, -sin)
        return linear(grouped_output(self.wo_a, out.reshape(t, self.o_groups, -1)), matrix(self.wo_b))

    def _compress(self, x: torch.Tensor, positions: torch.Tensor, cache: SequenceCache, lp) -> None:
        """Pool every group closed by this chunk; store entries (and index keys) at the closing rows."""
        comp = self.compressor
        r = self.ratio
        rows = comp.scores(x)
        start, end = int(positions[0]), int(positions[-1]) + 1
        if r == 2:
            write_rows(lp.raw, cache.slots(positions), rows)
        done, total = -(-start // r), end // r
        if start % r:  # the chunk's first token closes a group opened in an earlier step
            done = start // r
            prev = read_rows(lp.raw, cache.slots(torch.tensor([start - 1], device=x.device)))
            rows = torch.cat([prev, rows], dim=0)
        if total <= done:
            return
        used = rows[: (total - done) * r]
        latents = comp.pool(used).to(x.dtype)
        gpos = torch.arange(done, total, device=x.device) * r
        cos, sin = rotary(self.rope, gpos, x.dtype)
        closing = cache.slots(gpos + r - 1)
        write_rows(lp.entries, closing, apply_rotary(latents, cos, sin))
        if lp.index_keys is not None:
            write_rows(lp.index_keys, closing, self.indexer.keys(latents, cos, sin))

    def _select(self, x, q_latent, positions, cache, rows, step: StepState, cos, sin) -> torch.Tensor:
        """This index source's choice of compressed entries per query ``[T, N]``."""
        keys = read_rows(cache.pool.layers[self.kv_source].index_keys, rows)
        ends = (positions + 1) // self.ratio
        visible = torch.arange(keys.shape[0], device=x.device)[None, :] < ends[:, None]
        qi, w = self.indexer.queries(q_latent, x, cos, sin)
        logits = index_logits(qi, w, keys, visible)
        reading = step.candidates if self.candidate_read and not self.candidate_write else None
        mask, chosen = select_entries(logits, ends, self.index_topk, reading, self.candidate_block_size,
                                      self.candidate_blocks if self.candidate_write else 0)
        if chosen is not None:
            step.candidates = chosen
        return mask


class DeepseekV41DecoderLayer(nn.Module):
    """Optional engram, attention and MoE; hyper-connections with the delayed pre-mix."""

    def __init__(self, config: DeepseekV41ModelConfig, layer_idx: int, main_rope: RotaryEmbedding,
                 compress_rope: RotaryEmbedding) -> None:
        super().__init__()
        c = config
        self.config = c
        self.layer_idx = layer_idx
        self.engram = Engram(c, c.engram_layer_ids.index(layer_idx)) if layer_idx in c.engram_layer_ids else None
        self.attn = DeepseekV41Attention(c, layer_idx, main_rope, compress_rope)
        self.ffn = DeepseekV41MoE(c, layer_idx)
        self.attn_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.ffn_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        add_hc_sites(self, c)

    def _pre(self, site: str, streams: torch.Tensor, pre_mix: torch.Tensor | None):
        c = self.config
        return mhc_pre_delayed(streams, getattr(self, f"hc_{site}_fn"), getattr(self, f"hc_{site}_scale"),
                               getattr(self, f"hc_{site}_base"), c.rms_norm_eps, c.hc_eps, c.hc_sinkhorn_iters,
                               pre_mix)

    def forward(self, streams: torch.Tensor, pre_mix: torch.Tensor | None, input_ids: torch.Tensor,
                positions: torch.Tensor, cache: SequenceCache, step: StepState,
                engram_rows: torch.Tensor | None = None, engram_keep: torch.Tensor | None = None):
        """Return the new streams and this layer's MoE ``pre`` (the next sub-block's collapse weights)."""
        if self.engram is not None:
            streams = self.engram(streams, engram_rows[:, self.engram.index], engram_keep)
        post, comb, x, attn_pre = self._pre("attn", streams, pre_mix)
        streams = hyper_merge(streams, self.attn(self.attn_norm(x), positions, cache, step), post, comb)
        post, comb, x, ffn_pre = self._pre("ffn", streams, attn_pre)
        return hyper_merge(streams, self.ffn(self.ffn_norm(x), input_ids), post, comb), ffn_pre


class DeepseekV41ForCausalLM(nn.Module):
    """Embedding, decoder layers, the final collapse with the last ``pre``, norm and head."""

    def __init__(self, config: DeepseekV41ModelConfig) -> None:
        super().__init__()
        c = config
        self.config = c
        self.main_rope = RotaryEmbedding(c.rope_main, c.qk_rope_head_dim)
        self.compress_rope = RotaryEmbedding(c.rope_compress, c.qk_rope_head_dim)
        self.embed = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(DeepseekV41DecoderLayer(c, i, self.main_rope, self.compress_rope)
                                    for i in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        self.engram_layout = EngramLayout(c) if c.engram_layer_ids else None
        # Token id -> compressed id (set by the loader from the checkpoint's tokenizer).
        self.engram_token_map: torch.Tensor | None = None
        self.engram_pad_id = 0

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    def set_token_map(self, token_map: torch.Tensor) -> None:
        """Install the compressed-id map the engram hash reads."""
        if token_map.numel() != self.config.vocab_size:
            raise ValueError(f"token map has {token_map.numel()} entries; the model has {self.config.vocab_size}")
        self.engram_token_map = token_map.to(self.device, torch.long)
        self.engram_pad_id = int(self.engram_token_map[self.config.engram_pad_token_id])

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, cache) -> torch.Tensor:
        """Logits of new tokens; ``cache`` is a :class:`SequenceCache` over a V4.1 pool or a batch context."""
        if isinstance(cache, SequenceCache):
            return self.forward_sequence(input_ids, positions, cache)
        return self.forward_batch(input_ids, positions, cache)

    def _engram_inputs(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: SequenceCache):
        """Per-token table rows of every engram layer, and which tokens get an engram update."""
        if self.engram_layout is None:
            return None, None
        if self.engram_token_map is None:
            raise RuntimeError("this model has engram layers but no token map; load it with a tokenizer.json")
        lookback = self.engram_layout.max_ngram - 1
        start = int(positions[0])
        hist = torch.arange(start - lookback, start, device=input_ids.device).clamp_min(0)
        ids = torch.cat([cache.pool.token_ids.view(-1)[cache.slots(hist)], input_ids])
        compressed = self.engram_token_map[ids]
        compressed = torch.where(image_token_mask(ids), torch.full_like(compressed, DEAD_ID), compressed)
        rows = ngram_hashes(compressed, positions, self.engram_layout, self.engram_pad_id)
        return rows, ~image_token_mask(input_ids)

    def hidden_streams(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: SequenceCache,
                       capture: tuple[int, ...] = ()):
        """Run the decoder layers; return the final streams ``[T, hc, D]``, the last MoE ``pre`` ``[T, hc]``
        and, for each ``L`` in ``capture``, the mean over streams after ``L`` layers ``[T, D]``."""
        if not getattr(cache, "replaying", False):  # replayed positions' ids are already in the shared blocks
            cache.pool.token_ids.view(-1).index_copy_(0, cache.slots(positions), input_ids)
        rows, keep = self._engram_inputs(input_ids, positions, cache)
        streams = self.embed(input_ids).unsqueeze(1).expand(-1, self.config.hc_mult, -1).contiguous()
        pre = None
        step = StepState()
        captured = {}
        for i, layer in enumerate(self.layers):
            if i in capture:
                captured[i] = streams.mean(dim=1)
            streams, pre = layer(streams, pre, input_ids, positions, cache, step, rows, keep)
        if len(self.layers) in capture:
            captured[len(self.layers)] = streams.mean(dim=1)
        return streams, pre, [captured[i] for i in capture]

    @torch.no_grad()
    def forward_with_aux(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: SequenceCache,
                         layers: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits and the concatenated stream means after each of ``layers`` layers ``[T, D * len(layers)]``."""
        input_ids, positions = self._check(input_ids, positions, cache)
        streams, pre, aux = self.hidden_streams(input_ids, positions, cache, tuple(layers))
        cache.num_tokens += input_ids.numel()
        return linear(self.norm(collapse(streams, pre)), matrix(self.head)).float(), torch.cat(aux, dim=-1)

    @torch.no_grad()
    def replay_prefix(self, prefix_ids: torch.Tensor | None, cache: SequenceCache, ring, depth: int | None = None) -> int:
        """Rebuild the window KV of a prefix-cache hit of ``h`` tokens by bounded replay; return ``replay_start``.

        ``cache`` shares the hit's blocks (compressor rows, entries, index keys and
        token ids of every position) but not their window KV: ``ring`` (a
        :class:`~deepseek_engine.models.deepseek_v41.kv_cache.WindowRing`) is this sequence's
        private window store. The last ``depth`` hit tokens (default ``window``,
        vLLM's ``swa_bounded_replay``) are run again, starting at ``replay_start =
        max(0, h - depth)``; their window attention reads nothing below it and they
        write no compressed state (the shared blocks keep the full forward's values).
        ``prefix_ids`` (``None``: read from the pool's token ids) are the hit's ``h``
        tokens; ``h`` is ``cache.num_tokens`` when ``prefix_ids`` is ``None``.

        A layer's window KV at position ``q`` is exact when the layer's input at
        ``q`` is, and layer ``l``'s input is exact from ``replay_start + l * (window
        - 1)`` on. So ``depth = num_layers * (window - 1)`` (:meth:`exact_replay_depth`)
        makes every later row equal to a full forward; a shorter depth (vLLM's
        ``window``) leaves the window KV of the first replayed rows at layers >= 1
        short of context, which only a model trained with bounded replay tolerates.
        A hit no longer than ``depth`` is a full recompute, hence exact.
        """
        h = cache.num_tokens if prefix_ids is None else prefix_ids.numel()
        if prefix_ids is None:
            prefix_ids = cache.pool.token_ids.view(-1)[cache.slots(torch.arange(h, device=self.device))]
        r0 = max(0, h - (self.config.sliding_window if depth is None else depth))
        cache.window_ring, cache.replay_start, cache.replaying = ring, r0, True
        try:
            for a in range(r0, h, ring.max_step):
                b = min(h, a + ring.max_step)
                cache.num_tokens = a
                ids, pos = self._check(prefix_ids[a:b], torch.arange(a, b), cache)
                self.hidden_streams(ids, pos, cache)
        finally:
            cache.replaying = False
        cache.num_tokens = h
        ring.lo, ring.end, ring.floor = r0, h, 0
        return r0

    def exact_replay_depth(self) -> int:
        """Replayed tokens that make a prefix-cache hit equal a full forward (see :meth:`replay_prefix`)."""
        return self.config.num_hidden_layers * (self.config.sliding_window - 1)

    def _check(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: SequenceCache):
        input_ids = input_ids.reshape(-1).to(self.device, torch.long)
        positions = positions.reshape(-1).to(self.device, torch.long)
        if input_ids.shape != positions.shape:
            raise ValueError("input_ids and positions must have the same length")
        if input_ids.numel() == 0:
            raise ValueError("at least one token is needed")
        if int(input_ids.min()) < 0 or int(input_ids.max()) >= self.config.vocab_size:
            raise ValueError(f"token ids must lie in [0, {self.config.vocab_size})")
        if not isinstance(cache.pool, V41CachePool):
            raise ValueError("a V4.1 model needs a V41CachePool")
        if cache.pool.config is not self.config and cache.pool.config != self.config:
            raise ValueError("the cache pool was built for a different model config")
        cache.check_step(positions)
        return input_ids, positions

    @torch.no_grad()
    def forward_sequence(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: SequenceCache,
                         return_hidden: bool = False):
        """Run ``T`` new tokens of one sequence; return float32 logits ``[T, vocab]`` and advance the cache."""
        input_ids, positions = self._check(input_ids, positions, cache)
        streams, pre, _ = self.hidden_streams(input_ids, positions, cache)
        h = self.norm(collapse(streams, pre))
        cache.num_tokens += input_ids.numel()
        logits = linear(h, matrix(self.head)).float()
        return (logits, streams) if return_hidden else logits

    @torch.no_grad()
    def forward_batch(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx, rings: list | None = None) -> torch.Tensor:
        """Several sequences back to back (the batch-context contract of
        :mod:`deepseek_engine.models.deepseek_v4.kv_cache`), all in one pass per layer
        (:func:`deepseek_engine.models.deepseek_v41.serving.batched_hidden`); each row gets the bits of its
        sequence run alone through :meth:`forward_sequence`.

        ``rings``: one :class:`~deepseek_engine.models.deepseek_v41.kv_cache.WindowRing` per sequence holding its
        window KV instead of the pool (``None``: the pool holds it)."""
        from deepseek_engine.models.deepseek_v41.serving import batched_hidden

        rows = getattr(ctx, "logits_indices", None)
        h = batched_hidden(self, input_ids, positions, ctx, rings,
                           rows=None if rows is None else rows.to(self.device))
        if h is None:
            return torch.empty(0, self.config.vocab_size, device=self.device)
        return linear(h, matrix(self.head)).float()

    @torch.no_grad()
    def forward_full(self, input_ids: torch.Tensor, block_size: int = 16) -> torch.Tensor:
        """One-shot forward over a whole sequence with a private throw-away cache."""
        ids = input_ids.reshape(-1)
        cache = self.new_cache(ids.numel(), block_size)
        return self.forward(ids, torch.arange(ids.numel()), cache)

    def new_cache(self, max_tokens: int, block_size: int = 16) -> SequenceCache:
        return fresh_v41_cache(self.config, max_tokens, block_size, self.dtype, self.device)
