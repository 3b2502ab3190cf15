"""Exact dequantisation of DeepSeek checkpoint formats.

* FP8 (e4m3) weights with block scales: ``weight[i, j] * scale[i // b, j // b]``.
  The block edge ``b`` (128 or 32 in DeepSeek checkpoints) is taken from the
  config's ``weight_block_size`` when it matches, otherwise inferred from the
  two shapes.  Scales are float tensors or e8m0 exponents (``2 ** (e - 127)``,
  stored as ``float8_e8m0fnu`` or raw ``uint8``).
* MXFP4 experts: each byte packs two e2m1 values, low nibble first along the
  input axis; one e8m0 scale per 32 consecutive inputs.
* int8 weight-only: ``weight[i, j] * scale[i]`` with one float scale per output
  row (``[out]`` or ``[out, 1]``).  Told apart from MXFP4 (also a byte tensor)
  by the scale's dtype: MXFP4 scales are e8m0 exponents, int8 scales floats.
"""

from __future__ import annotations

import torch

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
MXFP4_GROUP = 32
_E8M0_DTYPE = getattr(torch, "float8_e8m0fnu", None)
_FP8_DTYPES = tuple(d for d in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e4m3fnuz", None)) if d)


def is_fp8(t: torch.Tensor) -> bool:
    """True for e4m3 float8 tensors."""
    return t.dtype in _FP8_DTYPES


def is_packed_fp4(t: torch.Tensor) -> bool:
    """True for byte tensors that hold packed e2m1 pairs."""
    return t.dtype in (torch.int8, torch.uint8)


def is_int8_channel_scale(weight: torch.Tensor, scale: torch.Tensor) -> bool:
    """True when ``weight`` / ``scale`` are int8 weight-only: an int8 weight with one float scale per row."""
    return (weight.dtype == torch.int8 and scale.is_floating_point() and scale.dtype != _E8M0_DTYPE
            and weight.dim() >= 2 and scale.numel() == weight[..., 0].numel())


def dequantize_int8(weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """int8 weight-only with one float scale per output row -> float32."""
    return weight.to(torch.float32) * scale.to(torch.float32).reshape(*weight.shape[:-1], 1)


def decode_scale(scale: torch.Tensor) -> torch.Tensor:
    """Turn a scale tensor (float, float8_e8m0fnu or uint8 exponents) into float32 multipliers."""
    if _E8M0_DTYPE is not None and scale.dtype == _E8M0_DTYPE:
        scale = scale.view(torch.uint8)
    if scale.dtype in (torch.uint8, torch.int8):
        exps = scale.view(torch.uint8).to(torch.int32)
        out = torch.pow(torch.tensor(2.0, dtype=torch.float32), (exps - 127).to(torch.float32))
        return torch.where(exps == 255, torch.full_like(out, float("nan")), out)
    return scale.to(torch.float32)


def infer_block(shape: tuple[int, ...], scale_shape: tuple[int, ...], hint: int | None = None) -> tuple[int, int]:
    """Find block edges ``(bo, bi)`` such that the scale grid covers the weight."""
    out_dim, in_dim = shape
    so, si = scale_shape
    candidates = ([hint] if hint else []) + [128, 32, 64, 256, 16]
    for b in candidates:
        if -(-out_dim // b) == so and -(-in_dim // b) == si:
            return b, b
    if out_dim % so == 0 and in_dim % si == 0:
        return out_dim // so, in_dim // si
    raise ValueError(f"cannot match FP8 weight {tuple(shape)} with scale grid {tuple(scale_shape)}")


def dequantize_fp8(weight: torch.Tensor, scale: torch.Tensor, block_hint: int | None = None) -> torch.Tensor:
    """Block-scaled e4m3 -> float32 (a single scale or one per output row also work)."""
    if scale.numel() == 1:
        return weight.to(torch.float32) * decode_scale(scale.reshape(()))
    if scale.dim() == 1 and weight.dim() == 2 and scale.numel() == weight.shape[0]:
        scale = scale.reshape(-1, 1)
    if weight.dim() != 2 or scale.dim() != 2:
        raise ValueError(f"FP8 weight and scale must be 2-D, got {tuple(weight.shape)} / {tuple(scale.shape)}")
    bo, bi = infer_block(tuple(weight.shape), tuple(scale.shape), block_hint)
    s = decode_scale(scale)
    s = s.repeat_interleave(bo, dim=0)[: weight.shape[0]].repeat_interleave(bi, dim=1)[:, : weight.shape[1]]
    return weight.to(torch.float32) * s


def dequantize_mxfp4(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Packed e2m1 pairs (low nibble first) with one e8m0 scale per 32 inputs -> float32."""
    if packed.dim() != 2 or scale.dim() != 2:
        raise ValueError(f"MXFP4 weight and scale must be 2-D, got {tuple(packed.shape)} / {tuple(scale.shape)}")
    rows, half = packed.shape
    cols = 2 * half
    if scale.shape[0] != rows or scale.shape[1] * MXFP4_GROUP != cols:
        raise ValueError(
            f"MXFP4 scale {tuple(scale.shape)} does not fit weight of {rows}x{cols} values "
            f"(one scale per {MXFP4_GROUP} inputs)"
        )
    b = packed.view(torch.uint8).to(torch.int64)
    lut = torch.tensor(E2M1_VALUES, dtype=torch.float32)
    values = torch.stack((lut[b & 0xF], lut[b >> 4]), dim=-1).reshape(rows, cols)
    return values * decode_scale(scale).repeat_interleave(MXFP4_GROUP, dim=1)


def dequantize(weight: torch.Tensor, scale: torch.Tensor, block_hint: int | None = None) -> torch.Tensor:
    """Dispatch on the stored weight dtype (FP8 block scales, packed MXFP4, or int8 with float row scales).

    Leading axes beyond the last two (stacked experts) are handled one slice
    at a time; a 4-D byte tensor ``[..., out, groups, 16]`` with scales
    ``[..., out, groups]`` is read as grouped MXFP4 blocks.
    """
    if is_int8_channel_scale(weight, scale):
        return dequantize_int8(weight, scale)
    if is_packed_fp4(weight) and weight.dim() == scale.dim() + 1 and weight.shape[-1] * 2 == MXFP4_GROUP:
        lead = weight.shape[:-2]
        flat = dequantize_mxfp4(weight.reshape(-1, weight.shape[-2] * weight.shape[-1]),
                                scale.reshape(-1, scale.shape[-1]))
        return flat.reshape(*lead, -1)
    if weight.dim() > 2:
        if scale.dim() != weight.dim() or scale.shape[0] != weight.shape[0]:
            raise ValueError(f"stacked weight {tuple(weight.shape)} and scale {tuple(scale.shape)} do not pair up")
        return torch.stack([dequantize(w, s, block_hint) for w, s in zip(weight, scale)])
    if is_fp8(weight):
        return dequantize_fp8(weight, scale, block_hint)
    if is_packed_fp4(weight):
        return dequantize_mxfp4(weight, scale)
    raise ValueError(f"weight of dtype {weight.dtype} has a scale but is neither FP8 nor packed FP4")
