"""PyTorch definitions of the hyper-connection ops (float32 arithmetic throughout)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..rms_norm.reference import rms_norm_reference


def hc_mix_reference(mixes: torch.Tensor, base: torch.Tensor, scale: torch.Tensor, hc: int, iters: int,
                     hc_eps: float, streams: torch.Tensor):
    """``(pre, post, comb, collapsed)`` of one site from the linear map ``mixes`` ``[T, (2 + hc) hc]``:
    sigmoids for ``pre`` / ``post``, a row softmax then Sinkhorn normalisation for ``comb``, and the
    ``pre``-weighted sum of the streams ``[T, hc, D]``."""
    t = mixes.shape[0]
    mixes, base, scale = mixes.float(), base.float(), scale.float()
    pre_w, post_w, comb_w = mixes.split([hc, hc, hc * hc], dim=-1)
    pre_b, post_b, comb_b = base.split([hc, hc, hc * hc])
    pre_s, post_s, comb_s = scale.unbind(0)
    pre = torch.sigmoid(pre_w * pre_s + pre_b) + hc_eps
    post = 2 * torch.sigmoid(post_w * post_s + post_b)
    comb = torch.softmax(comb_w.view(t, hc, hc) * comb_s + comb_b.view(hc, hc), dim=-1) + hc_eps
    comb = comb / (comb.sum(dim=-2, keepdim=True) + hc_eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(dim=-1, keepdim=True) + hc_eps)
        comb = comb / (comb.sum(dim=-2, keepdim=True) + hc_eps)
    collapsed = (pre.unsqueeze(-1) * streams.float()).sum(dim=1).to(streams.dtype)
    return pre, post, comb, collapsed


def hc_merge_reference(streams: torch.Tensor, block: torch.Tensor, post: torch.Tensor,
                       comb: torch.Tensor) -> torch.Tensor:
    """``out[t, j] = post[t, j] * block[t] + sum_i comb[t, i, j] * streams[t, i]``."""
    out = post.float().unsqueeze(-1) * block.float().unsqueeze(-2) + torch.matmul(
        comb.float().transpose(-1, -2), streams.float())
    return out.to(streams.dtype)


def hc_step_reference(streams, block, post_prev, comb_prev, fn, base, scale, hc: int, iters: int, hc_eps: float,
                      norm_eps: float, norm_weight, block_eps: float):
    """One boundary between sub-blocks: merge ``block`` (when given), then the next site's weights and the
    block's input, normed with ``norm_weight`` and ``block_eps``. Returns ``(streams, post, comb, x)``."""
    if block is not None:
        streams = hc_merge_reference(streams, block, post_prev, comb_prev)
    else:
        streams = streams.clone()
    t = streams.shape[0]
    flat = rms_norm_reference(streams.reshape(t, -1).float(), None, norm_eps)
    mixes = F.linear(flat, fn.float())
    _, post, comb, collapsed = hc_mix_reference(mixes, base, scale, hc, iters, hc_eps, streams)
    return streams, post, comb, rms_norm_reference(collapsed, norm_weight, block_eps)


def hc_head_reference(streams, fn, base, scale, hc_eps: float, norm_eps: float, norm_weight, block_eps: float):
    """The last site and the final norm: ``pre = sigmoid(mix * scale + base) + hc_eps`` from the normed flattened
    streams' product with ``fn`` ``[hc, hc D]``, the ``pre``-weighted sum of the streams, normed with
    ``norm_weight`` and ``block_eps``. ``[T, D]``."""
    t, hc, d = streams.shape
    flat = rms_norm_reference(streams.reshape(t, hc * d).float(), None, norm_eps)
    pre = torch.sigmoid(F.linear(flat, fn.float()) * scale.float() + base.float()) + hc_eps
    collapsed = (pre.unsqueeze(-1) * streams.float()).sum(dim=1).to(streams.dtype)
    return rms_norm_reference(collapsed, norm_weight, block_eps)
