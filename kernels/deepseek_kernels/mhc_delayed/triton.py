"""Triton ``mhc_pre_delayed``: the site weights of V4's ``hc_weights_kernel`` (one program per token: the pre and
post sigmoids, the row softmax and Sinkhorn of ``comb``), then the collapse of the streams with the previous site's
``pre`` through ``hc_collapse_kernel`` (or stream 0 when there is none). The same two kernels V4's ``hc_mix``
launches; only which ``pre`` collapses the streams differs."""

from __future__ import annotations

import torch
import triton

from .._triton_common import pow2
from ..hyper_connection.triton import hc_collapse_kernel, hc_weights_kernel


def mhc_pre_delayed_triton(mixes, base, scale, hc: int, iters: int, hc_eps: float, streams, pre_mix):
    t, _, d = streams.shape
    m = mixes.float().contiguous()
    opts = dict(dtype=torch.float32, device=mixes.device)
    pre, post = torch.empty(t, hc, **opts), torch.empty(t, hc, **opts)
    comb = torch.empty(t, hc, hc, **opts)
    if t:
        hc_weights_kernel[(t,)](m, base.float().contiguous(), scale.float().contiguous(), pre, post, comb, iters,
                                hc_eps, HC=hc, BLOCK=pow2(hc, 2))
    if pre_mix is None:
        return post, comb, pre, streams[:, 0].contiguous()
    streams = streams.contiguous()
    out = torch.empty(t, d, dtype=streams.dtype, device=streams.device)
    if t:
        bd = min(pow2(d), 1024)
        hc_collapse_kernel[(t, triton.cdiv(d, bd))](streams, pre_mix.float().contiguous(), out, d, HC=hc, BLOCK_D=bd)
    return post, comb, pre, out
