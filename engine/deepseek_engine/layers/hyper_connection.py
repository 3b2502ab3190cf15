"""Manifold-constrained hyper-connections (mHC).

The residual stream is ``hc_mult`` parallel copies ``[T, hc, D]``.  Before a
sub-block the streams are collapsed with weights ``pre``; the sub-block output
is spread back with ``post``; the old streams are mixed by ``comb``, a
Sinkhorn-normalised (near doubly stochastic) ``hc x hc`` matrix.  All three
come from one linear map of the RMS-normed flattened streams, in float32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from deepseek_engine.layers.norm import unweighted_rms_norm
from deepseek_engine.native import hc_merge, hc_mix


def hyper_weights(streams: torch.Tensor, fn: torch.Tensor, base: torch.Tensor, scale: torch.Tensor,
                  hc: int, iters: int, hc_eps: float, norm_eps: float):
    """Return ``(post [T, hc], comb [T, hc, hc], collapsed [T, D])`` for ``streams`` ``[T, hc, D]``."""
    t = streams.shape[0]
    flat = unweighted_rms_norm(streams.reshape(t, -1).float(), norm_eps)
    mixes = F.linear(flat, fn.float())
    native = hc_mix(mixes, base.float(), scale.float(), hc, iters, hc_eps, streams)
    if native is not None:
        _, post, comb, collapsed = native
        return post, comb, collapsed
    pre_w, post_w, comb_w = mixes.split([hc, hc, hc * hc], dim=-1)
    pre_b, post_b, comb_b = base.float().split([hc, hc, hc * hc])
    pre_s, post_s, comb_s = scale.float().unbind(0)
    pre = torch.sigmoid(pre_w * pre_s + pre_b) + hc_eps
    post = 2 * torch.sigmoid(post_w * post_s + post_b)
    comb = torch.softmax(comb_w.view(t, hc, hc) * comb_s + comb_b.view(hc, hc), dim=-1) + hc_eps
    comb = comb / (comb.sum(dim=-2, keepdim=True) + hc_eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(dim=-1, keepdim=True) + hc_eps)
        comb = comb / (comb.sum(dim=-2, keepdim=True) + hc_eps)
    collapsed = (pre.unsqueeze(-1) * streams).sum(dim=1).to(streams.dtype)
    return post, comb, collapsed


def hyper_merge(streams: torch.Tensor, block_out: torch.Tensor, post: torch.Tensor, comb: torch.Tensor) -> torch.Tensor:
    """New streams: ``post`` spreads ``block_out`` over the streams, ``comb`` mixes the old ones."""
    native = hc_merge(streams, block_out, post, comb)
    if native is not None:
        return native
    dtype = streams.dtype
    return post.to(dtype).unsqueeze(-1) * block_out.unsqueeze(-2) + torch.matmul(
        comb.to(dtype).transpose(-1, -2), streams
    )


def hyper_head(streams: torch.Tensor, fn: torch.Tensor, base: torch.Tensor, scale: torch.Tensor,
               hc_eps: float, norm_eps: float) -> torch.Tensor:
    """Final collapse of the streams into one hidden vector per token."""
    t = streams.shape[0]
    flat = unweighted_rms_norm(streams.reshape(t, -1).float(), norm_eps)
    pre = torch.sigmoid(F.linear(flat, fn.float()) * scale.float() + base.float()) + hc_eps
    return (pre.unsqueeze(-1) * streams).sum(dim=1).to(streams.dtype)
