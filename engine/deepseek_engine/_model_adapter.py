"""Glue between the serving layer and the DeepSeek V4 model.

``DeepseekV4ForCausalLM`` computes one sequence at a time (its batch-context
forward loops over sequences). ``BatchedDeepseekV4`` runs the new tokens of all
scheduled sequences in one pass instead: embedding, hyper-connections, MoE and the
head work on the flat batch of tokens, and attention, the part that reads the
paged cache, runs once per layer for all sequences (``batched_attention``). It
follows the layer order of ``DeepseekV4ForCausalLM.forward_sequence`` exactly.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .batched_attention import StepLayout, attention
from .kv_cache import KVCachePool
from .layers.hyper_connection import hyper_head, hyper_merge, hyper_weights
from .model_runner import StepContext
from .native import GreedyHead, hc_step, library

#: Context length used when the caller gives none (the checkpoint's may be 1M tokens).
DEFAULT_MAX_MODEL_LEN = 8192


class BatchedDeepseekV4(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.config = model.config
        self.greedy_head = GreedyHead(model.head.weight)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        h = self._hidden(input_ids, positions, ctx)
        if h is None:  # a step of unfinished prefill chunks only
            return torch.empty(0, self.config.vocab_size, device=input_ids.device)
        return self.model.head(h).float()

    def greedy_tokens(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        """The arg-max token of each row ``forward`` would return, without the full logits when possible."""
        h = self._hidden(input_ids, positions, ctx)
        if h is None:
            return torch.empty(0, dtype=torch.long, device=input_ids.device)
        picks = self.greedy_head(h)
        if picks is None:
            picks = torch.argmax(self.model.head(h).float(), dim=-1)
        return picks

    def _plan(self) -> list[tuple]:
        """Per decoder layer: its attention, norms and MoE modules and its parameter dict.

        Built once per model (the module objects stay the same); parameters are read
        from the live ``_parameters`` dict at every step, so replaced or reloaded
        weights are always seen.
        """
        plan = self.__dict__.get("_layer_plan")
        if plan is None:
            plan = [(layer.attn, layer.attn_norm, layer.ffn, layer.ffn_norm, layer._parameters)
                    for layer in self.model.layers]
            self.__dict__["_layer_plan"] = plan
        return plan

    def _fused_plan(self, streams: torch.Tensor) -> list[tuple] | None:
        """Per layer ``(attn, ffn, ((attn_norm weight, eps), (ffn_norm weight, eps)))`` for ``hc_step``, or
        ``None`` when the fused boundary calls do not apply (no native library, other dtypes, or norms whose
        epsilon differs from the hyper-connection norm's)."""
        if streams.dtype != torch.float32 or not streams.is_cpu or library() is None:
            return None
        eps = self.config.rms_norm_eps
        out = []
        for attn, attn_norm, ffn, ffn_norm, _ in self._plan():
            if attn_norm.eps != eps or ffn_norm.eps != eps:
                return None
            aw, fw = attn_norm._parameters["weight"], ffn_norm._parameters["weight"]
            if aw.dtype != torch.float32 or fw.dtype != torch.float32:
                return None
            out.append((attn, ffn, ((aw, eps), (fw, eps))))
        return out

    def _hidden(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx: StepContext) -> torch.Tensor | None:
        """The normed final hidden state of the rows whose logits are wanted (``None``: no rows)."""
        m, c = self.model, self.config
        layout = StepLayout(positions, ctx.slot_mapping, ctx.query_start_loc, ctx.block_tables, ctx.block_size,
                            c.sliding_window, getattr(ctx, "prompt_lens", None))
        streams = m.embed(input_ids).unsqueeze(1).expand(-1, c.hc_mult, -1).contiguous()
        hc, iters, hc_eps, eps = c.hc_mult, c.hc_sinkhorn_iters, c.hc_eps, c.rms_norm_eps
        kv = ctx.kv
        plan = self._plan()
        fused = self._fused_plan(streams)
        if fused is not None:
            # Each boundary between sub-blocks is one native call: merge the finished block into the
            # streams, the next site's weights, and the next block's normed input.
            block = post = comb = None
            for (attn, ffn, sites), (_, _, _, _, params) in zip(fused, plan):
                for site, (norm_w, norm_eps) in zip(("attn", "ffn"), sites):
                    step = hc_step(streams, block, post, comb, params[f"hc_{site}_fn"], params[f"hc_{site}_base"],
                                   params[f"hc_{site}_scale"], hc, iters, hc_eps, norm_eps, norm_w)
                    if step is None:
                        break
                    streams, post, comb, x = step
                    block = attention(attn, x, layout, kv) if site == "attn" else ffn.forward(x, input_ids)
                else:
                    continue
                break
            else:
                streams = hyper_merge(streams, block, post, comb)
                fused = "done"
            if fused != "done":  # a boundary call declined (unexpected shapes): redo the step the plain way
                streams = m.embed(input_ids).unsqueeze(1).expand(-1, c.hc_mult, -1).contiguous()
        if fused != "done":
            for attn, attn_norm, ffn, ffn_norm, params in plan:
                # Same calls as DeepseekV4DecoderLayer.forward, without a module attribute look-up per use.
                fn, base, scale = params["hc_attn_fn"], params["hc_attn_base"], params["hc_attn_scale"]
                post, comb, x = hyper_weights(streams, fn, base, scale, hc, iters, hc_eps, eps)
                streams = hyper_merge(streams, attention(attn, attn_norm(x), layout, kv), post, comb)
                fn, base, scale = params["hc_ffn_fn"], params["hc_ffn_base"], params["hc_ffn_scale"]
                post, comb, x = hyper_weights(streams, fn, base, scale, hc, iters, hc_eps, eps)
                streams = hyper_merge(streams, ffn(ffn_norm(x), input_ids), post, comb)
        if ctx.logits_indices is not None:
            if ctx.logits_indices.numel() == 0:
                return None
            streams = streams[ctx.logits_indices]
        return m.norm(hyper_head(streams, m.hc_head_fn, m.hc_head_base, m.hc_head_scale, c.hc_eps, c.rms_norm_eps))


def load(model_dir: str, dtype: torch.dtype | None, device: torch.device) -> tuple[nn.Module, Any, dict]:
    """Load a checkpoint; return the batched model, its cache factory and engine facts."""
    from .loader import load_model

    model = load_model(model_dir, dtype or torch.float32, device)
    return wrap(model)


def wrap(model: nn.Module) -> tuple[nn.Module, Any, dict]:
    config = model.config
    eos = config.eos_token_id
    from .config_v41 import DeepseekV41ModelConfig

    if isinstance(config, DeepseekV41ModelConfig):
        from .models.v41_serving import wrap_v41

        return wrap_v41(model, min(config.max_position_embeddings, DEFAULT_MAX_MODEL_LEN))

    def make_kv(num_blocks: int, block_size: int) -> KVCachePool:
        return KVCachePool(config, num_blocks, block_size, model.dtype, model.device)

    info = {
        "vocab_size": config.vocab_size,
        "eos_token_id": eos,
        "max_model_len": min(config.max_position_embeddings, DEFAULT_MAX_MODEL_LEN),
    }
    return BatchedDeepseekV4(model), make_kv, info
