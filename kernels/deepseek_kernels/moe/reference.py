"""PyTorch definitions of MoE routing and the dense few-expert path.

Scores are ``sqrtsoftplus`` (``sqrt(softplus(logit))``), ``softmax`` or ``sigmoid`` of the router logits.
Learned layers pick the ``top_k`` largest ``score + bias`` (the bias steers the choice only); hash layers read
the experts from ``tid2eid[token_id]``. The chosen scores are renormalised (``/ (sum + 1e-20)``) and scaled.
Experts are SwiGLU MLPs with ``silu(min(gate, limit)) * clamp(up, -limit, limit)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def scores_reference(logits: torch.Tensor, score_func: str) -> torch.Tensor:
    if score_func == "sqrtsoftplus":
        return F.softplus(logits).sqrt()
    if score_func == "softmax":
        return logits.softmax(dim=-1)
    if score_func == "sigmoid":
        return torch.sigmoid(logits)
    raise ValueError(f"unknown score function {score_func!r}")


def route_reference(logits, top_k: int, score_func: str, tid2eid=None, input_ids=None, bias=None,
                    scale: float = 1.0):
    """``(experts [T, k], weights [T, k])`` from the router logits ``[T, E]``."""
    scores = scores_reference(logits, score_func)
    if tid2eid is not None:
        experts = tid2eid[input_ids].long()
    else:
        pick = scores if bias is None else scores + bias.to(scores.dtype)
        experts = torch.topk(pick, top_k, dim=-1, sorted=False).indices
    w = scores.gather(1, experts)
    w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
    return experts, w * scale


def clamped_swiglu(gate: torch.Tensor, up: torch.Tensor, limit: float) -> torch.Tensor:
    return F.silu(gate.clamp(max=limit)) * up.clamp(min=-limit, max=limit)


def moe_dense_experts_reference(y, n_experts: int, inter: int, top_k: int, score_func: str, tid2eid, input_ids, bias,
                                scale: float, limit: float, down):
    """Every expert and the shared one on every token after the stacked up-projection ``y``
    ``[T, E + 2 (E + 1) I]`` (router logits, gate inputs of experts 0..E-1 and the shared expert, then their
    up inputs); ``down`` ``[E + 1, I, H]``. Each token adds its chosen experts in increasing expert order,
    then the shared expert."""
    n = n_experts
    t = y.shape[0]
    yf, down = y.float(), down.float()
    experts, weights = route_reference(yf[:, :n], top_k, score_func, tid2eid, input_ids, bias, scale)
    gate_up = yf[:, n:].view(t, 2, n + 1, inter)
    act = clamped_swiglu(gate_up[:, 0], gate_up[:, 1], limit)  # [T, E + 1, I]
    out_all = torch.bmm(act.transpose(0, 1), down)  # [E + 1, T, H]
    order = experts.argsort(dim=-1, stable=True)
    experts, weights = experts.gather(-1, order), weights.gather(-1, order)
    h = down.shape[-1]
    picked = experts * t + torch.arange(t, device=y.device)[:, None]
    terms = out_all.reshape(-1, h).index_select(0, picked.flatten()).view(t, -1, h) * weights[..., None]
    out = terms[:, 0]
    for slot in range(1, experts.shape[-1]):
        out = out + terms[:, slot]
    return (out + out_all[n]).to(y.dtype)
