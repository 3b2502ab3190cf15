"""The arguments of ``ops.decode_stack``: a decode step's whole decoder stack in one native call.

On a decode step (every sequence adds one token) the layer loop of ``models.deepseek_v4.run_layers`` with
``batched_attention.attention`` makes some fifty op calls and as much Python glue between them; on small
models that glue costs as much as the kernels. ``ops.decode_stack`` runs the same ops in the same order in
one call (the same bits), from flat per-layer argument lists (their layout: ``deepseek_kernels.decode_stack``).

:class:`DecodeStackPlan` builds the parts that stay from step to step once (parameters, sizes, settings, the
pools) and gives each step the few inputs the op builds the step's layout from (positions, slots, padded
block tables, prompt lengths and the rotary modules' whole-position tables): a decode step builds no
:class:`~deepseek_engine.models.deepseek_v4.batched_attention.StepLayout`. It declines
(:meth:`DecodeStackPlan.build` returns ``None``) models whose layers take a path the op does not have: MoE
layers with many experts (routed instead of the dense few-expert product), an indexer with a rotary module
of its own, or parameters that are not float32. Those run the Python layer loop, as do prefill steps.
"""

from __future__ import annotations

import torch
from deepseek_kernels.decode_stack import reference as stack  # the argument layout

from deepseek_engine.core.int_tensors import long_tensor, padded_rows
from deepseek_engine.models.deepseek_v4 import batched_attention
from deepseek_engine.models.deepseek_v4.batched_attention import AttentionPlan, position_tables


class DecodeStackPlan:
    """``ops.decode_stack``'s arguments for one model, built from the kept per-layer plans.

    ``weights`` holds parameter objects (in-place updates are seen) and the derived stacked matrices of the
    fused input product and of the experts, refreshed on every step through the same version checks as the
    Python path (``FusedLinears.weight``, ``DeepseekV4MoE._stacked``).
    """

    def __init__(self, layers: list, sites: list, attention_plans: list[AttentionPlan], window: int) -> None:
        self.window = window  # the sliding window (config.sliding_window)
        self.plans = attention_plans
        #: The rotary modules whose position tables the op reads (``ints``' I_ROPE etc. index this list).
        self.ropes: list = []
        self.weights: list[torch.Tensor | None] = []
        self.ints: list[int] = []
        self.floats: list[float] = []
        self.moe = []  # per layer: (module, dense plan) for the expert matrices
        for layer, layer_sites, plan in zip(layers, sites, attention_plans):
            self._add_layer(layer, layer_sites, plan)
        #: The weights the derived matrices are stacked from, and their (address, version) when last stacked.
        self._sources = [t for plan, (_, moe_plan) in zip(attention_plans, self.moe)
                         for t in (*plan.fused.weights, *moe_plan.params)]
        self._key: list | None = None
        self._pools: tuple | None = None  # (the pool object, its per-layer tensors as the op takes them)

    @classmethod
    def build(cls, layers: list, sites: list, attention_plans: list[AttentionPlan],
              window: int) -> DecodeStackPlan | None:
        """The plan, or ``None`` when some layer needs a path ``decode_stack`` does not take."""
        for layer, plan in zip(layers, attention_plans):
            moe_plan = layer.ffn._plan()
            if not moe_plan.dense or moe_plan.score_func not in stack.SCORE_FUNCS:
                return None
            if plan.indexer is not None and not plan.shared_rope:
                return None
            if len(plan.copy_offsets) > stack.MAX_COPIES:
                return None
            if any(p.dtype != torch.float32 for p in layer.parameters()):
                return None
        return cls(layers, sites, attention_plans, window)

    def _add_layer(self, layer, layer_sites, plan: AttentionPlan) -> None:
        moe = layer.ffn
        (attn_fn, attn_base, attn_scale, attn_norm, attn_eps), (ffn_fn, ffn_base, ffn_scale, ffn_norm, ffn_eps) = \
            layer_sites
        comp, indexer = plan.comp, plan.indexer
        moe_plan = moe._plan()
        up, down = moe._stacked(moe_plan)
        w: list[torch.Tensor | None] = [None] * stack.WEIGHTS
        w[stack.W_HC_ATTN_FN], w[stack.W_HC_ATTN_BASE], w[stack.W_HC_ATTN_SCALE] = attn_fn, attn_base, attn_scale
        w[stack.W_ATTN_NORM] = attn_norm
        w[stack.W_HC_FFN_FN], w[stack.W_HC_FFN_BASE], w[stack.W_HC_FFN_SCALE] = ffn_fn, ffn_base, ffn_scale
        w[stack.W_FFN_NORM] = ffn_norm
        q_norm_w, q_eps, wq_b, n_heads, head_dim, head_eps, kv_norm_w, kv_eps = plan.front
        w[stack.W_FUSED] = plan.fused.weight()
        w[stack.W_Q_NORM], w[stack.W_WQ_B], w[stack.W_KV_NORM] = q_norm_w, wq_b, kv_norm_w
        w[stack.W_IDX_WQ_B] = plan.front_indexer[0]
        if comp is not None:
            w[stack.W_COMP_APE], w[stack.W_COMP_NORM] = comp.ape, comp.norm.weight
        if indexer is not None:
            w[stack.W_IDX_APE], w[stack.W_IDX_NORM] = indexer.compressor.ape, indexer.compressor.norm.weight
        w[stack.W_SINK] = plan.sink
        w[stack.W_WO_A], _, w[stack.W_WO_B] = plan.back
        w[stack.W_MOE_UP], w[stack.W_MOE_DOWN] = up, down
        w[stack.W_TID2EID] = moe_plan.gate.tid2eid if moe_plan.hashed else None
        w[stack.W_MOE_BIAS] = moe_plan.bias
        self.weights += w
        self.moe.append((moe, moe_plan))

        n = [0] * stack.INTS
        n[stack.I_HEADS], n[stack.I_HEAD_DIM] = n_heads, head_dim
        _, n[stack.I_IDX_HEADS], n[stack.I_IDX_DIM] = plan.front_indexer
        n[stack.I_GROUPS] = plan.back[1]
        n[stack.I_RATE] = plan.comp_rate
        n[stack.I_HAS_INDEXER] = int(indexer is not None)
        if indexer is not None:
            n[stack.I_HW_START], n[stack.I_HW_END] = plan.head_weights
            n[stack.I_TOPK] = indexer.topk
            n[stack.I_IDX_OVERLAP] = int(indexer.compressor.overlap)
        if comp is not None:
            n[stack.I_COMP_OVERLAP] = int(comp.overlap)
        n[stack.I_MOE_EXPERTS], n[stack.I_MOE_INTER], n[stack.I_MOE_TOPK] = moe_plan.n, moe_plan.inter, moe_plan.top_k
        n[stack.I_SCORE_FUNC] = stack.SCORE_FUNCS.index(moe_plan.score_func)
        n[stack.I_ROPE] = self._rope_index(plan.rope)
        n[stack.I_COMP_ROPE] = self._rope_index(comp.rope) if comp is not None else -1
        n[stack.I_IDX_ROPE] = self._rope_index(indexer.compressor.rope) if indexer is not None else -1
        n[stack.I_COPIES] = len(plan.copy_offsets)
        n[stack.I_COPY_OFFSETS:stack.I_COPY_OFFSETS + len(plan.copy_offsets)] = plan.copy_offsets
        self.ints += n

        f = [0.0] * stack.FLOATS
        f[stack.F_ATTN_NORM_EPS], f[stack.F_FFN_NORM_EPS] = attn_eps, ffn_eps
        f[stack.F_Q_EPS], f[stack.F_HEAD_EPS], f[stack.F_KV_EPS] = q_eps, head_eps, kv_eps
        f[stack.F_SCALE] = plan.scale
        if comp is not None:
            f[stack.F_COMP_EPS] = comp.norm.eps
        if indexer is not None:
            f[stack.F_IDX_EPS] = indexer.compressor.norm.eps
            f[stack.F_IDX_QSCALE], f[stack.F_IDX_WSCALE] = indexer.head_dim**-0.5, indexer.n_heads**-0.5
        f[stack.F_MOE_SCALE], f[stack.F_MOE_LIMIT] = moe_plan.scale, moe_plan.limit
        self.floats += f

    def refresh(self) -> None:
        """Follow in-place changes of the weights behind the derived matrices: one pass over the addresses and
        versions of all of them; when any moved, each layer's own check (``FusedLinears.weight``,
        ``DeepseekV4MoE._stacked``) stacks again what changed."""
        w = self.weights
        for i, (_, moe_plan) in enumerate(self.moe):
            if moe_plan.hashed:  # a buffer: ``Module.to`` may replace it without a registration, so read it anew
                w[i * stack.WEIGHTS + stack.W_TID2EID] = moe_plan.gate.tid2eid
        key = [(t.data_ptr(), t._version) for t in self._sources]
        if key == self._key:
            return
        for i, (plan, (moe, moe_plan)) in enumerate(zip(self.plans, self.moe)):
            base = i * stack.WEIGHTS
            w[base + stack.W_FUSED] = plan.fused.weight()
            w[base + stack.W_MOE_UP], w[base + stack.W_MOE_DOWN] = moe._stacked(moe_plan)
        self._key = key

    def _rope_index(self, module) -> int:
        for i, known in enumerate(self.ropes):
            if known is module:
                return i
        self.ropes.append(module)
        return len(self.ropes) - 1

    def pools(self, pool) -> list[torch.Tensor | None]:
        """The op's ``pools`` list for the paged pool ``pool`` (kept while the pool stays the same object)."""
        if self._pools is None or self._pools[0] is not pool:
            found: list[torch.Tensor | None] = []
            for plan in self.plans:
                lp = pool.layers[plan.layer_idx]
                found += [lp.kv, lp.comp_kv, lp.comp_gate, lp.entries, lp.idx_kv, lp.idx_gate, lp.idx_entries]
            self._pools = (pool, found)
        return self._pools[1]

    def call_arguments(self, positions: torch.Tensor, ctx) -> tuple | None:
        """``ops.decode_stack``'s arguments after ``input_ids`` for a decode step (every sequence adds one token),
        up to ``pools``; ``None`` when the op cannot take the step: pools other than float32 (the closing windows
        then take the PyTorch composition) or positions past the whole-position rotary tables."""
        pool = ctx.kv
        if pool.layers[self.plans[0].layer_idx].kv.dtype != torch.float32:
            return None
        top = max(ctx.context_lens)  # the largest position + 1
        if top > batched_attention.MAX_TABLE_POSITIONS:
            return None
        dev = positions.device
        tables = [position_tables(module, torch.float32, top, dev) for module in self.ropes]
        prompt_lens = getattr(ctx, "prompt_lens", None)
        prompt = None if prompt_lens is None else long_tensor(prompt_lens, dev)
        self.refresh()
        return (positions, ctx.slot_mapping, padded_rows(ctx.block_tables, dev), prompt, ctx.block_size,
                self.window, tables, self.weights, self.ints, self.floats, self.pools(pool))
