"""Arithmetic whose result for one token row never depends on the other rows of the call.

The V4.1 path must give a sequence the same bits alone and in a batch, on any x86 CPU. Three things in plain
PyTorch break that, and each has its replacement here:

* a product over the token dimension (``F.linear``, ``matmul``, ``bmm``, ``einsum``) goes to BLAS, which picks
  its blocking, and so its order of additions, from the number of rows: :func:`linear` is the kernel op
  ``deepseek_kernels.row_linear`` (one fixed order per output, from the widths only);
* a reduction along a row (``sum``, ``mean``) may be split across threads by how large the whole tensor is:
  the V4.1 path's row sums are inside kernel ops (``mhc_mixes``, ``engram_gate``, ``rms_norm``), in a fixed order;
* a transcendental elementwise function (``exp``, ``sigmoid``, ``silu``, ``cos`` ...) runs SLEEF's vector
  code on whole vectors and libm's scalar code on the tail of the tensor, and the two can differ by an ulp, so
  an element's bits depend on its offset in the tensor: :func:`lanewise` pads the flattened tensor to whole
  vectors (and calls in pieces below the size where PyTorch would split it across threads), so every element
  takes the vector code.
"""

from __future__ import annotations

from collections.abc import Callable

import deepseek_kernels as ops
import torch
from deepseek_kernels.weight_only import PackedWeight

#: Elements padded to: a multiple of every CPU's vector loop step (two vectors of up to sixteen floats).
_LANES = 64
#: Elements per call: below PyTorch's grain size (32768), so a call never splits across threads.
_PIECE = 1 << 14


def linear(x: torch.Tensor, weight: torch.Tensor | PackedWeight) -> torch.Tensor:
    """``x @ weight.T`` (``weight [m, n]``), each row on its own: ``deepseek_kernels.row_linear`` for a float
    weight, ``wo_linear`` for one kept in its stored format (:mod:`deepseek_engine.layers.packed_linear`; each
    output its own row's products in an order fixed by the widths too)."""
    if isinstance(weight, PackedWeight):
        return ops.packed_linear(x, weight)
    return ops.row_linear(x, weight)


def lanewise(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``fn(x)`` for an elementwise ``fn``, computed so that no element's bits depend on its offset in ``x``."""
    if x.device.type != "cpu" or x.numel() == 0:
        return fn(x)
    flat = x.reshape(-1)
    n = flat.numel()
    padded = torch.zeros(-(-n // _LANES) * _LANES, dtype=x.dtype)
    padded[:n] = flat
    pieces = [fn(padded[a:a + _PIECE]) for a in range(0, padded.numel(), _PIECE)]
    out = pieces[0] if len(pieces) == 1 else torch.cat(pieces)
    return out[:n].view(x.shape)


def rotary(rope, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``rope(positions, dtype)`` of a :class:`~deepseek_engine.layers.rotary_embedding.RotaryEmbedding` with its
    cosines and sines through :func:`lanewise`: a position's table rows are the same in any step."""
    inv_freq = rope.inv_freq.to(positions.device)
    freqs = positions.float()[:, None] * inv_freq[None, :]
    cos, sin = lanewise(torch.cos, freqs), lanewise(torch.sin, freqs)
    return (cos * rope.scaling).to(dtype), (sin * rope.scaling).to(dtype)


__all__ = ["lanewise", "linear", "rotary"]
