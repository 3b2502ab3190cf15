"""Launch helpers shared by the Triton kernels.

Under the interpreter (``TRITON_INTERPRET=1``, CPU tensors) ``tl.dot`` cannot multiply bf16 / fp8 tiles, so
every kernel with a dot takes an ``UPCAST`` constexpr that converts its tiles to float32 first; compiled
launches pass ``UPCAST=False`` and keep the narrow types on the tensor cores.
"""

from __future__ import annotations

import os

import torch
import triton


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def upcast(*tensors: torch.Tensor) -> bool:
    """Whether dots must run on float32 tiles (interpreter with a narrow dtype)."""
    return interpreting() and any(t.dtype not in (torch.float32, torch.float64) for t in tensors)


def pow2(n: int, least: int = 16) -> int:
    return max(least, triton.next_power_of_2(max(int(n), 1)))
