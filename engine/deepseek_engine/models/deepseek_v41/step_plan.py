"""What the batched V4.1 step (:func:`deepseek_engine.models.deepseek_v41.serving.batched_hidden`) reads per layer,
built once from the loaded weights.

The per-sequence model reads its weights through module attributes and calls each product on its own; a batched
step of a small model spends as much time in that Python as in the kernels. :class:`V41StepPlan` holds, per layer,
plain references to the same tensors and settings, plus the products of one input fused into one ``row_linear``
(:class:`FusedProducts`). Fusing keeps every bit: ``row_linear`` gives each output the sum of its own weight row
with the input row in an order fixed by the input width, so the outputs of a concatenated weight are the outputs of
the separate calls (fused only for float32 weights and inputs, where no rounding sits between the product and its
consumer). Projections kept in their stored format (:mod:`deepseek_engine.layers.packed_linear`) fuse when they
share a format and column blocks (``stack_rows``: each output row keeps its weights and scales, so its bits).

``ServedDeepseekV41.process_weights_after_loading`` builds the plan (and builds a new one when weights change);
``batched_hidden`` called without a plan builds one for that call.
"""

from __future__ import annotations

import torch
from deepseek_kernels.weight_only import PackedWeight, stack_rows

from deepseek_engine.layers.packed_linear import group_matrices, is_packed, matrix
from deepseek_engine.layers.row_invariant import linear


def _fused_packed(weights: list) -> PackedWeight | None:
    """The packed matrices stacked along their rows, when they share a format and column blocks."""
    if len(weights) < 2 or not all(is_packed(w) for w in weights):
        return None
    first = weights[0]
    if any(w.fmt != first.fmt or w.block_cols != first.block_cols for w in weights):
        return None
    return stack_rows(list(weights))


class FusedProducts:
    """``[linear(x, w) for w in weights]``, one call over the concatenated weights when every weight and ``x`` are
    float32 (``row_linear``) or every weight is packed in one format (``wo_linear``)."""

    def __init__(self, weights: list) -> None:
        self.weights = [w if is_packed(w) else w.detach() for w in weights]
        self.sizes = [int(w.out_features if is_packed(w) else w.shape[0]) for w in self.weights]
        fusable = len(self.weights) > 1 and all(not is_packed(w) and w.dtype == torch.float32 for w in self.weights)
        self.weight = torch.cat(self.weights).contiguous() if fusable else None
        self.packed = _fused_packed(self.weights)

    def __call__(self, x: torch.Tensor) -> list[torch.Tensor]:
        if self.packed is not None:
            return list(torch.split(linear(x, self.packed), self.sizes, dim=-1))
        if self.weight is not None and x.dtype == torch.float32:
            return list(torch.split(linear(x, self.weight), self.sizes, dim=-1))
        return [linear(x, w) for w in self.weights]


class V41AttentionPlan:
    """One layer's attention (``DeepseekV41Attention``): settings, weights, and its fused products.

    ``x_products(x)`` gives ``[wq_a, wkv]`` rows, then the indexer's head weights (index sources) and the
    compressor's ``[kv | score]`` rows (KV sources, when they fuse: float32); ``latent_products(q_latent)`` gives
    the ``wq_b`` rows and, on index sources, the indexer's query rows."""

    def __init__(self, attn) -> None:
        self.module = attn
        for name in ("layer_idx", "ratio", "n_heads", "head_dim", "o_groups", "scale", "rope", "kv_source",
                     "index_source", "index_topk", "candidate_write", "candidate_read", "candidate_blocks",
                     "candidate_block_size"):
            setattr(self, name, getattr(attn, name))
        self.q_norm = (attn.q_norm.weight.detach(), attn.q_norm.eps)
        self.kv_norm = (attn.norm.weight.detach(), attn.norm.eps)
        self.attn_sink = attn.attn_sink.detach()
        self.wo_a = group_matrices(attn.wo_a)
        wo_b = matrix(attn.wo_b)
        self.wo_b = wo_b if is_packed(wo_b) else wo_b.detach()
        self.compressor = attn.compressor
        self.indexer = attn.indexer
        parts = [matrix(attn.wq_a), matrix(attn.wkv)]
        self.weights_index = self.scores_index = None
        if self.indexer is not None:
            self.weights_index = len(parts)
            parts.append(matrix(self.indexer.weights_proj))
            idx = self.indexer
            self.index_heads, self.index_dim = idx.n_heads, idx.head_dim
            self.index_wscale = idx.head_dim**-0.5 * idx.n_heads**-0.5
        comp = self.compressor
        if comp is not None:
            comp_w = [matrix(comp.wkv)] + ([] if comp.wgate is None else [matrix(comp.wgate)])
            everything = parts + comp_w
            if all(not is_packed(w) and w.dtype == torch.float32 for w in everything):  # compressor_scores: float32
                self.scores_index = len(parts)
                parts.append(torch.cat([w.detach() for w in comp_w]))
        self.x_products = FusedProducts(parts)
        self.latent_products = FusedProducts([matrix(attn.wq_b)]
                                             + ([] if self.indexer is None else [matrix(self.indexer.wq_b)]))

    def compressor_rows(self, x: torch.Tensor, outs: list[torch.Tensor]) -> torch.Tensor:
        """The compressor's float32 ``[kv | score]`` rows of ``x`` (``compressor_scores``)."""
        if self.scores_index is not None and x.dtype == torch.float32:
            return outs[self.scores_index]
        return self.compressor.scores(x)


class V41LayerPlan:
    """One decoder layer: its engram and MoE (bound methods), the two norms, the two hyper-connection sites."""

    def __init__(self, layer) -> None:
        c = layer.config
        self.engram = layer.engram
        self.engram_forward = None if layer.engram is None else layer.engram.forward
        self.ffn_forward = layer.ffn.forward
        self.attn = V41AttentionPlan(layer.attn)
        self.attn_norm = (layer.attn_norm.weight.detach(), layer.attn_norm.eps)
        self.ffn_norm = (layer.ffn_norm.weight.detach(), layer.ffn_norm.eps)
        self.hc = {site: (getattr(layer, f"hc_{site}_fn").detach(), getattr(layer, f"hc_{site}_scale").detach(),
                          getattr(layer, f"hc_{site}_base").detach()) for site in ("attn", "ffn")}
        self.hc_settings = (c.rms_norm_eps, c.hc_eps, c.hc_sinkhorn_iters)


class V41StepPlan:
    """Every layer's :class:`V41LayerPlan`, in order."""

    def __init__(self, model) -> None:
        self.layers = [V41LayerPlan(layer) for layer in model.layers]
