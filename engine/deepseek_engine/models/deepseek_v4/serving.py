"""Serving glue for DeepSeek V4: the model-runner contract over a V4 paged cache pool.

``DeepseekV4ForCausalLM`` computes one sequence at a time (its batch-context
forward loops over sequences). ``BatchedDeepseekV4`` runs the new tokens of all
scheduled sequences in one pass instead: embedding, hyper-connections, MoE and the
head work on the flat batch of tokens, and attention, the part that reads the
paged cache, runs once per layer for all sequences (``batched_attention``). It
runs the decoder stack through the same ``models.deepseek_v4.model.run_layers`` as
``DeepseekV4ForCausalLM.forward_sequence``; on decode steps the whole stack is one native call,
``deepseek_kernels.decode_stack`` (:mod:`.decode_plan`), which runs the same ops in the same order
(the order ``run_layers`` writes down; the tests hold both to the same bits).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import deepseek_kernels as ops
import torch
from torch import nn

from deepseek_engine.core.model_runner import StepContext
from deepseek_engine.layers.packed_linear import is_packed, matrix
from deepseek_engine.layers.row_invariant import linear
from deepseek_engine.models.deepseek_v4.batched_attention import (
    AttentionPlan,
    PositionTables,
    StepLayout,
    attention,
)
from deepseek_engine.models.deepseek_v4.decode_plan import DecodeStackPlan
from deepseek_engine.models.deepseek_v4.kv_cache import KVCachePool
from deepseek_engine.models.deepseek_v4.model import hc_sites, run_layers
from deepseek_engine.models.loader import process_weights_after_loading as prepare_layers


class BatchedDeepseekV4(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.config = model.config
        #: Decode steps run the decoder stack as one native call (``ops.decode_stack``) where the model allows;
        #: ``False`` keeps the Python layer loop (the tests compare both).
        self.use_decode_stack = True
        #: The compression rates of the layers (compressors and indexers share their layer's rate).
        self.rates = tuple(sorted({self.config.compress_rate(i) for i in range(self.config.num_hidden_layers)} - {0}))
        self.process_weights_after_loading()

    def process_weights_after_loading(self) -> None:
        """Build everything a step reads that is derived from the weights, from the weights as they are now: the
        layers' own derived tensors (:func:`~deepseek_engine.models.loader.process_weights_after_loading`), each
        layer's hyper-connection sites (``hc_sites``) and :class:`AttentionPlan` (a decode step then reads no
        module attributes per layer), the decode-stack plan and the greedy head's blocked copies. Runs once when
        the model is wrapped; ``LLM.reload_weights`` runs it again after weights changed. Nothing on the step
        path checks the weights."""
        prepare_layers(self.model)
        layers = list(self.model.layers)
        #: Each layer's hyper-connection sites and attention plan.
        self.plans = ([hc_sites(layer) for layer in layers], [AttentionPlan(layer.attn) for layer in layers])
        #: The rotary modules' whole-position tables, shared by every step.
        self.position_tables = PositionTables()
        #: ``ops.decode_stack``'s per-model arguments, or ``None`` when some layer needs a path the op lacks.
        self.decode_plan = DecodeStackPlan.build(layers, *self.plans, self.config.sliding_window, self.position_tables)
        head = matrix(self.model.head)
        #: The head's matrix (float or packed): logits are ``row_linear`` / ``wo_linear`` of it, every row on its own.
        self.head_matrix = head
        #: Blocked and 8-bit copies of a float head (``None``: the head is kept packed; its logits' arg-max).
        self.greedy_head = None if is_packed(head) else ops.GreedyHead(head)

    def _decode_stack(self, positions: torch.Tensor, ctx: StepContext) -> tuple | None:
        """``ops.decode_stack``'s arguments after ``input_ids`` (up to ``pools``) for a step where every sequence
        adds one token and the model's layers all take the op's path (:mod:`.decode_plan`); ``None``
        otherwise, and when ``use_decode_stack`` is off (the layer loop then runs, as for prefill)."""
        if not self.use_decode_stack or not ctx.block_tables or ctx.query_start_loc[-1] != len(ctx.block_tables):
            return None
        stack = self.decode_plan
        return None if stack is None else stack.call_arguments(positions, ctx)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        h = self._hidden(input_ids, positions, ctx)
        if h is None:  # a step of unfinished prefill chunks only
            return torch.empty(0, self.config.vocab_size, device=input_ids.device)
        return self.logits(h)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Float32 logits of the final hidden rows ``h``: the head through ``row_linear`` (``wo_linear`` for a
        packed head), so a row's log probabilities never depend on the other rows of the step (a BLAS product's
        blocking would: n > 1 choices and a sequence alone or in a batch then differ in the last bits)."""
        return linear(h, self.head_matrix).float()

    def greedy_tokens(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        """The arg-max token of each row ``forward`` would return, without the full logits on the CPU."""
        h = self._hidden(input_ids, positions, ctx)
        if h is None:
            return torch.empty(0, dtype=torch.long, device=input_ids.device)
        if self.greedy_head is None:
            return torch.argmax(self.logits(h), dim=-1)
        return self.greedy_head(h)

    def greedy_step(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx: StepContext
                    ) -> tuple[torch.Tensor, Callable[[list[int]], torch.Tensor],
                               Callable[[int, torch.Tensor], torch.Tensor] | None]:
        """``greedy_tokens``, a function giving the float32 logits ``forward`` would return for some of those
        rows (from the same hidden state), and one giving a row's logits at some token IDs only (the same values:
        ``row_linear`` sums each output over the hidden width in a fixed order, whichever head rows it is
        given): a constrained step checks each arg-max against its grammar and computes logits only for the
        rows whose arg-max the grammar forbids, and only at the tokens it allows when they are few."""
        h = self._hidden(input_ids, positions, ctx)
        if h is None:
            empty = torch.empty(0, dtype=torch.long, device=input_ids.device)
            return empty, lambda rows: torch.empty(0, self.config.vocab_size, device=input_ids.device), None
        if self.greedy_head is None:  # a packed head: arg-maxes of its logits, no partial rows
            logits = self.logits(h)
            return torch.argmax(logits, dim=-1), lambda rows: logits[rows], None
        head = self.head_matrix
        return (self.greedy_head(h), lambda rows: self.logits(h[rows]),
                lambda row, ids: linear(h[row:row + 1], head[ids.to(head.device)]).float()[0])

    def _hidden(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx: StepContext) -> torch.Tensor | None:
        """The normed final hidden state of the rows whose logits are wanted (``None``: no rows)."""
        m, c = self.model, self.config
        streams = m.embed(input_ids).unsqueeze(1).expand(-1, c.hc_mult, -1).contiguous()
        native = self._decode_stack(positions, ctx)
        if native is not None:  # a decode step: the layout and the whole stack in one call
            streams = ops.decode_stack(streams, input_ids, *native, c.hc_mult, c.hc_sinkhorn_iters, c.hc_eps,
                                       c.rms_norm_eps)
        else:
            layout = StepLayout(positions, ctx.slot_mapping, ctx.query_start_loc, ctx.block_tables, ctx.block_size,
                                c.sliding_window, getattr(ctx, "prompt_lens", None), self.rates,
                                position_tables=self.position_tables)
            kv = ctx.kv
            sites, attention_plans = self.plans
            plan = iter(attention_plans)
            streams = run_layers(m.layers, streams, c,
                                 lambda layer, x: attention(layer.attn, x, layout, kv, next(plan)),
                                 lambda layer, x: layer.ffn(x, input_ids), sites)
        if ctx.logits_indices is not None:
            if ctx.logits_indices.numel() == 0:
                return None
            streams = streams[ctx.logits_indices]
        # the last hyper-connection site and the final norm in one call (``hyper_head`` then ``m.norm``)
        return ops.hc_head(streams, m.hc_head_fn, m.hc_head_base, m.hc_head_scale, c.hc_eps, c.rms_norm_eps,
                           m.norm.weight, m.norm.eps)


def wrap_v4(model: nn.Module, max_model_len: int, swa_replay: str | None = "exact") -> tuple[nn.Module, Any, dict]:
    """V4 models keep window KV in the shared pool blocks (``swa_replay`` ``None``, or ``"exact"``, which is
    the same for V4) and refuse the other settings."""
    config = model.config
    if swa_replay not in (None, "exact"):
        raise ValueError(f"swa_replay={swa_replay!r} needs a DeepSeek V4.1 model; V4 shares window KV through the prefix cache")

    def make_kv(num_blocks: int, block_size: int) -> KVCachePool:
        return KVCachePool(config, num_blocks, block_size, model.dtype, model.device)

    info = {"vocab_size": config.vocab_size, "eos_token_id": config.eos_token_id, "max_model_len": max_model_len}
    return BatchedDeepseekV4(model), make_kv, info
