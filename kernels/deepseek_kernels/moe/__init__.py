"""Mixture-of-experts ops.

* ``route(logits, top_k, score_func, tid2eid, input_ids, bias, scale)`` (op ``moe_route``): expert choice
  and weights (sqrtsoftplus / softmax / sigmoid scores, top-k of score + bias, or hash routing).
* ``moe_dense_experts(...)``: for layers with few experts, routing, SwiGLU and down projections of every
  expert after one stacked up-projection (``cpu.cpp``).
* ``expert_linear`` lives in ``deepseek_kernels.quant``: the expert GEMM on FP8 / MXFP4 weights.

CPU: ``cpu.cpp`` for both. CUDA / Ascend run ``route`` and ``moe_dense_experts`` as their PyTorch
composition (a handful of batched ops; the GEMM-shaped work is in ``quant``'s Triton kernels).
"""

from __future__ import annotations

import torch

from .._mode import reference_mode
from .._registry import device_impl, fake, op
from .reference import (
    clamped_swiglu,
    moe_dense_experts_reference,
    route_reference,
    scores_reference,
)

_dense, _route = op("moe_dense_experts"), op("moe_route")


@fake("moe_route")
def _(logits, top_k, score_func, tid2eid, input_ids, bias, scale):
    t = logits.shape[0]
    return logits.new_empty(t, top_k, dtype=torch.long), logits.new_empty(t, top_k)


@fake("moe_dense_experts")
def _(y, n_experts, inter, top_k, score_func, tid2eid, input_ids, bias, scale, limit, down):
    return y.new_empty(y.shape[0], down.shape[-1])


device_impl("moe_dense_experts", moe_dense_experts_reference, "PyTorch composition (batched GEMM)")
device_impl("moe_route", lambda logits, top_k, score_func, tid2eid, input_ids, bias, scale: route_reference(
    logits, top_k, score_func, tid2eid, input_ids, bias, scale), "PyTorch composition (topk)")


def moe_dense_experts(y, n_experts: int, inter: int, top_k: int, score_func: str, tid2eid, input_ids, bias,
                      scale: float, limit: float, down):
    if reference_mode():
        return moe_dense_experts_reference(y, n_experts, inter, top_k, score_func, tid2eid, input_ids, bias, scale,
                                           limit, down)
    return _dense(y, n_experts, inter, top_k, score_func, tid2eid, input_ids, bias, scale, limit, down)


def route(logits, top_k: int, score_func: str, tid2eid=None, input_ids=None, bias=None, scale: float = 1.0):
    """``(experts [T, k], weights [T, k])``; the slot order within a row is the kernel's (learned routing:
    decreasing score + bias, ties to the lower expert), the reference's is ``torch.topk``'s."""
    if reference_mode():
        return route_reference(logits, top_k, score_func, tid2eid, input_ids, bias, scale)
    return _route(logits, top_k, score_func, tid2eid, input_ids, bias, scale)

__all__ = ["moe_dense_experts", "moe_dense_experts_reference", "route", "route_reference", "scores_reference",
           "clamped_swiglu"]
