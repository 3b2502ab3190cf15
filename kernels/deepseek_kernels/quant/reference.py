"""PyTorch definitions of the quantised weight formats.

* FP8: e4m3 weights with one float scale per ``bo x bi`` block: ``w[i, j] * scale[i // bo, j // bi]``.
* MXFP4: each byte holds two e2m1 values (low nibble = the even input); one e8m0 exponent
  (``2 ** (e - 127)``, 255 = NaN) per 32 consecutive inputs of a row.
"""

from __future__ import annotations

import torch

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def e8m0_reference(scale: torch.Tensor) -> torch.Tensor:
    e = scale.view(torch.uint8).to(torch.int32)
    out = torch.pow(torch.tensor(2.0), (e - 127).float())
    return torch.where(e == 255, torch.full_like(out, float("nan")), out)


def dequantize_fp8_blocks_reference(w: torch.Tensor, scale: torch.Tensor, bo: int, bi: int) -> torch.Tensor:
    s = scale.float().repeat_interleave(bo, 0)[: w.shape[0]].repeat_interleave(bi, 1)[:, : w.shape[1]]
    return w.float() * s


def dequantize_mxfp4_reference(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    rows = packed.shape[0]
    b = packed.view(torch.uint8).long()
    lut = torch.tensor(E2M1, dtype=torch.float32, device=packed.device)
    values = torch.stack((lut[b & 0xF], lut[b >> 4]), dim=-1).reshape(rows, -1)
    return values * e8m0_reference(scale).to(packed.device).repeat_interleave(32, dim=1)


def _scales(scale: torch.Tensor) -> torch.Tensor:
    if scale.dtype in (torch.uint8, getattr(torch, "float8_e8m0fnu", torch.uint8)):
        return e8m0_reference(scale)
    return scale.float()


def fp8_gemm_reference(a, a_scale, b, b_scale) -> torch.Tensor:
    """``dequant(a) @ dequant(b).T``: ``a`` e4m3 ``[M, K]`` with one scale per row and 128 inputs, ``b`` e4m3
    ``[N, K]`` with one scale per 128 x 128 block; float32 ``[M, N]``."""
    da = dequantize_fp8_blocks_reference(a, _scales(a_scale), 1, 128)
    return da @ dequantize_fp8_blocks_reference(b, b_scale, 128, 128).T


def mxfp4_gemm_reference(a, a_scale, b, b_scale) -> torch.Tensor:
    """``dequant(a) @ dequant(b).T``: ``a`` e4m3 ``[M, K]`` with one e8m0 scale per row and 32 inputs, ``b``
    MXFP4 ``[N, K / 2]`` bytes with one e8m0 scale per row and 32 inputs; float32 ``[M, N]``."""
    da = dequantize_fp8_blocks_reference(a, _scales(a_scale), 1, 32)
    return da @ dequantize_mxfp4_reference(b, b_scale).T
