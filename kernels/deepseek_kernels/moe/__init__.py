"""Mixture-of-experts ops.

* ``route(logits, top_k, score_func, tid2eid, input_ids, bias, scale)``: expert choice and weights
  (sqrtsoftplus / softmax / sigmoid scores, top-k of score + bias, or hash routing through ``tid2eid``).
* ``moe_dense_experts(...)``: for layers with few experts, routing, SwiGLU and down projections of every
  expert after one stacked up-projection (``cpu.cpp``).
* ``expert_linear`` lives in ``deepseek_kernels.quant``: the expert GEMM on FP8 / MXFP4 weights.

CUDA / Ascend run ``route`` and ``moe_dense_experts`` as their PyTorch composition (a handful of batched ops;
the GEMM-shaped work is in ``quant``'s Triton kernel).
"""

from __future__ import annotations

import torch

from .._mode import reference_mode
from .._registry import device_impl, fake, op
from .reference import clamped_swiglu, moe_dense_experts_reference, route_reference, scores_reference

_dense = op("moe_dense_experts")


@fake("moe_dense_experts")
def _(y, n_experts, inter, top_k, score_func, tid2eid, input_ids, bias, scale, limit, down):
    return y.new_empty(y.shape[0], down.shape[-1])


device_impl("moe_dense_experts", moe_dense_experts_reference, "PyTorch composition (batched GEMM)")


def moe_dense_experts(y, n_experts: int, inter: int, top_k: int, score_func: str, tid2eid, input_ids, bias,
                      scale: float, limit: float, down):
    if reference_mode():
        return moe_dense_experts_reference(y, n_experts, inter, top_k, score_func, tid2eid, input_ids, bias, scale,
                                           limit, down)
    return _dense(y, n_experts, inter, top_k, score_func, tid2eid, input_ids, bias, scale, limit, down)


route = route_reference

__all__ = ["moe_dense_experts", "moe_dense_experts_reference", "route", "route_reference", "scores_reference",
           "clamped_swiglu"]
