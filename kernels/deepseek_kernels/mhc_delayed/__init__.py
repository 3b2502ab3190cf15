"""``mhc_pre_delayed``: V4.1's hyper-connection site weights with the delayed pre-mix (see ``reference.py``).

CPU: ``cpu.cpp`` (the V4 site weights of ``hyper_connection/cpu.h``, then the collapse with the previous
site's ``pre``). CUDA / Ascend: ``triton.py`` (V4's site-weight and collapse kernels).
"""

from __future__ import annotations

import torch

from .._registry import entry_point, fake, triton_impl
from .reference import mhc_pre_delayed_reference


@fake("mhc_pre_delayed")
def _(mixes, base, scale, hc, iters, hc_eps, streams, pre_mix):
    t, d = streams.shape[0], streams.shape[-1]
    new = mixes.new_empty
    return new(t, hc, dtype=torch.float32), new(t, hc, hc, dtype=torch.float32), new(t, hc, dtype=torch.float32), \
        streams.new_empty(t, d)


triton_impl("mhc_pre_delayed", "mhc_delayed.triton", "mhc_pre_delayed_triton")


mhc_pre_delayed = entry_point("mhc_pre_delayed", mhc_pre_delayed_reference)


__all__ = ["mhc_pre_delayed", "mhc_pre_delayed_reference"]
