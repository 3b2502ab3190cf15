"""``sample_tokens(probs, noise)``: exponential-race sampling of one token per row (see ``reference.py``).

CPU: ``cpu.cpp``; CUDA / Ascend: ``triton.py`` (a per-row arg-max reduction of ``probs / noise``).
"""

from __future__ import annotations

import torch

from .._registry import entry_point, fake, triton_impl
from .reference import sample_tokens_reference


@fake("sample_tokens")
def _(probs, noise):
    return probs.new_empty(probs.shape[0], dtype=torch.long)


triton_impl("sample_tokens", "sampling.triton", "sample_tokens_triton")


sample_tokens = entry_point("sample_tokens", sample_tokens_reference)


__all__ = ["sample_tokens", "sample_tokens_reference"]
