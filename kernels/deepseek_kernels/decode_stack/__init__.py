"""``decode_stack``: a decode step's whole decoder stack (every layer's attention and MoE with their
hyper-connection boundaries) in one call, for a batch where every sequence adds one token.

It is a composite op: ``reference.py`` writes it as the sequence of the other ops' entry points (so in
reference mode it runs their references, and on CUDA / Ascend their accelerator implementations), and the
CPU kernel (``cpu.cpp``) calls the same ops' CPU implementations in the same order, natively. The results
are those ops' bits; the gain is the Python that a step otherwise spends between some fifty op calls.
The step's layout (gather indices, closing windows, rotary rows) is built inside the op; the flat argument
layout is described in ``reference.py``.
"""

from __future__ import annotations

import torch

from .._mode import reference_mode
from .._registry import device_impl, fake, op
from .reference import FLOATS, INTS, POOLS, SCORE_FUNCS, WEIGHTS, decode_stack_reference

_stack = op("decode_stack")


@fake("decode_stack")
def _(streams, input_ids, positions, slots, tables, prompt_lens, block_size, window, rope_tables, weights, ints,
      floats, pools, hc, iters, hc_eps, norm_eps):
    return torch.empty_like(streams)


device_impl("decode_stack", decode_stack_reference, "composed from the other ops' entry points")


def decode_stack(streams, input_ids, positions, slots, tables, prompt_lens, block_size: int, window: int,
                 rope_tables, weights, ints, floats, pools, hc: int, iters: int, hc_eps: float, norm_eps: float):
    args = (streams, input_ids, positions, slots, tables, prompt_lens, block_size, window, rope_tables, weights, ints,
            floats, pools, hc, iters, hc_eps, norm_eps)
    return decode_stack_reference(*args) if reference_mode() else _stack(*args)


decode_stack.__doc__ = decode_stack_reference.__doc__

__all__ = ["FLOATS", "INTS", "POOLS", "SCORE_FUNCS", "WEIGHTS", "decode_stack", "decode_stack_reference"]
