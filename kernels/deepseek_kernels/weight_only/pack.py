"""Checkpoint tensors -> the packed formats of ``wo_linear`` / ``wo_experts`` (run once, when weights are loaded).

:class:`PackedWeight` holds one matrix (or a stack of expert matrices) in its stored precision: nothing is
dequantised. FP8 scales stored as e8m0 exponents or floats become float32 multipliers (exact: a power of two,
or the float itself); MXFP4 keeps its e8m0 exponents as bytes (decoded in the kernel). Weights of other dtypes
(float32, float16) are kept as bfloat16 only when that is exact, else refused: the packed path never rounds a
weight. Where the format or the blocks cannot be packed, :func:`pack` raises ``ValueError`` naming why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .reference import BF16, FP8, INT8, MXFP4

_E8M0 = getattr(torch, "float8_e8m0fnu", None)


@dataclass(frozen=True)
class PackedWeight:
    """``weight`` / ``scale`` in format ``fmt`` with ``block_rows x block_cols`` scale blocks (the op arguments)."""

    weight: torch.Tensor
    scale: torch.Tensor | None
    fmt: int
    block_rows: int
    block_cols: int

    @property
    def out_features(self) -> int:
        return self.weight.shape[-2]

    @property
    def in_features(self) -> int:
        return self.weight.shape[-1] * (2 if self.fmt == MXFP4 else 1)

    def args(self) -> tuple:
        return self.weight, self.scale, self.fmt, self.block_rows, self.block_cols

    def nbytes(self) -> int:
        return self.weight.nbytes + (0 if self.scale is None else self.scale.nbytes)


def _e8m0_bytes(scale: torch.Tensor) -> torch.Tensor | None:
    if _E8M0 is not None and scale.dtype == _E8M0:
        return scale.view(torch.uint8)
    return scale if scale.dtype == torch.uint8 else None


def _float_scale(scale: torch.Tensor) -> torch.Tensor:
    e = _e8m0_bytes(scale)
    if e is None:
        return scale.to(torch.float32).contiguous()
    out = torch.pow(torch.tensor(2.0), e.to(torch.float32) - 127.0)
    return torch.where(e == 255, torch.full_like(out, float("nan")), out).contiguous()


def _blocks(n: int, k: int, grid: tuple[int, int], hint: int | None) -> tuple[int, int]:
    """Block edges ``(rows, cols)`` whose grid over ``[n, k]`` is ``grid``."""
    so, si = grid
    for b in ([hint] if hint else []) + [128, 32, 64, 256, 16]:
        if -(-n // b) == so and -(-k // b) == si:
            return b, b
    if n % so == 0 and k % si == 0:
        return n // so, k // si
    raise ValueError(f"cannot match a weight of {n}x{k} with a scale grid of {so}x{si}")


def pack(weight: torch.Tensor, scale: torch.Tensor | None = None, block_hint: int | None = None) -> PackedWeight:
    """One stored matrix ``[N, K]`` (or stacked ``[E, N, K]``) and its scale, as the checkpoint holds them:
    bfloat16 (no scale; float32 / float16 weights only when bfloat16 holds them exactly); int8 with a float scale
    per row (``[N]`` or ``[N, 1]``); FP8 e4m3 with a grid of float or e8m0 block scales (a single scale or one per
    row too); MXFP4 (int8 / uint8 pairs ``[N, K / 2]`` with e8m0 scales ``[N, K / 32]``)."""
    lead = weight.shape[:-2]
    n, k = weight.shape[-2:]
    if scale is None:
        if weight.dtype != torch.bfloat16:
            w = weight.to(torch.bfloat16)
            if not torch.equal(w.to(weight.dtype), weight):
                raise ValueError(f"a {weight.dtype} weight is packed as bf16 only when that is exact")
            weight = w
        return PackedWeight(weight.contiguous(), None, BF16, 1, 1)
    if weight.dtype in (torch.int8, torch.uint8) and _e8m0_bytes(scale) is not None:  # MXFP4
        if tuple(scale.shape) != (*lead, n, 2 * k // 32) or (2 * k) % 32:
            raise ValueError(f"MXFP4 scale {tuple(scale.shape)} does not fit packed weight {tuple(weight.shape)}")
        return PackedWeight(weight.view(torch.uint8).contiguous(), _e8m0_bytes(scale).contiguous(), MXFP4, 1, 32)
    if weight.dtype == torch.int8:  # int8 weight-only, one float scale per row
        if scale.numel() != weight[..., 0].numel() or not scale.is_floating_point():
            raise ValueError(f"int8 weight {tuple(weight.shape)} needs one float scale per row, got {tuple(scale.shape)}")
        return PackedWeight(weight.contiguous(), scale.to(torch.float32).reshape(*lead, n, 1).contiguous(), INT8, 1, k)
    if weight.dtype == torch.float8_e4m3fn:
        bits = weight.view(torch.uint8)
        if bool(((bits & 0x7F) == 0x7F).any()):
            raise ValueError("FP8 weight holds NaN codes")
        s = _float_scale(scale)
        if s.numel() == math.prod(lead):  # one scale per matrix
            return PackedWeight(bits.contiguous(), s.reshape(*lead, 1, 1).contiguous(), FP8, n, k)
        grid = tuple(s.shape[-2:]) if s.dim() == len(lead) + 2 else (n, 1)
        br, bc = _blocks(n, k, grid, block_hint)
        if bc % 8 and bc < k:
            raise ValueError(f"FP8 scale blocks of {grid} columns are not a multiple of 8 inputs")
        return PackedWeight(bits.contiguous(), s.reshape(*lead, *grid).contiguous(), FP8, br, bc)
    raise ValueError(f"weight of dtype {weight.dtype} with a scale is neither int8, FP8 nor MXFP4")


def stack_rows(parts: list[PackedWeight]) -> PackedWeight:
    """Matrices of one format stacked along their output rows (an expert's gate and up projections), each
    block grid kept when every part's rows are whole blocks, else the scales expanded to one row each."""
    fmt = parts[0].fmt
    if any(p.fmt != fmt or p.block_cols != parts[0].block_cols for p in parts):
        raise ValueError("stacked weights must share their format and column blocks")
    weight = torch.cat([p.weight for p in parts], dim=-2)
    if fmt == BF16 or fmt == MXFP4:
        scale = None if fmt == BF16 else torch.cat([p.scale for p in parts], dim=-2)
        return PackedWeight(weight, scale, fmt, 1, parts[0].block_cols)
    br = parts[0].block_rows
    if all(p.block_rows == br and p.out_features % br == 0 for p in parts):
        return PackedWeight(weight, torch.cat([p.scale for p in parts], dim=-2), fmt, br, parts[0].block_cols)
    rows = [p.scale.repeat_interleave(p.block_rows, dim=-2)[..., : p.out_features, :] for p in parts]
    return PackedWeight(weight, torch.cat(rows, dim=-2).contiguous(), fmt, 1, parts[0].block_cols)


def stack_experts(parts: list[PackedWeight]) -> PackedWeight:
    """Per-expert packed matrices of one format and block shape -> one ``[E, N, K]`` stack."""
    first = parts[0]
    if any((p.fmt, p.block_rows, p.block_cols, tuple(p.weight.shape)) !=
           (first.fmt, first.block_rows, first.block_cols, tuple(first.weight.shape)) for p in parts):
        raise ValueError("experts must share their format, block shape and size")
    scale = None if first.scale is None else torch.stack([p.scale for p in parts])
    return PackedWeight(torch.stack([p.weight for p in parts]), scale, first.fmt, first.block_rows, first.block_cols)


def split_rows(packed: PackedWeight, sizes: list[int]) -> list[PackedWeight]:
    """The inverse of :func:`stack_rows`: consecutive row ranges of ``sizes`` rows (a grouped projection's groups),
    each keeping the block grid where its rows start and end on block edges, else one scale row per weight row
    (the same scale values, so every dequantised weight keeps its bits)."""
    if sum(sizes) != packed.out_features or any(n <= 0 for n in sizes):
        raise ValueError(f"row sizes {sizes} do not split {packed.out_features} rows")
    fmt, br = packed.fmt, packed.block_rows
    per_row = packed.scale
    if fmt in (INT8, FP8) and any(a % br for a in _starts(sizes)):
        per_row = packed.scale.repeat_interleave(br, dim=-2)[..., : packed.out_features, :].contiguous()
        br = 1
    parts = []
    for a, n in zip(_starts(sizes), sizes):
        w = packed.weight[..., a:a + n, :].contiguous()
        if fmt == BF16:
            parts.append(PackedWeight(w, None, fmt, 1, 1))
        elif fmt == MXFP4 or br == 1:
            parts.append(PackedWeight(w, per_row[..., a:a + n, :].contiguous(), fmt, 1, packed.block_cols))
        else:
            rows = per_row[..., a // br:-(-(a + n) // br), :].contiguous()
            parts.append(PackedWeight(w, rows, fmt, br, packed.block_cols))
    return parts


def _starts(sizes: list[int]) -> list[int]:
    out, a = [], 0
    for n in sizes:
        out.append(a)
        a += n
    return out
