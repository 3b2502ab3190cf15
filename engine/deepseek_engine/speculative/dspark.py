"""DSpark (DeepSeek V4.1's drafter): parallel draft block, Markov head, confidence head.

Weights ship in the target checkpoint under ``mtp.{i}.*`` (read as in vLLM 0.33's
``deepseek_v41`` DSpark model):

* ``mtp.0.main_proj`` / ``mtp.0.main_norm``: the *context* of a position ``c``
  is ``main_norm(main_proj(concat_L mean_hc(streams_L[c])))`` where
  ``streams_L`` are the target's residual streams after ``L`` decoder layers,
  for ``L`` in ``dspark_target_layer_ids``;
* ``mtp.{i}.*`` (``i < num_nextn_predict_layers``): sliding-window-only V4.1
  decoder layers (their MoE with ``dspark_n_routed_experts`` /
  ``dspark_num_experts_per_tok``); each layer stores, at every accepted
  position, the key/value ``rope(norm(wkv(context)))`` in its own window cache;
* the *query block* of a step holds ``N`` tokens at positions ``P .. P+N-1``:
  the last sampled (not yet verified) token, then ``N - 1`` copies of the noise
  token ``dspark_noise_token_id``. They run through the draft layers in one
  pass, attending non-causally to every query token and to the context
  positions ``[max(P - window, 0), P)``; query ``j``'s output predicts the
  token at ``P + j + 1``;
* ``mtp.{last}.norm`` + the target's head give base logits; the Markov head
  (``markov_head.embed [V, r]``, ``markov_head.head [V, r]``) adds
  ``head @ embed[prev]`` where ``prev`` is the previous draft token (the
  anchor for the first), so the drafts are chosen left to right;
* the confidence head ``sigmoid(confidence_head.proj([h_j, embed[prev_j]]))``
  (``h_j`` the pre-norm output) estimates the chance that draft ``j`` is
  accepted given the previous ones were.

State: the window caches of the draft layers, addressed by position. Rows a
rejected draft touched (its query KV) are rewritten by the context of the
token finally accepted there before any later step reads them, so rolling
back needs no undo.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from deepseek_engine.layers.hyper_connection import hyper_merge
from deepseek_engine.layers.norm import RMSNorm
from deepseek_engine.layers.rotary_embedding import RotaryEmbedding, apply_rotary
from deepseek_engine.models.deepseek_v4.kv_cache import SequenceCache, read_rows, write_rows
from deepseek_engine.models.deepseek_v41.config import DeepseekV41ModelConfig
from deepseek_engine.models.deepseek_v41.hyper_connection import collapse
from deepseek_engine.models.deepseek_v41.kv_cache import V41CachePool
from deepseek_engine.models.deepseek_v41.model import DeepseekV41DecoderLayer, sink_attention


def draft_config(config: DeepseekV41ModelConfig) -> DeepseekV41ModelConfig:
    """Config of the draft stack: sliding-window layers, no sources, no engram, the DSpark expert counts."""
    n = config.num_nextn_predict_layers
    return config.model_copy(update={
        "num_hidden_layers": n, "compress_ratios": [0] * n, "kv_source_layer_ids": [],
        "index_source_layer_ids": [], "candidate_source_layer_id": -1, "engram_layer_ids": [],
        "engram_num_embeddings": [], "layer_types": ["sliding_attention"] * n, "mlp_layer_types": ["moe"] * n,
        "n_routed_experts": config.dspark_n_routed_experts or config.n_routed_experts,
        "num_experts_per_tok": config.dspark_num_experts_per_tok or config.num_experts_per_tok,
    })


class DSparkDrafter(nn.Module):
    """The draft stack and heads; ``embed``/``head`` are the target's (passed in, not owned)."""

    def __init__(self, config: DeepseekV41ModelConfig) -> None:
        super().__init__()
        if not config.dspark_target_layer_ids or config.num_nextn_predict_layers <= 0:
            raise ValueError("DSpark needs dspark_target_layer_ids and num_nextn_predict_layers")
        self.target_config = config
        c = draft_config(config)
        self.config = c
        self.noise_token_id = config.dspark_noise_token_id
        self.rope = RotaryEmbedding(c.rope_main, c.qk_rope_head_dim)
        self.layers = nn.ModuleList(DeepseekV41DecoderLayer(c, i, self.rope, self.rope) for i in range(c.num_hidden_layers))
        d = c.hidden_size
        self.main_proj = nn.Linear(d * len(config.dspark_target_layer_ids), d, bias=False)
        self.main_norm = RMSNorm(d, c.rms_norm_eps)
        self.norm = RMSNorm(d, c.rms_norm_eps)
        rank = config.dspark_markov_rank
        self.markov_embed = nn.Embedding(config.vocab_size, rank)
        self.markov_head = nn.Linear(rank, config.vocab_size, bias=False)
        self.confidence = nn.Linear(d + rank, 1, bias=False)

    def new_cache(self, max_tokens: int, block_size: int, dtype: torch.dtype, device) -> SequenceCache:
        blocks = max(1, -(-max_tokens // block_size))
        return SequenceCache(V41CachePool(self.config, blocks, block_size, dtype, device), range(blocks))

    @torch.no_grad()
    def store_context(self, aux: torch.Tensor, positions: torch.Tensor, cache: SequenceCache) -> None:
        """Write the context key/value of accepted positions (``aux``: ``[T, D * len(targets)]``)."""
        x = self.main_norm(self.main_proj(aux.to(self.main_proj.weight.dtype)))
        cos, sin = self.rope(positions, x.dtype)
        slots = cache.slots(positions)
        for i, layer in enumerate(self.layers):
            kv = apply_rotary(layer.attn.norm(layer.attn.wkv(x)), cos, sin)
            write_rows(cache.pool.layers[i].kv, slots, kv)

    @torch.no_grad()
    def draft_hidden(self, anchor: int, start: int, n: int, embed: nn.Embedding, cache: SequenceCache) -> torch.Tensor:
        """Pre-norm outputs ``[n, D]`` of the query block at positions ``start .. start + n - 1``."""
        device = embed.weight.device
        ids = torch.full((n,), self.noise_token_id, dtype=torch.long, device=device)
        ids[0] = anchor
        positions = torch.arange(start, start + n, device=device)
        streams = embed(ids).unsqueeze(1).expand(-1, self.config.hc_mult, -1).contiguous()
        pre = None
        for i, layer in enumerate(self.layers):
            post, comb, x, attn_pre = layer._pre("attn", streams, pre)
            streams = hyper_merge(streams, self._attend(layer.attn, i, layer.attn_norm(x), positions, cache), post, comb)
            post, comb, x, pre = layer._pre("ffn", streams, attn_pre)
            streams = hyper_merge(streams, layer.ffn(layer.ffn_norm(x), ids), post, comb)
        return collapse(streams, pre)

    def _attend(self, attn, i: int, x: torch.Tensor, positions: torch.Tensor, cache: SequenceCache) -> torch.Tensor:
        """Non-causal block attention: every query sees the whole block and the window before it."""
        t = x.shape[0]
        lp = cache.pool.layers[i]
        cos, sin = attn.rope(positions, x.dtype)
        q_latent = attn.q_norm(attn.wq_a(x))
        q = apply_rotary(attn.wq_b(q_latent).view(t, attn.n_heads, attn.head_dim), cos, sin)
        kv = apply_rotary(attn.norm(attn.wkv(x)), cos, sin)
        write_rows(lp.kv, cache.slots(positions), kv)
        start = int(positions[0])
        key_pos = torch.arange(max(0, start - attn.window), start + t, device=x.device)
        keys = read_rows(lp.kv, cache.slots(key_pos))
        visible = torch.ones((t, key_pos.numel()), dtype=torch.bool, device=x.device)
        out = apply_rotary(sink_attention(q, keys, visible, attn.attn_sink, attn.scale), cos, -sin)
        return attn.wo_b(attn.wo_a(out.reshape(t, attn.o_groups, -1)))

    @torch.no_grad()
    def propose(self, anchor: int, start: int, n: int, embed: nn.Embedding, head: nn.Linear, cache: SequenceCache,
                pick) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """Draft ``n`` tokens after ``anchor`` (at position ``start``).

        ``pick(logits_row, j) -> token`` chooses each draft (arg-max for greedy,
        a draw for sampling). Returns the drafts, the logits they were chosen
        from ``[n, V]`` and the confidences ``[n]``.
        """
        h = self.draft_hidden(anchor, start, n, embed, cache)
        base = head(self.norm(h)).float()
        drafts, rows, conf = [], [], []
        prev = anchor
        for j in range(n):
            m = self.markov_embed.weight[prev]
            logits = base[j] + F.linear(m, self.markov_head.weight).float()
            token = pick(logits, j)
            rows.append(logits)
            feature = torch.cat([h[j].float(), m.float()])
            conf.append(torch.sigmoid(F.linear(feature, self.confidence.weight.float())).squeeze(-1))
            drafts.append(token)
            prev = token
        return drafts, torch.stack(rows), torch.stack(conf)


def adaptive_budget(confidences: torch.Tensor, costs: list[float]) -> int:
    """How many drafts to verify: the ``b`` maximising ``(1 + sum_{j<=b} prod_{i<=j} c_i) / costs[b]``.

    ``costs[b]`` is the cost of a step that verifies ``b`` drafts (draft pass
    included); the survival product is the estimated chance that the first ``j``
    drafts are all accepted, so the numerator is the expected tokens per step.
    """
    survival = torch.cumprod(confidences.double(), dim=0)
    expected = torch.cat([torch.ones(1, dtype=torch.float64), 1 + torch.cumsum(survival, 0)])
    n = min(len(costs), expected.numel())
    ratio = expected[:n] / torch.tensor(costs[:n], dtype=torch.float64)
    return int(torch.argmax(ratio))
