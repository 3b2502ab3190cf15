"""Mixture-of-experts feed-forward of DeepSeek V4.

Router scores are ``sqrtsoftplus`` (or softmax / sigmoid) of ``gate.weight @ x``.
Learned layers pick the top-k experts of ``scores + gate.bias`` (the bias only
steers the choice); hash layers take the experts from the frozen table
``gate.tid2eid[token_id]``.  The chosen scores are renormalised to sum to one
and multiplied by ``routed_scaling_factor``.  Experts and the always-on shared
expert are SwiGLU MLPs whose gate is clamped from above and whose up
projection is clamped symmetrically at ``swiglu_limit``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from deepseek_engine.config import DeepseekV4ModelConfig
from deepseek_engine.native import moe_experts


def clamped_swiglu(gate: torch.Tensor, up: torch.Tensor, limit: float) -> torch.Tensor:
    """``silu(min(gate, limit)) * clamp(up, -limit, limit)``."""
    return F.silu(gate.clamp(max=limit)) * up.clamp(min=-limit, max=limit)


class SharedExpert(nn.Module):
    """Dense SwiGLU MLP (``w1`` gate, ``w3`` up, ``w2`` down)."""

    def __init__(self, hidden: int, inter: int, limit: float) -> None:
        super().__init__()
        self.w1 = nn.Linear(hidden, inter, bias=False)
        self.w2 = nn.Linear(inter, hidden, bias=False)
        self.w3 = nn.Linear(hidden, inter, bias=False)
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(clamped_swiglu(self.w1(x), self.w3(x), self.limit))


class RoutedExperts(nn.Module):
    """All routed experts of a layer stacked as ``w1/w3: [E, I, H]`` and ``w2: [E, H, I]``."""

    def __init__(self, n: int, hidden: int, inter: int, limit: float) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.zeros(n, inter, hidden))
        self.w2 = nn.Parameter(torch.zeros(n, hidden, inter))
        self.w3 = nn.Parameter(torch.zeros(n, inter, hidden))
        self.limit = limit

    def forward(self, x: torch.Tensor, experts: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for e in torch.unique(experts).tolist():
            tok, slot = torch.where(experts == e)
            h = x[tok]
            y = F.linear(clamped_swiglu(F.linear(h, self.w1[e]), F.linear(h, self.w3[e]), self.limit), self.w2[e])
            out.index_add_(0, tok, (y * weights[tok, slot, None]).to(out.dtype))
        return out


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
        return self.route(F.linear(x, self.weight), input_ids)

    def route(self, logits: torch.Tensor, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Experts and weights from the router logits ``x @ weight.T``."""
        if self.score_func == "sqrtsoftplus":
            scores = F.softplus(logits).sqrt()
        elif self.score_func == "softmax":
            scores = logits.softmax(dim=-1)
        else:
            scores = torch.sigmoid(logits)
        if self.hash_routed:
            experts = self.tid2eid[input_ids].long()
        else:
            experts = torch.topk(scores + self.bias.to(scores.dtype), self.top_k, dim=-1, sorted=False).indices
        w = scores.gather(1, experts)
        w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
        return experts, w * self.scale


class DeepseekV4MoE(nn.Module):
    """Routed experts plus one shared expert."""

    def __init__(self, config: DeepseekV4ModelConfig, layer_idx: int) -> None:
        super().__init__()
        c = config
        self.gate = Router(c, c.mlp_layer_types[layer_idx] == "hash_moe")
        self.experts = RoutedExperts(c.n_routed_experts, c.hidden_size, c.moe_intermediate_size, c.swiglu_limit)
        self.shared_experts = SharedExpert(c.hidden_size, c.moe_intermediate_size, c.swiglu_limit)

    def forward(self, x: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        if self.experts.w1.shape[0] <= 2 * self.gate.top_k and x.shape[0]:
            return self._all_experts(x, input_ids)
        experts, weights = self.gate(x, input_ids)
        return self.experts(x, experts, weights) + self.shared_experts(x)

    def _stacked(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Router, gate and up weights of all experts (routed, then shared) as one matrix; down weights stacked."""
        mods = self._modules
        gate, experts, shared = mods["gate"]._parameters, mods["experts"]._parameters, mods["shared_experts"]._modules
        params = (gate["weight"], experts["w1"], experts["w3"], experts["w2"], shared["w1"]._parameters["weight"],
                  shared["w3"]._parameters["weight"], shared["w2"]._parameters["weight"])
        key = tuple((p.data_ptr(), p._version) for p in params)
        cached = self.__dict__.get("_stack")
        if cached is None or cached[0] != key:
            router, w1, w3, w2, s1, s3, s2 = (p.detach() for p in params)
            with torch.no_grad():
                up = torch.cat([router, w1.flatten(0, 1), s1, w3.flatten(0, 1), s3], dim=0)
                down = torch.cat([w2, s2[None]], dim=0).transpose(1, 2).contiguous()  # [E + 1, I, H]
            cached = (key, up, down)
            self.__dict__["_stack"] = cached
        return cached[1], cached[2]

    def _all_experts(self, x: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        """Few experts: every expert (and the shared one) on every token, in three products.

        Same result as routing (each token sums its chosen experts in increasing
        expert order, then adds the shared expert) for at most twice the expert work.
        """
        up_w, down_w = self._stacked()
        n, inter = self.experts.w1.shape[:2]
        y = F.linear(x, up_w)
        gate = self.gate
        native = moe_experts(y, n, inter, gate.top_k, gate.score_func,
                             gate.tid2eid if gate.hash_routed else None, input_ids,
                             None if gate.hash_routed else gate.bias, gate.scale, self.experts.limit, down_w)
        if native is not None:
            return native.to(x.dtype)
        experts, weights = self.gate.route(y[:, :n], input_ids)
        gate_up = y[:, n:].view(x.shape[0], 2, n + 1, inter)
        act = clamped_swiglu(gate_up[:, 0], gate_up[:, 1], self.experts.limit)  # [T, E + 1, I]
        out_all = torch.bmm(act.transpose(0, 1), down_w)  # [E + 1, T, H]
        order = experts.argsort(dim=-1)
        experts, weights = experts.gather(-1, order), weights.gather(-1, order)
        t = x.shape[0]
        picked = experts * t + torch.arange(t, device=x.device)[:, None]  # rows of out_all viewed [(E + 1) * T, H]
        terms = (out_all.view(-1, x.shape[1]).index_select(0, picked.flatten()).view(t, -1, x.shape[1])
                 * weights[..., None]).to(x.dtype)
        out = terms[:, 0]
        for slot in range(1, experts.shape[-1]):
            out = out + terms[:, slot]
        return out + out_all[n]
