"""Linear maps whose weight stays in the checkpoint's stored format (FP8 with block scales, MXFP4, int8, bf16).

The loader (:mod:`deepseek_engine.models.loader`, ``keep_packed``) puts a :class:`PackedLinear` where the model
declares an ``nn.Linear`` whose stored weight is quantised, before any float parameter is allocated, and fills it
once with the packed weight (:func:`deepseek_kernels.weight_only.pack`); nothing is ever dequantised. A product is
one ``deepseek_kernels.wo_linear`` call: every dequantised weight has the reference's bits and each output sums
its own row's products in an order fixed by the widths, so a row's result never depends on the other rows of the
call (the property the V4.1 path needs, :mod:`deepseek_engine.layers.row_invariant`).

Code that reads a projection's matrix directly (fused products, plans) takes :func:`matrix` of the module: its
float ``weight`` or its :class:`~deepseek_kernels.weight_only.PackedWeight`, and
:func:`deepseek_engine.layers.row_invariant.linear` multiplies by either.
"""

from __future__ import annotations

import deepseek_kernels as ops
import torch
from deepseek_kernels.weight_only import PackedWeight, split_rows
from torch import nn


class PackedLinear(nn.Module):
    """``x @ dequant(W).T`` with ``W`` kept packed (no bias, like every projection of the model)."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.packed: PackedWeight | None = None

    def set_weight(self, packed: PackedWeight) -> None:
        """Install the packed weight (the loader does, once); its shape must be the module's."""
        if packed.weight.dim() != 2 or (packed.out_features, packed.in_features) != (self.out_features,
                                                                                      self.in_features):
            raise ValueError(f"packed weight of {packed.out_features} x {packed.in_features} does not fit a "
                             f"{self.out_features} x {self.in_features} projection")
        self.packed = packed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is None:
            raise RuntimeError("PackedLinear: no weight installed (load the model with load_model)")
        return ops.packed_linear(x, self.packed)

    def extra_repr(self) -> str:
        fmt = "unset" if self.packed is None else ops.weight_only.FORMATS[self.packed.fmt]
        return f"in_features={self.in_features}, out_features={self.out_features}, fmt={fmt}"


class PackedGroupedOutput(PackedLinear):
    """The grouped output projection (``wo_a``) kept packed: group ``g`` of the heads goes through its own rows.
    The per-group matrices are row ranges of the stored one (:func:`~deepseek_kernels.weight_only.split_rows`),
    taken when the weight is installed."""

    def __init__(self, in_per_group: int, out_features: int, groups: int) -> None:
        super().__init__(in_per_group, out_features)
        self.groups = groups
        self.group_weights: list[PackedWeight] = []

    def set_weight(self, packed: PackedWeight) -> None:
        super().set_weight(packed)
        self.group_weights = split_rows(packed, [self.out_features // self.groups] * self.groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[T, groups, in_per_group]`` -> ``[T, groups * out_per_group]``."""
        return torch.cat([ops.packed_linear(x[:, g], w) for g, w in enumerate(self.group_weights)], dim=-1)


def matrix(module: nn.Module) -> torch.Tensor | PackedWeight:
    """The matrix of a projection: a :class:`PackedLinear`'s packed weight, else the module's ``weight``."""
    return module.packed if isinstance(module, PackedLinear) else module.weight


def group_matrices(module: nn.Module) -> list[torch.Tensor | PackedWeight]:
    """Per-group matrices of a grouped output projection (``wo_a``), float views or packed row ranges."""
    if isinstance(module, PackedGroupedOutput):
        return list(module.group_weights)
    w = module.weight.detach()
    return list(w.view(module.groups, -1, w.shape[-1]).unbind(0))


def is_packed(m: torch.Tensor | PackedWeight) -> bool:
    return isinstance(m, PackedWeight)


__all__ = ["PackedGroupedOutput", "PackedLinear", "group_matrices", "is_packed", "matrix"]
