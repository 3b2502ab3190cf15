"""PyTorch definitions of ``wo_linear`` and ``wo_experts``: the packed weights dequantised exactly to float32, then
float32 products (the definition the kernels are held to).

Packed formats (``fmt``; :mod:`.pack` builds them from checkpoint tensors once, at load time):

===== ========= ========================= ==============================================================
fmt   name      ``weight`` ``[N, K]``     ``scale``
===== ========= ========================= ==============================================================
0     bf16      bfloat16                  none
1     int8      int8                      float32, one per ``block_rows x block_cols`` block (int8
                                          weight-only: ``1 x K``, one per output row)
2     fp8       uint8 (e4m3fn bits)       float32, one per block (DeepSeek: ``128 x 128``; e8m0 scales
                                          are decoded to float32 when packing, exactly)
3     mxfp4     uint8 ``[N, K / 2]``      uint8 e8m0 exponents ``[N, K / 32]`` (``2^(e - 127)``)
                (e2m1 pairs, low nibble
                first)
===== ========= ========================= ==============================================================

A dequantised weight is its decoded value times its block's scale, one float32 multiplication.
"""

from __future__ import annotations

import torch

BF16, INT8, FP8, MXFP4 = 0, 1, 2, 3
FORMATS = ("bf16", "int8", "fp8", "mxfp4")
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def e8m0_values(e: torch.Tensor) -> torch.Tensor:
    """uint8 exponents -> float32 ``2^(e - 127)`` (255: NaN)."""
    out = torch.pow(torch.tensor(2.0, device=e.device), e.to(torch.float32) - 127.0)
    return torch.where(e == 255, torch.full_like(out, float("nan")), out)


def dequantize_packed(weight: torch.Tensor, scale: torch.Tensor | None, fmt: int, block_rows: int,
                      block_cols: int) -> torch.Tensor:
    """A packed matrix ``[..., N, K]`` (leading axes: stacked experts) -> float32."""
    if fmt == BF16:
        return weight.to(torch.float32)
    if fmt == MXFP4:
        b = weight.to(torch.int64)
        lut = torch.tensor(E2M1, dtype=torch.float32, device=weight.device)
        values = torch.stack((lut[b & 15], lut[b >> 4]), dim=-1).flatten(-2)
        return values * e8m0_values(scale).repeat_interleave(32, dim=-1)
    if fmt == FP8:
        values = weight.view(torch.float8_e4m3fn).to(torch.float32)
    elif fmt == INT8:
        values = weight.to(torch.float32)
    else:
        raise ValueError(f"unknown packed format {fmt}")
    n, k = values.shape[-2:]
    s = scale.reshape(*values.shape[:-2], -(-n // block_rows), -(-k // block_cols))
    s = s.repeat_interleave(block_rows, dim=-2)[..., :n, :].repeat_interleave(block_cols, dim=-1)[..., :k]
    return values * s


def wo_linear_reference(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor | None, fmt: int,
                        block_rows: int, block_cols: int) -> torch.Tensor:
    """``x [..., K] @ dequant(weight).T`` -> ``[..., N]`` in ``x``'s dtype (float32 arithmetic)."""
    w = dequantize_packed(weight, scale, fmt, block_rows, block_cols)
    return (x.to(torch.float32) @ w.T).to(x.dtype)


def wo_experts_reference(x: torch.Tensor, experts: torch.Tensor, weights: torch.Tensor, w13: torch.Tensor,
                         s13: torch.Tensor | None, w2: torch.Tensor, s2: torch.Tensor | None, fmt: int,
                         block_rows: int, block_cols: int, down_block_rows: int, down_block_cols: int,
                         limit: float) -> torch.Tensor:
    """Routed experts of the tokens ``x [T, H]``: token ``t`` adds, for each of its experts ``experts[t, j]`` in
    increasing expert order, ``weights[t, j] * down(silu(min(g, limit)) * clamp(u, -limit, limit))`` with
    ``[g, u] = w13[e] @ x[t]`` (``w13 [E, 2 I, H]``: gate rows, then up rows, scale blocks ``block_rows x
    block_cols``; ``w2 [E, H, I]``, blocks ``down_block_rows x down_block_cols``). Only the experts
    some token picks are dequantised. Returns ``x``'s dtype."""
    xf = x.to(torch.float32)
    out = torch.zeros_like(xf)
    inter = w13.shape[1] // 2
    for e in torch.unique(experts).tolist():
        tok, slot = torch.where(experts == e)
        up = xf[tok] @ dequantize_packed(w13[e], None if s13 is None else s13[e], fmt, block_rows, block_cols).T
        gate, val = up[:, :inter], up[:, inter:]
        act = torch.nn.functional.silu(gate.clamp(max=limit)) * val.clamp(min=-limit, max=limit)
        y = act @ dequantize_packed(w2[e], None if s2 is None else s2[e], fmt, down_block_rows, down_block_cols).T
        out.index_add_(0, tok, y * weights[tok, slot, None].to(torch.float32))
    return out.to(x.dtype)
