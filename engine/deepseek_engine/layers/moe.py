"""Mixture-of-experts feed-forward of DeepSeek V4.

Router scores are ``sqrtsoftplus`` (or softmax / sigmoid) of ``gate.weight @ x``.
Learned layers pick the top-k experts of ``scores + gate.bias`` (the bias only
steers the choice); hash layers take the experts from the frozen table
``gate.tid2eid[token_id]``.  The chosen scores are renormalised to sum to one
and multiplied by ``routed_scaling_factor``.  Experts and the always-on shared
expert are SwiGLU MLPs whose gate is clamped from above and whose up
projection is clamped symmetrically at ``swiglu_limit``.

Routed and shared experts stored quantised (FP8, MXFP4, int8) stay packed in that format
(:class:`PackedRoutedExperts`, :class:`PackedSharedExpert`, filled by the loader) and run through
``deepseek_kernels.wo_experts`` / ``wo_linear``, which read only the experts a step's tokens pick.

Few float experts (at most twice ``top_k``) run as one dense product over all of them; its stacked weights are
derived tensors, built by :meth:`DeepseekV4MoE.process_weights_after_loading` once the weights are loaded
(and again only when told that they changed, e.g. ``LLM.reload_weights``).

Every token row is computed on its own (:mod:`deepseek_engine.layers.row_invariant`): the products are
``row_linear`` (BLAS over an expert's group of tokens would pick its blocking from the group's size) and the
SiLU is :func:`~deepseek_engine.layers.row_invariant.lanewise`, so a row's bits never depend on the other rows
of the step, nor on which tokens share its experts.
"""

from __future__ import annotations

import deepseek_kernels as ops
import torch
import torch.nn.functional as F
from torch import nn

from deepseek_engine.layers.row_invariant import lanewise, linear
from deepseek_engine.models.deepseek_v4.config import DeepseekV4ModelConfig


def clamped_swiglu(gate: torch.Tensor, up: torch.Tensor, limit: float) -> torch.Tensor:
    """``silu(min(gate, limit)) * clamp(up, -limit, limit)``."""
    return F.silu(gate.clamp(max=limit)) * up.clamp(min=-limit, max=limit)


def row_swiglu(gate: torch.Tensor, up: torch.Tensor, limit: float) -> torch.Tensor:
    """``clamped_swiglu`` with a SiLU whose bits do not depend on an element's offset (``row_invariant``)."""
    return lanewise(F.silu, gate.clamp(max=limit)) * up.clamp(min=-limit, max=limit)


class SharedExpert(nn.Module):
    """Dense SwiGLU MLP (``w1`` gate, ``w3`` up, ``w2`` down)."""

    def __init__(self, hidden: int, inter: int, limit: float) -> None:
        super().__init__()
        self.w1 = nn.Linear(hidden, inter, bias=False)
        self.w2 = nn.Linear(inter, hidden, bias=False)
        self.w3 = nn.Linear(hidden, inter, bias=False)
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Every row on its own (``row_linear``, :func:`row_swiglu`)."""
        return linear(row_swiglu(linear(x, self.w1.weight), linear(x, self.w3.weight), self.limit), self.w2.weight)


class RoutedExperts(nn.Module):
    """All routed experts of a layer stacked as ``w1/w3: [E, I, H]`` and ``w2: [E, H, I]``."""

    def __init__(self, n: int, hidden: int, inter: int, limit: float) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.zeros(n, inter, hidden))
        self.w2 = nn.Parameter(torch.zeros(n, hidden, inter))
        self.w3 = nn.Parameter(torch.zeros(n, inter, hidden))
        self.limit = limit

    def forward(self, x: torch.Tensor, experts: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Each token's chosen experts added in increasing expert order; every product row by row."""
        out = torch.zeros_like(x)
        for e in torch.unique(experts).tolist():
            tok, slot = torch.where(experts == e)
            h = x[tok]
            y = linear(row_swiglu(linear(h, self.w1[e]), linear(h, self.w3[e]), self.limit), self.w2[e])
            out.index_add_(0, tok, (y * weights[tok, slot, None]).to(out.dtype))
        return out


class PackedRoutedExperts(nn.Module):
    """The routed experts of a layer kept in the checkpoint's format (FP8, MXFP4, int8 or bf16;
    ``deepseek_kernels.weight_only``): ``w13`` stacks each expert's gate then up projection ``[E, 2 I, H]``, ``w2``
    the down projections ``[E, H, I]``. The loader fills them (:meth:`set_weights`); a step reads only the experts
    its tokens pick, in one ``ops.wo_experts`` call, and never dequantises the stack."""

    def __init__(self, n: int, hidden: int, inter: int, limit: float) -> None:
        super().__init__()
        self.n, self.hidden, self.inter, self.limit = n, hidden, inter, limit
        self.w13: ops.weight_only.PackedWeight | None = None
        self.w2: ops.weight_only.PackedWeight | None = None

    def set_weights(self, w13, w2) -> None:
        if tuple(w13.weight.shape[:2]) != (self.n, 2 * self.inter) or w13.in_features != self.hidden:
            raise ValueError(f"packed gate/up experts of shape {tuple(w13.weight.shape)} do not fit "
                             f"{self.n} x {2 * self.inter} x {self.hidden}")
        if tuple(w2.weight.shape[:2]) != (self.n, self.hidden) or w2.in_features != self.inter:
            raise ValueError(f"packed down experts of shape {tuple(w2.weight.shape)} do not fit "
                             f"{self.n} x {self.hidden} x {self.inter}")
        if w13.fmt != w2.fmt:
            raise ValueError("the gate/up and down experts must share one format")
        self.w13, self.w2 = w13, w2

    def forward(self, x: torch.Tensor, experts: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return ops.weight_only.packed_experts(x, experts, weights, self.w13, self.w2, self.limit).to(x.dtype)


class PackedSharedExpert(nn.Module):
    """:class:`SharedExpert` with its three projections kept in the checkpoint's format (``ops.wo_linear``)."""

    def __init__(self, limit: float) -> None:
        super().__init__()
        self.limit = limit
        self.w1 = self.w2 = self.w3 = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = ops.packed_linear(x, self.w1), ops.packed_linear(x, self.w3)
        return ops.packed_linear(row_swiglu(gate, up, self.limit), self.w2)


class Router(nn.Module):
    """Expert choice and weights; ``hash_routed`` layers read ``tid2eid`` instead of ranking."""

    def __init__(self, config: DeepseekV4ModelConfig, hash_routed: bool) -> None:
        super().__init__()
        self.hash_routed = hash_routed
        self.top_k = config.num_experts_per_tok
        self.score_func = config.scoring_func
        self.scale = config.routed_scaling_factor
        self.weight = nn.Parameter(torch.zeros(config.n_routed_experts, config.hidden_size))
        if hash_routed:
            self.register_buffer("tid2eid", torch.zeros(config.vocab_size, self.top_k, dtype=torch.long))
        else:
            self.bias = nn.Parameter(torch.zeros(config.n_routed_experts))

    def forward(self, x: torch.Tensor, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.route(linear(x, self.weight), input_ids)

    def route(self, logits: torch.Tensor, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Experts and weights from the router logits ``x @ weight.T``."""
        if self.hash_routed:
            return ops.route(logits, self.top_k, self.score_func, tid2eid=self.tid2eid, input_ids=input_ids,
                             scale=self.scale)
        return ops.route(logits, self.top_k, self.score_func, bias=self.bias, scale=self.scale)


class DeepseekV4MoE(nn.Module):
    """Routed experts plus one shared expert."""

    def __init__(self, config: DeepseekV4ModelConfig, layer_idx: int) -> None:
        super().__init__()
        c = config
        self.gate = Router(c, c.mlp_layer_types[layer_idx] == "hash_moe")
        self.experts = RoutedExperts(c.n_routed_experts, c.hidden_size, c.moe_intermediate_size, c.swiglu_limit)
        self.shared_experts = SharedExpert(c.hidden_size, c.moe_intermediate_size, c.swiglu_limit)
        #: What ``forward`` reads, built from the loaded weights by ``process_weights_after_loading``.
        self.prepared: PreparedMoE | None = None

    def process_weights_after_loading(self) -> None:
        """Build the derived tensors (the stacked expert matrices) and settings from the current weights. The
        loader calls it once after loading; call it again (``LLM.reload_weights``) after changing weights."""
        self.prepared = PreparedMoE(self)

    def forward(self, x: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        plan = self.prepared
        if plan is None:
            raise RuntimeError("DeepseekV4MoE: weights not prepared; call process_weights_after_loading() after "
                               "loading them (load_model and LLM do)")
        if plan.dense and x.shape[0]:
            return self._all_experts(x, input_ids, plan)
        experts, weights = self.gate(x, input_ids)
        return self.experts(x, experts, weights) + self.shared_experts(x)

    def _all_experts(self, x: torch.Tensor, input_ids: torch.Tensor, p: PreparedMoE) -> torch.Tensor:
        """Few experts: every expert (and the shared one) on every token, in three products.

        Same result as routing (each token sums its chosen experts in increasing
        expert order, then adds the shared expert) for at most twice the expert work.
        """
        y = linear(x, p.up)
        return ops.moe_dense_experts(y, p.n, p.inter, p.top_k, p.score_func, p.tid2eid,
                                     input_ids if p.hashed else None, p.bias, p.scale, p.limit, p.down).to(x.dtype)


class PreparedMoE:
    """What ``DeepseekV4MoE.forward`` reads, taken from the module once after loading: the routing settings, the
    router's bias and hash table, and for the dense few-expert product (``dense``) the stacked matrices ``up``
    (router, then gate and up weights of all experts, routed then shared) and ``down`` (``[E + 1, I, H]``)."""

    def __init__(self, moe: DeepseekV4MoE) -> None:
        gate, experts, shared = moe.gate, moe.experts, moe.shared_experts
        packed = isinstance(experts, PackedRoutedExperts) or isinstance(shared, PackedSharedExpert)
        self.n, self.inter = (experts.n, experts.inter) if isinstance(experts, PackedRoutedExperts) else \
            experts.w1.shape[:2]
        # the dense product stacks float weights: layers with packed weights route (and read only what they pick)
        self.dense = self.n <= 2 * gate.top_k and not packed
        self.top_k, self.score_func, self.scale, self.limit = gate.top_k, gate.score_func, gate.scale, experts.limit
        self.hashed = gate.hash_routed
        self.tid2eid = gate.tid2eid if gate.hash_routed else None
        self.bias = None if gate.hash_routed else gate.bias
        self.up: torch.Tensor | None = None
        self.down: torch.Tensor | None = None
        if self.dense:
            with torch.no_grad():
                router, w1, w3, w2 = gate.weight.detach(), experts.w1.detach(), experts.w3.detach(), experts.w2.detach()
                s1, s3, s2 = shared.w1.weight.detach(), shared.w3.weight.detach(), shared.w2.weight.detach()
                self.up = torch.cat([router, w1.flatten(0, 1), s1, w3.flatten(0, 1), s3], dim=0)
                self.down = torch.cat([w2, s2[None]], dim=0).transpose(1, 2).contiguous()  # [E + 1, I, H]
