"""``decode_stack``: a decode step's whole decoder stack (every layer's attention and MoE with their
hyper-connection boundaries) in one call, for a batch where every sequence adds one token.

It is a composite op: ``reference.py`` writes it as the sequence of the other ops' entry points (so in
reference mode it runs their references, and on CUDA / Ascend their accelerator implementations), and the
CPU kernel (``cpu.cpp``) calls the same ops' CPU implementations in the same order, natively. The results
are those ops' bits; the gain is the Python that a step otherwise spends between some fifty op calls.
The flat argument layout is described in ``reference.py``.
"""

from __future__ import annotations

import torch

from .._mode import reference_mode
from .._registry import device_impl, fake, op
from .reference import FLOATS, INTS, SCORE_FUNCS, STEP, WEIGHTS, decode_stack_reference

_stack = op("decode_stack")


@fake("decode_stack")
def _(streams, input_ids, slots, key_slots, window_visible, weights, ints, floats, step, totals, hc, iters, hc_eps,
      norm_eps):
    return torch.empty_like(streams)


device_impl("decode_stack", decode_stack_reference, "composed from the other ops' entry points")


def decode_stack(streams, input_ids, slots, key_slots, window_visible, weights, ints, floats, step, totals,
                 hc: int, iters: int, hc_eps: float, norm_eps: float):
    if reference_mode():
        return decode_stack_reference(streams, input_ids, slots, key_slots, window_visible, weights, ints, floats,
                                      step, totals, hc, iters, hc_eps, norm_eps)
    return _stack(streams, input_ids, slots, key_slots, window_visible, weights, ints, floats, step, totals, hc,
                  iters, hc_eps, norm_eps)


decode_stack.__doc__ = decode_stack_reference.__doc__

__all__ = ["FLOATS", "INTS", "SCORE_FUNCS", "STEP", "WEIGHTS", "decode_stack", "decode_stack_reference"]
