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
from deepseek_kernels.decode_stack.layout import (
    FLOATS,
    INTS,
    MAX_COPIES,
    SCORE_FUNCS,
    WEIGHTS,
    Float,
    Int,
    Weight,
)

from deepseek_engine.core.int_tensors import long_tensor, padded_rows
from deepseek_engine.models.deepseek_v4 import batched_attention
from deepseek_engine.models.deepseek_v4.batched_attention import AttentionPlan, PositionTables


class DecodeStackPlan:
    """``ops.decode_stack``'s arguments for one model, built from the per-layer plans once the weights are
    prepared (``BatchedDeepseekV4.process_weights_after_loading``, which builds a new plan when told that weights
    changed).

    ``weights`` holds parameter objects and the derived stacked matrices of the fused input product and of the
    experts (``FusedLinears.weight``, ``PreparedMoE.up`` / ``down``), the same tensors the Python path reads.
    """

    def __init__(self, layers: list, sites: list, attention_plans: list[AttentionPlan], window: int,
                 position_tables: PositionTables | None = None) -> None:
        self.window = window  # the sliding window (config.sliding_window)
        self.position_tables = position_tables if position_tables is not None else PositionTables()
        self.plans = attention_plans
        #: The rotary modules whose position tables the op reads (``ints``' I_ROPE etc. index this list).
        self.ropes: list = []
        self.weights: list[torch.Tensor | None] = []
        self.ints: list[int] = []
        self.floats: list[float] = []
        for layer, layer_sites, plan in zip(layers, sites, attention_plans):
            self._add_layer(layer, layer_sites, plan)
        self._pools: tuple | None = None  # (the pool object, its per-layer tensors as the op takes them)

    @classmethod
    def build(cls, layers: list, sites: list, attention_plans: list[AttentionPlan], window: int,
              position_tables: PositionTables | None = None) -> DecodeStackPlan | None:
        """The plan, or ``None`` when some layer needs a path ``decode_stack`` does not take."""
        for layer, plan in zip(layers, attention_plans):
            moe_plan = layer.ffn.prepared
            if moe_plan is None or not moe_plan.dense or moe_plan.score_func not in SCORE_FUNCS:
                return None
            if plan.indexer is not None and not plan.shared_rope:
                return None
            if plan.packed:  # projections kept in their stored format: the op takes float32 matrices
                return None
            if len(plan.copy_offsets) > MAX_COPIES:
                return None
            if any(p.dtype != torch.float32 for p in layer.parameters()):
                return None
        return cls(layers, sites, attention_plans, window, position_tables)

    def _add_layer(self, layer, layer_sites, plan: AttentionPlan) -> None:
        (attn_fn, attn_base, attn_scale, attn_norm, attn_eps), (ffn_fn, ffn_base, ffn_scale, ffn_norm, ffn_eps) = \
            layer_sites
        comp, indexer = plan.comp, plan.indexer
        moe_plan = layer.ffn.prepared
        w: list[torch.Tensor | None] = [None] * WEIGHTS
        w[Weight.HC_ATTN_FN], w[Weight.HC_ATTN_BASE], w[Weight.HC_ATTN_SCALE] = attn_fn, attn_base, attn_scale
        w[Weight.ATTN_NORM] = attn_norm
        w[Weight.HC_FFN_FN], w[Weight.HC_FFN_BASE], w[Weight.HC_FFN_SCALE] = ffn_fn, ffn_base, ffn_scale
        w[Weight.FFN_NORM] = ffn_norm
        q_norm_w, q_eps, wq_b, n_heads, head_dim, head_eps, kv_norm_w, kv_eps = plan.front
        w[Weight.FUSED] = plan.fused.weight
        w[Weight.Q_NORM], w[Weight.WQ_B], w[Weight.KV_NORM] = q_norm_w, wq_b, kv_norm_w
        w[Weight.IDX_WQ_B] = plan.front_indexer[0]
        if comp is not None:
            w[Weight.COMP_APE], w[Weight.COMP_NORM] = comp.ape, comp.norm.weight
        if indexer is not None:
            w[Weight.IDX_APE], w[Weight.IDX_NORM] = indexer.compressor.ape, indexer.compressor.norm.weight
        w[Weight.SINK] = plan.sink
        w[Weight.WO_A], _, w[Weight.WO_B] = plan.back
        w[Weight.MOE_UP], w[Weight.MOE_DOWN] = moe_plan.up, moe_plan.down
        w[Weight.TID2EID] = moe_plan.tid2eid
        w[Weight.MOE_BIAS] = moe_plan.bias
        self.weights += w

        n = [0] * INTS
        n[Int.HEADS], n[Int.HEAD_DIM] = n_heads, head_dim
        _, n[Int.IDX_HEADS], n[Int.IDX_DIM] = plan.front_indexer
        n[Int.GROUPS] = plan.back[1]
        n[Int.RATE] = plan.comp_rate
        n[Int.HAS_INDEXER] = int(indexer is not None)
        if indexer is not None:
            n[Int.HW_START], n[Int.HW_END] = plan.head_weights
            n[Int.TOPK] = indexer.topk
            n[Int.IDX_OVERLAP] = int(indexer.compressor.overlap)
        if comp is not None:
            n[Int.COMP_OVERLAP] = int(comp.overlap)
        n[Int.MOE_EXPERTS], n[Int.MOE_INTER], n[Int.MOE_TOPK] = moe_plan.n, moe_plan.inter, moe_plan.top_k
        n[Int.SCORE_FUNC] = SCORE_FUNCS.index(moe_plan.score_func)
        n[Int.ROPE] = self._rope_index(plan.rope)
        n[Int.COMP_ROPE] = self._rope_index(comp.rope) if comp is not None else -1
        n[Int.IDX_ROPE] = self._rope_index(indexer.compressor.rope) if indexer is not None else -1
        n[Int.COPIES] = len(plan.copy_offsets)
        n[Int.COPY_OFFSETS:Int.COPY_OFFSETS + len(plan.copy_offsets)] = plan.copy_offsets
        self.ints += n

        f = [0.0] * FLOATS
        f[Float.ATTN_NORM_EPS], f[Float.FFN_NORM_EPS] = attn_eps, ffn_eps
        f[Float.Q_EPS], f[Float.HEAD_EPS], f[Float.KV_EPS] = q_eps, head_eps, kv_eps
        f[Float.SCALE] = plan.scale
        if comp is not None:
            f[Float.COMP_EPS] = comp.norm.eps
        if indexer is not None:
            f[Float.IDX_EPS] = indexer.compressor.norm.eps
            f[Float.IDX_QSCALE], f[Float.IDX_WSCALE] = indexer.head_dim**-0.5, indexer.n_heads**-0.5
        f[Float.MOE_SCALE], f[Float.MOE_LIMIT] = moe_plan.scale, moe_plan.limit
        self.floats += f

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
        tables = [self.position_tables.get(module, torch.float32, top, dev) for module in self.ropes]
        prompt_lens = getattr(ctx, "prompt_lens", None)
        prompt = None if prompt_lens is None else long_tensor(prompt_lens, dev)
        return (positions, ctx.slot_mapping, padded_rows(ctx.block_tables, dev), prompt, ctx.block_size,
                self.window, tables, self.weights, self.ints, self.floats, self.pools(pool))
