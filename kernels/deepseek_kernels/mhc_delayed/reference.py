"""PyTorch reference of V4.1's delayed hyper-connection pre-mix (from the site's linear mixes on).

Given the mixes of one site (``[T, (2 + hc) * hc]``, the linear map of the flattened
streams scaled by their reciprocal RMS), compute ``pre = sigmoid(.) + eps``,
``post = 2 * sigmoid(.)`` and the Sinkhorn-normalised ``comb`` exactly as V4 does,
but collapse the streams with the *previous* site's ``pre`` (``pre_mix``; ``None``:
take stream 0, as layer 0's attention does). This site's ``pre`` is returned for the
next site.
"""

from __future__ import annotations

import torch


def mhc_pre_delayed_reference(mixes: torch.Tensor, base: torch.Tensor, scale: torch.Tensor, hc: int, iters: int,
                              hc_eps: float, streams: torch.Tensor, pre_mix: torch.Tensor | None):
    """Return float32 ``post [T, hc]``, ``comb [T, hc, hc]``, ``pre [T, hc]`` and ``layer_input [T, D]`` (streams' dtype)."""
    t = mixes.shape[0]
    m, scale, base = mixes.float(), scale.float(), base.float()
    pre = torch.sigmoid(m[:, :hc] * scale[0] + base[:hc]) + hc_eps
    post = torch.sigmoid(m[:, hc:2 * hc] * scale[1] + base[hc:2 * hc]) * 2.0
    comb = m[:, 2 * hc:].view(t, hc, hc) * scale[2] + base[2 * hc:].view(1, hc, hc)
    comb = torch.softmax(comb, dim=-1) + hc_eps
    comb = comb / (comb.sum(dim=-2, keepdim=True) + hc_eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(dim=-1, keepdim=True) + hc_eps)
        comb = comb / (comb.sum(dim=-2, keepdim=True) + hc_eps)
    if pre_mix is None:
        layer_input = streams[:, 0]
    else:
        layer_input = (pre_mix.float().unsqueeze(-1) * streams.float()).sum(dim=1).to(streams.dtype)
    return post, comb, pre, layer_input
