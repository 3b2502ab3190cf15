"""Manifold-constrained hyper-connection ops.

* ``hc_mix``: the site weights after the linear map (sigmoids, row softmax, Sinkhorn) and the collapsed input.
* ``hc_merge``: the block output spread over the streams plus the ``comb`` mix of the old streams.
* ``hc_step``: one boundary between decoder sub-blocks (merge, next site's weights, normed block input);
  ``norm_eps`` is the epsilon of the streams' unweighted norm, ``block_eps`` that of the block's input norm.
* ``hc_head``: the model's last site (``pre`` only) and the final norm, the input of the vocabulary head.

CPU: ``cpu.cpp`` (``hc_mix``: Sinkhorn for eight tokens at once; ``hc_step``: groups of sixteen tokens, one per
lane, from the merge to the normed block input; sums in index order, the bits of the per-token composition). CUDA / Ascend: ``hc_merge`` and
``hc_mix`` run the Triton kernels of ``triton.py``; ``hc_step`` is composed from them and the RMS norm op;
``hc_head`` runs its PyTorch reference (once per step, a few rows).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._registry import device_impl, entry_point, fake, op
from .reference import hc_head_reference, hc_merge_reference, hc_mix_reference, hc_step_reference

_mix, _merge, _step = op("hc_mix"), op("hc_merge"), op("hc_step")


@fake("hc_mix")
def _(mixes, base, scale, hc, iters, hc_eps, streams):
    t, d = streams.shape[0], streams.shape[-1]
    new = mixes.new_empty
    return new(t, hc), new(t, hc), new(t, hc, hc), streams.new_empty(t, d)


@fake("hc_merge")
def _(streams, block, post, comb):
    return torch.empty_like(streams)


@fake("hc_step")
def _(streams, block, post_prev, comb_prev, fn, base, scale, hc, iters, hc_eps, norm_eps, norm_weight, block_eps):
    t, _, d = streams.shape
    new = streams.new_empty
    return torch.empty_like(streams), new(t, hc, dtype=torch.float32), new(t, hc, hc, dtype=torch.float32), new(t, d)


@fake("hc_head")
def _(streams, fn, base, scale, hc_eps, norm_eps, norm_weight, block_eps):
    return streams.new_empty(streams.shape[0], streams.shape[2])


def _merge_accelerator(streams, block, post, comb):
    from .triton import hc_merge_triton

    return hc_merge_triton(streams, block, post, comb)


def _mix_accelerator(mixes, base, scale, hc, iters, hc_eps, streams):
    from .triton import hc_mix_triton

    return hc_mix_triton(mixes, base, scale, hc, iters, hc_eps, streams)


def _step_accelerator(streams, block, post_prev, comb_prev, fn, base, scale, hc, iters, hc_eps, norm_eps,
                      norm_weight, block_eps):
    if block is not None:
        streams = _merge(streams, block, post_prev, comb_prev)
    else:
        streams = streams.clone()
    t = streams.shape[0]
    flat = op("rms_norm")(streams.reshape(t, -1).float(), None, norm_eps)
    _, post, comb, collapsed = _mix(F.linear(flat, fn.float()), base, scale, hc, iters, hc_eps, streams)
    return streams, post, comb, op("rms_norm")(collapsed, norm_weight, block_eps)


device_impl("hc_merge", _merge_accelerator, "triton")
device_impl("hc_mix", _mix_accelerator, "triton")
device_impl("hc_step", _step_accelerator, "composed: hc_merge, rms_norm, hc_mix ops and one GEMM")
device_impl("hc_head", hc_head_reference, "PyTorch reference")


hc_mix = entry_point("hc_mix", hc_mix_reference)
hc_merge = entry_point("hc_merge", hc_merge_reference)
hc_step = entry_point("hc_step", hc_step_reference)
hc_head = entry_point("hc_head", hc_head_reference)


__all__ = ["hc_head", "hc_mix", "hc_merge", "hc_step", "hc_head_reference", "hc_mix_reference", "hc_merge_reference",
           "hc_step_reference"]
