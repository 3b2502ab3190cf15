"""Triton weight-only GEMV: one program per (row of x, block of ``BLOCK_N`` outputs), weights decoded in registers.

The weights are read in their packed format (``FMT`` constexpr: 0 bf16, 1 int8, 2 fp8 e4m3 bits, 3 MXFP4 pairs
with e8m0 scales) and each is dequantised as the reference does (decoded value times its block's scale, float32);
the products are summed in ``BLOCK_K`` column blocks. Decode is memory-bound (one row of x against a few MB of
weights), so no tensor-core tile is used: the weight bytes are the cost. ``wo_experts`` runs the same kernel with
a per-row expert index (``e_ptr``): its rows are the (token, slot) pairs of the step, gathered by expert, so only
the picked experts' weights are read; the SwiGLU between the projections and the weighted sum in increasing
expert order are elementwise PyTorch.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .reference import MXFP4


@triton.jit
def _e2m1(code):
    """e2m1 codes (int32, 0..15) -> float32 values."""
    e = (code >> 1) & 3
    m = (code & 1).to(tl.float32)
    mag = tl.where(e == 0, 0.5 * m, tl.exp2((e - 1).to(tl.float32)) * (1.0 + 0.5 * m))
    return tl.where((code & 8) != 0, -mag, mag)


@triton.jit
def wo_gemv_kernel(x_ptr, xrow_ptr, e_ptr, w_ptr, s_ptr, out_ptr, N, K, KS, expert_w, expert_s, BR, BC,
                   FMT: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    block = tl.program_id(1)
    xrow = tl.load(xrow_ptr + row)
    e = tl.load(e_ptr + row)
    outs = block * BLOCK_N + tl.arange(0, BLOCK_N)
    out_mask = outs < N
    w_base = w_ptr + e * expert_w
    s_base = s_ptr + e * expert_s
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        col_mask = cols < K
        mask = out_mask[:, None] & col_mask[None, :]
        x = tl.load(x_ptr + xrow * K + cols, mask=col_mask, other=0.0).to(tl.float32)
        if FMT == 0:
            w = tl.load(w_base + outs[:, None] * K + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        elif FMT == 3:
            half = k0 // 2 + tl.arange(0, BLOCK_K // 2)
            hmask = out_mask[:, None] & (half[None, :] < K // 2)
            b = tl.load(w_base + outs[:, None] * (K // 2) + half[None, :], mask=hmask, other=0).to(tl.int32)
            w = tl.join(_e2m1(b & 15), _e2m1((b >> 4) & 15)).reshape(BLOCK_N, BLOCK_K)
            ex = tl.load(s_base + outs[:, None] * KS + cols[None, :] // 32, mask=mask, other=127).to(tl.int32)
            scale = tl.where(ex == 255, float("nan"), tl.exp2((ex - 127).to(tl.float32)))
            w = tl.where(mask, w * scale, 0.0)
        else:
            raw = tl.load(w_base + outs[:, None] * K + cols[None, :], mask=mask, other=0)
            if FMT == 1:
                w = raw.to(tl.float32)
            else:
                b = raw.to(tl.int32)
                mag = ((b & 0x7F) << 20).to(tl.float32, bitcast=True) * 1.329227995784916e36  # 2^120
                w = tl.where((b & 0x80) != 0, -mag, mag)
            scale = tl.load(s_base + (outs[:, None] // BR) * KS + cols[None, :] // BC, mask=mask, other=0.0)
            w = w * scale
        acc += tl.sum(w * x[None, :], axis=1)
    tl.store(out_ptr + row * N + outs, acc, mask=out_mask)


def _gemv(x: torch.Tensor, rows: torch.Tensor, experts: torch.Tensor, weight: torch.Tensor,
          scale: torch.Tensor | None, fmt: int, block_rows: int, block_cols: int, lead: int) -> torch.Tensor:
    """``out[r] = dequant(weight[experts[r]]) @ x[rows[r]]`` (``lead`` = 1 for stacked experts)."""
    n = weight.shape[lead]
    k = weight.shape[lead + 1] * (2 if fmt == MXFP4 else 1)
    w = weight.contiguous()
    s = scale.contiguous() if scale is not None else torch.zeros(1, device=x.device)
    ks = k // 32 if fmt == MXFP4 else -(-k // block_cols)
    expert_w = w[0].numel() if lead else 0
    expert_s = s[0].numel() if lead and scale is not None else 0
    out = torch.empty(rows.numel(), n, dtype=torch.float32, device=x.device)
    if rows.numel() and n:
        block_n = 64
        wo_gemv_kernel[(rows.numel(), triton.cdiv(n, block_n))](
            x, rows, experts, w, s, out, n, k, ks, expert_w, expert_s, block_rows, block_cols,
            FMT=fmt, BLOCK_N=block_n, BLOCK_K=64)
    return out


def wo_linear_triton(x, weight, scale, fmt, block_rows, block_cols):
    k = x.shape[-1]
    flat = x.reshape(-1, k).to(torch.float32).contiguous()
    m = flat.shape[0]
    idx = torch.arange(m, device=x.device)
    out = _gemv(flat, idx, torch.zeros_like(idx), weight, scale, fmt, block_rows, block_cols, 0)
    return out.reshape(*x.shape[:-1], -1).to(x.dtype)


def wo_experts_triton(x, experts, weights, w13, s13, w2, s2, fmt, block_rows, block_cols, down_block_rows,
                      down_block_cols, limit):
    t, k = experts.shape
    xf = x.to(torch.float32).contiguous()
    flat = experts.reshape(-1)
    order = torch.argsort(flat * k + torch.arange(k, device=x.device).repeat(t), stable=True)
    pair_expert = flat[order].contiguous()
    pair_token = (order // k).contiguous()
    up = _gemv(xf, pair_token, pair_expert, w13, s13, fmt, block_rows, block_cols, 1)
    inter = up.shape[1] // 2
    act = torch.nn.functional.silu(up[:, :inter].clamp(max=limit)) * up[:, inter:].clamp(min=-limit, max=limit)
    act = act.contiguous()
    y = _gemv(act, torch.arange(act.shape[0], device=x.device), pair_expert, w2, s2, fmt, down_block_rows,
              down_block_cols, 1)
    y = y * weights.reshape(-1)[order].to(torch.float32)[:, None]
    # each token adds its experts in increasing expert order, from zero (the pairs are sorted by expert)
    out = torch.zeros_like(xf)
    # rank of each pair among its token's pairs (which come in increasing expert order)
    by_token = torch.argsort(pair_token, stable=True)
    counts = torch.bincount(pair_token, minlength=t)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.empty_like(order)
    slot[by_token] = torch.arange(order.numel(), device=x.device) - starts[pair_token[by_token]]
    for r in range(k):
        sel = slot == r
        out.index_add_(0, pair_token[sel], y[sel])
    return out.to(x.dtype)
