"""PyTorch definition of ``rope``: interleaved rotation of the trailing channels with per-row tables.

Tables ``c``, ``s`` are ``[T, R]``: ``c`` repeats each cosine for both channels of a pair, ``s`` holds
``-sin`` for the even channel and ``sin`` for the odd one, so pair ``(e, o)`` becomes
``(e * cos - o * sin, o * cos + e * sin)`` as ``x * c + swap_pairs(x) * s`` (each product rounded, then
the sum).
"""

from __future__ import annotations

import torch


def rope_reference(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    r = c.shape[-1]
    shape = (c.shape[0],) + (1,) * (x.dim() - 2) + (r,)
    rope = x[..., x.shape[-1] - r:]
    swapped = rope.unflatten(-1, (r // 2, 2)).flip(-1).flatten(-2)
    rotated = rope.float() * c.float().view(shape) + swapped.float() * s.float().view(shape)
    return torch.cat([x[..., : x.shape[-1] - r], rotated.to(x.dtype)], dim=-1)
