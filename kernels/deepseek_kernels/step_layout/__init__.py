"""``decode_layout``: the gather indices of a decode step (see ``reference.py``).

CPU: ``cpu.cpp`` (one pass over the sequences). CUDA / Ascend: the PyTorch reference on the device (index
bookkeeping of a few hundred integers; a step there is better served by capturing it whole).
"""

from __future__ import annotations

import torch

from .._registry import device_impl, entry_point, fake
from .reference import closing_windows, decode_layout_reference


@fake("decode_layout")
def _(positions, tables, prompt_lens, block_size, window, rates):
    # Widths depend on the positions' values (data-dependent shapes).
    ctx = torch.library.get_ctx()
    b = positions.shape[0]
    k = ctx.new_dynamic_size()
    out = [positions.new_empty(b), positions.new_empty(b, k), positions.new_empty(b, 1, k, dtype=torch.bool)]
    for _rate in rates:
        n = ctx.new_dynamic_size()
        out += [positions.new_empty(b, n), positions.new_empty(b, n, dtype=torch.bool), positions.new_empty(b, 1)]
    return out + [positions.new_empty(len(rates))]


device_impl("decode_layout", decode_layout_reference, "PyTorch reference")


decode_layout = entry_point("decode_layout", decode_layout_reference)


__all__ = ["closing_windows", "decode_layout", "decode_layout_reference"]
