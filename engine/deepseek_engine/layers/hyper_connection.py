"""Manifold-constrained hyper-connections (mHC).

The residual stream is ``hc_mult`` parallel copies ``[T, hc, D]``.  Before a
sub-block the streams are collapsed with weights ``pre``; the sub-block output
is spread back with ``post``; the old streams are mixed by ``comb``, a
Sinkhorn-normalised (near doubly stochastic) ``hc x hc`` matrix.  All three
come from one linear map of the RMS-normed flattened streams, in float32.
"""

from __future__ import annotations

import deepseek_kernels as ops
import torch
import torch.nn.functional as F

from deepseek_engine.layers.norm import unweighted_rms_norm


def add_hc_sites(module: torch.nn.Module, c) -> None:
    """Register the hyper-connection parameters of a decoder layer's two sites (``attn``, ``ffn``):
    ``hc_{site}_fn [(2 + hc) * hc, hc * D]``, ``hc_{site}_base [(2 + hc) * hc]`` and ``hc_{site}_scale [3]``."""
    mix = (2 + c.hc_mult) * c.hc_mult
    for site in ("attn", "ffn"):
        module.register_parameter(f"hc_{site}_fn", torch.nn.Parameter(torch.zeros(mix, c.hc_mult * c.hidden_size)))
        module.register_parameter(f"hc_{site}_base", torch.nn.Parameter(torch.zeros(mix)))
        module.register_parameter(f"hc_{site}_scale", torch.nn.Parameter(torch.ones(3)))


def hyper_weights(streams: torch.Tensor, fn: torch.Tensor, base: torch.Tensor, scale: torch.Tensor,
                  hc: int, iters: int, hc_eps: float, norm_eps: float):
    """Return ``(post [T, hc], comb [T, hc, hc], collapsed [T, D])`` for ``streams`` ``[T, hc, D]``."""
    t = streams.shape[0]
    flat = unweighted_rms_norm(streams.reshape(t, -1).float(), norm_eps)
    mixes = F.linear(flat, fn.float())
    _, post, comb, collapsed = ops.hc_mix(mixes, base, scale, hc, iters, hc_eps, streams)
    return post, comb, collapsed


def hyper_merge(streams: torch.Tensor, block_out: torch.Tensor, post: torch.Tensor, comb: torch.Tensor) -> torch.Tensor:
    """New streams: ``post`` spreads ``block_out`` over the streams, ``comb`` mixes the old ones."""
    return ops.hc_merge(streams, block_out, post, comb)


def hyper_head(streams: torch.Tensor, fn: torch.Tensor, base: torch.Tensor, scale: torch.Tensor,
               hc_eps: float, norm_eps: float) -> torch.Tensor:
    """Final collapse of the streams into one hidden vector per token."""
    t = streams.shape[0]
    flat = unweighted_rms_norm(streams.reshape(t, -1).float(), norm_eps)
    pre = torch.sigmoid(F.linear(flat, fn.float()) * scale.float() + base.float()) + hc_eps
    return (pre.unsqueeze(-1) * streams).sum(dim=1).to(streams.dtype)
