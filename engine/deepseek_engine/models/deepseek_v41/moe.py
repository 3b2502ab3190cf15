"""DeepSeek V4.1 mixture of experts: no hash routing, and ``gate.bias_vl`` for image tokens.

Routing is V4's learned routing (:mod:`deepseek_engine.layers.moe`) on every
layer. Checkpoints with a vision tower (``vision_n_layers > 0``) also carry
``gate.bias_vl``: tokens whose id lies in ``[IMAGE_SENTINEL_BASE_ID,
IMAGE_SENTINEL_BASE_ID + IMAGE_SENTINEL_COUNT)`` choose their experts with
``scores + bias_vl`` instead of ``scores + bias``; the expert weights are the
same renormalised scores either way.

Experts stored quantised (FP8, MXFP4, int8) stay in that format
(:class:`~deepseek_engine.layers.moe.PackedRoutedExperts` /
:class:`~deepseek_engine.layers.moe.PackedSharedExpert`, filled by the loader): the routed experts run as one
``wo_experts`` call over the experts the step's tokens pick, the shared expert through ``wo_linear``. Both
kernels compute each output from its own token row in an order fixed by the widths (never by how many rows
share the call), so packed layers keep the row independence the float path gets from ``row_linear``.
"""

from __future__ import annotations

import deepseek_kernels as ops
import torch
from torch import nn

from deepseek_engine.layers.moe import DeepseekV4MoE
from deepseek_engine.layers.row_invariant import linear
from deepseek_engine.models.deepseek_v41.config import (
    IMAGE_SENTINEL_BASE_ID,
    IMAGE_SENTINEL_COUNT,
    DeepseekV41ModelConfig,
)


def image_sentinel_rows(input_ids: torch.Tensor) -> torch.Tensor:
    """Tokens the router treats as image positions."""
    return (input_ids >= IMAGE_SENTINEL_BASE_ID) & (input_ids < IMAGE_SENTINEL_BASE_ID + IMAGE_SENTINEL_COUNT)


def route_with_bias_vl(scores: torch.Tensor, bias: torch.Tensor, bias_vl: torch.Tensor, image: torch.Tensor,
                       top_k: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Experts ``[T, k]`` and weights: top-k of ``scores + (bias_vl if image else bias)``, renormalised, scaled."""
    row_bias = torch.where(image[:, None], bias_vl.to(scores.dtype)[None, :], bias.to(scores.dtype)[None, :])
    experts = torch.topk(scores + row_bias, top_k, dim=-1, sorted=False).indices
    w = scores.gather(1, experts)
    w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
    return experts, w * scale


class DeepseekV41MoE(DeepseekV4MoE):
    """V4 MoE with learned routing on every layer, plus ``gate.bias_vl`` when the model has vision layers."""

    def __init__(self, config: DeepseekV41ModelConfig, layer_idx: int, n_experts: int | None = None,
                 top_k: int | None = None) -> None:
        c = config
        if n_experts or top_k:
            c = c.model_copy(update={"n_routed_experts": n_experts or c.n_routed_experts,
                                     "num_experts_per_tok": top_k or c.num_experts_per_tok})
        c = c.model_copy(update={"mlp_layer_types": ["moe"] * c.num_hidden_layers})
        super().__init__(c, min(layer_idx, c.num_hidden_layers - 1))
        if config.vision_n_layers > 0:
            self.gate.bias_vl = nn.Parameter(torch.zeros(c.n_routed_experts))

    def forward(self, x: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        """Every token row on its own: products through ``row_linear``, routing and (few experts) the whole
        expert computation through the kernel ops, so a row's bits never depend on the other rows (BLAS over
        each expert's group of tokens would: the group's size picks the blocking)."""
        if x.shape[0] == 0:
            return torch.zeros_like(x)
        bias_vl = getattr(self.gate, "bias_vl", None)
        image = image_sentinel_rows(input_ids) if bias_vl is not None else None
        if image is not None and not bool(image.any()):
            image = None
        plan = self.prepared
        if plan is None:
            raise RuntimeError("DeepseekV41MoE: weights not prepared; call process_weights_after_loading() after "
                               "loading them (load_model and LLM do)")
        if plan.dense:
            up_w, down_w = plan.up, plan.down
            y = linear(x, up_w)

            def experts_with(bias: torch.Tensor) -> torch.Tensor:
                return ops.moe_dense_experts(y, plan.n, plan.inter, plan.top_k, plan.score_func, None, None, bias,
                                             plan.scale, plan.limit, down_w)

            out = experts_with(plan.bias)
            if image is not None:
                out = torch.where(image[:, None], experts_with(bias_vl), out)
            return out.to(x.dtype)
        gate = self.gate
        logits = linear(x, gate.weight)
        experts, weights = ops.route(logits, gate.top_k, gate.score_func, None, None, gate.bias, gate.scale)
        if image is not None:
            vl_experts, vl_weights = ops.route(logits, gate.top_k, gate.score_func, None, None, bias_vl, gate.scale)
            experts = torch.where(image[:, None], vl_experts, experts)
            weights = torch.where(image[:, None], vl_weights, weights)
        return self.experts(x, experts, weights) + self.shared_experts(x)  # each row on its own (layers.moe)
