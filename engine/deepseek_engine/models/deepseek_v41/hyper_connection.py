"""Hyper-connections of DeepSeek V4.1: the delayed pre-mix.

The mixing weights are computed as in V4 (:mod:`deepseek_engine.layers.hyper_connection`):
from the RMS-normalised flattened streams, ``pre = sigmoid(.) + eps``,
``post = 2 * sigmoid(.)`` and a Sinkhorn-normalised ``comb``. What changes is
which ``pre`` collapses a sub-block's input: the one computed by the
*previous* sub-block (attention of layer ``i`` uses the MoE ``pre`` of layer
``i - 1``, the MoE uses its own layer's attention ``pre``). Layer 0's attention
has no previous ``pre`` and reads stream 0 (the embedding). After the last
layer the streams are collapsed with the last MoE's ``pre``; V4.1 has no
learned head mix. Spreading a sub-block's output back over the streams is
V4's ``hyper_merge``.
"""

from __future__ import annotations

import deepseek_kernels as ops
import torch


def mhc_pre_delayed(streams: torch.Tensor, fn: torch.Tensor, scale: torch.Tensor, base: torch.Tensor,
                    norm_eps: float, hc_eps: float, sinkhorn_iters: int, pre_mix: torch.Tensor | None):
    """Return ``(post [T, hc], comb [T, hc, hc], layer_input [T, D], pre [T, hc])``.

    ``streams``: ``[T, hc, D]``; ``fn``: ``[(2 + hc) * hc, hc * D]``; ``scale``:
    ``[3]``; ``base``: ``[(2 + hc) * hc]``. ``layer_input`` collapses ``streams``
    with ``pre_mix`` (``None``: stream 0); ``pre`` is for the next sub-block.
    """
    hc = streams.shape[1]
    # ``(x @ fn.T) * rsqrt(mean(x^2) + eps)`` of the flattened streams, each row on its own (the kernel op).
    mixes = ops.mhc_mixes(streams, fn, norm_eps)
    # The weights from the mixes on, and the delayed collapse: the kernel op (reference in deepseek_kernels).
    post, comb, pre, layer_input = ops.mhc_pre_delayed(mixes, base, scale, hc, sinkhorn_iters, hc_eps, streams,
                                                       pre_mix)
    return post, comb, layer_input, pre


def collapse(streams: torch.Tensor, pre: torch.Tensor) -> torch.Tensor:
    """``sum_i pre_i * streams_i`` in float32 (streams added in index order, as ``mhc_pre_delayed``'s collapse),
    returned in the streams' dtype."""
    w, s = pre.float(), streams.float()
    out = w[:, 0, None] * s[:, 0]
    for i in range(1, s.shape[1]):
        out = out + w[:, i, None] * s[:, i]
    return out.to(streams.dtype)
