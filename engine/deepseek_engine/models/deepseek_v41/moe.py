"""DeepSeek V4.1 mixture of experts: no hash routing, and ``gate.bias_vl`` for image tokens.

Routing is V4's learned routing (:mod:`deepseek_engine.layers.moe`) on every
layer. Checkpoints with a vision tower (``vision_n_layers > 0``) also carry
``gate.bias_vl``: tokens whose id lies in ``[IMAGE_SENTINEL_BASE_ID,
IMAGE_SENTINEL_BASE_ID + IMAGE_SENTINEL_COUNT)`` choose their experts with
``scores + bias_vl`` instead of ``scores + bias``; the expert weights are the
same renormalised scores either way.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from deepseek_engine.layers.moe import DeepseekV4MoE
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
        bias_vl = getattr(self.gate, "bias_vl", None)
        if bias_vl is None:
            return super().forward(x, input_ids)
        # One path for every row, image or not, so a row's result never depends on its neighbours.
        image = image_sentinel_rows(input_ids)
        gate = self.gate
        logits = F.linear(x, gate.weight)
        if gate.score_func == "sqrtsoftplus":
            scores = F.softplus(logits).sqrt()
        elif gate.score_func == "softmax":
            scores = logits.softmax(dim=-1)
        else:
            scores = torch.sigmoid(logits)
        experts, weights = route_with_bias_vl(scores, gate.bias, bias_vl, image, gate.top_k, gate.scale)
        return self.experts(x, experts, weights) + self.shared_experts(x)
