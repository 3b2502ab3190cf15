"""int64 tensors from lists of Python integers, through the buffer protocol.

``torch.tensor`` checks the type of every element of a list (about 0.1 us each); a decode step of 32
sequences builds a few hundred such integers (block tables, token ids, positions, slots), where that check
alone cost tens of microseconds. ``array('q', ...)`` converts them in C and ``torch.frombuffer`` wraps the
result without a copy (the tensor keeps the array alive).
"""

from __future__ import annotations

from array import array

import torch


def long_tensor(values: list[int], device: torch.device | str | None = None) -> torch.Tensor:
    """``torch.tensor(values, dtype=torch.long, device=device)`` for a flat list of ints."""
    if not values:
        return torch.empty(0, dtype=torch.long, device=device)
    t = torch.frombuffer(array("q", values), dtype=torch.long)
    return t if device is None or torch.device(device).type == "cpu" else t.to(device)


def padded_rows(rows: list[list[int]], device: torch.device | str | None = None) -> torch.Tensor:
    """``[len(rows), longest]`` int64 tensor of ``rows``, each padded with zeros at the end."""
    width = max((len(r) for r in rows), default=0)
    flat: list[int] = []
    for r in rows:
        flat += r
        flat += [0] * (width - len(r))
    return long_tensor(flat, device).view(len(rows), width)
