"""``engram_gate(streams, kv, q_weight, k_weight, keep, eps)``: V4.1's engram update of the streams (see
``reference.py``).

CPU: ``cpu.cpp`` (the reference's float operations per token and stream, ``row_linear``'s row sums, libm's
``expf`` for the sigmoid: the same bits at every position). CUDA / Ascend: the Triton kernel of ``triton.py``.
"""

from __future__ import annotations

import torch

from .._registry import entry_point, fake, triton_impl
from .reference import engram_gate_reference


@fake("engram_gate")
def _(streams, kv, q_weight, k_weight, keep, eps):
    return torch.empty_like(streams)


triton_impl("engram_gate", "engram_gate.triton", "engram_gate_triton")


engram_gate = entry_point("engram_gate", engram_gate_reference)


__all__ = ["engram_gate", "engram_gate_reference"]
