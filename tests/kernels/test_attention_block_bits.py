"""``attn_front`` / ``attn_back`` on the CPU give the bits of their arithmetic spelled out one float32 operation at
a time (numpy, no fused multiply-add): ``small_linear``'s eight lane sums over the column chunks added in lane
order, then the tail columns; ``rms_norm``'s eight-lane or sequential sum of squares; the rotary pairs. The shapes
go past the engine's (tokens that are not a multiple of two, one token, widths under eight and not multiples of
eight or sixteen, other head counts and groups, zeros of both signs, bfloat16 inputs and pools)."""

from __future__ import annotations

import deepseek_kernels as ops
import numpy as np
import pytest
import torch

F32 = np.float32


def lane_linear(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``x @ w.T`` with small_linear's summation order."""
    n = x.shape[1]
    dot = np.zeros((x.shape[0], w.shape[0]), F32)
    k0 = 0
    if n >= 8:
        acc = np.zeros((x.shape[0], w.shape[0], 8), F32)
        for k in range(0, n // 8 * 8, 8):
            acc = acc + x[:, None, k:k + 8] * w[None, :, k:k + 8]
        for lane in range(8):
            dot = dot + acc[..., lane]
        k0 = n // 8 * 8
    for k in range(k0, n):
        dot = dot + x[:, None, k] * w[None, :, k]
    return dot


def lane_rms_norm(x: np.ndarray, w: np.ndarray | None, eps: float) -> np.ndarray:
    """rms_norm over the last axis: eight lane sums of squares (width >= 16) or one running sum."""
    d = x.shape[-1]
    s = np.zeros(x.shape[:-1], F32)
    d0 = 0
    if d >= 16:
        acc = np.zeros(x.shape[:-1] + (8,), F32)
        for k in range(0, d // 8 * 8, 8):
            acc = acc + x[..., k:k + 8] * x[..., k:k + 8]
        for lane in range(8):
            s = s + acc[..., lane]
        d0 = d // 8 * 8
    for k in range(d0, d):
        s = s + x[..., k] * x[..., k]
    inv = F32(1.0) / np.sqrt(s / F32(d) + F32(eps))
    out = x * inv[..., None]
    return out if w is None else w * out


def lane_rope(x: np.ndarray, c: np.ndarray, s: np.ndarray) -> np.ndarray:
    """x [T, inner, D], tables [T, R]: the trailing R channels rotated pair by pair."""
    r = c.shape[-1]
    out = x.copy()
    xe = x[..., x.shape[-1] - r:]
    even, odd = xe[..., 0::2], xe[..., 1::2]
    c, s = c[:, None], s[:, None]
    out[..., x.shape[-1] - r::2] = even * c[..., 0::2] + odd * s[..., 0::2]
    out[..., x.shape[-1] - r + 1::2] = odd * c[..., 1::2] + even * s[..., 1::2]
    return out


def tables(g: torch.Generator, t: int, r: int):
    angles = torch.rand(t, r // 2, generator=g) * 6
    return angles.cos().repeat_interleave(2, -1), torch.stack((-angles.sin(), angles.sin()), -1).flatten(-2)


def signed_zeros(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """x with about a tenth of its entries +0 and a tenth -0."""
    u = torch.rand(x.shape, generator=g)
    return torch.where(u < 0.1, torch.zeros(()), torch.where(u < 0.2, torch.tensor(-0.0), x))


def same_bits(got: torch.Tensor, want: np.ndarray) -> None:
    assert got.dtype == torch.float32
    assert np.array_equal(got.numpy().view(np.int32), want.astype(F32).view(np.int32))


FRONT_SHAPES = [  # tokens, qa, heads, head_dim, rotated, idx_heads, idx_dim
    (1, 16, 4, 32, 8, 4, 16), (2, 16, 4, 32, 8, 0, 0), (7, 24, 3, 16, 16, 2, 16), (5, 12, 2, 12, 4, 3, 10),
    (3, 5, 1, 8, 8, 1, 8), (33, 40, 5, 24, 6, 2, 24), (4, 16, 2, 20, 2, 0, 0),
]


@pytest.mark.parametrize("t,qa,h,d,r,hi,di", FRONT_SHAPES)
def test_attn_front_is_the_lane_arithmetic(t: int, qa: int, h: int, d: int, r: int, hi: int, di: int) -> None:
    g = torch.Generator().manual_seed(t * 1000 + qa * 10 + d)
    extra = 6
    width = qa + d + 2 * extra + 3
    proj = signed_zeros(torch.randn(t, width, generator=g), g)
    qn, kvn = torch.rand(qa, generator=g) + 0.5, torch.rand(d, generator=g) + 0.5
    wq_b = signed_zeros(torch.randn(h * d, qa, generator=g) * 0.3, g)
    idx_w = signed_zeros(torch.randn(hi * di, qa, generator=g) * 0.3, g) if hi else None
    c, s = tables(g, t, r)
    slots = torch.randperm(40, generator=g)[:t]
    for pool_dtype in (torch.float32, torch.bfloat16):
        pools = [torch.zeros(40, d, dtype=pool_dtype), torch.zeros(40, extra, dtype=pool_dtype),
                 torch.zeros(40, extra + 1, dtype=pool_dtype)]
        offsets = [qa + d, qa + d + extra]
        q_latent, q, qi = ops.attn_front(proj, qn, 1e-6, wq_b, h, d, 1e-5, kvn, 1e-6, c, s, slots, pools[0], offsets,
                                         pools[1:], idx_w, hi, di)
        p, cn, sn = proj.numpy(), c.numpy(), s.numpy()
        want_latent = lane_rms_norm(p[:, :qa], qn.numpy(), 1e-6)
        same_bits(q_latent, want_latent)
        raw = lane_linear(want_latent, wq_b.numpy()).reshape(t, h, d)
        same_bits(q, lane_rope(lane_rms_norm(raw, None, 1e-5), cn, sn))
        kv = lane_rope(lane_rms_norm(p[:, qa:qa + d], kvn.numpy(), 1e-6)[:, None], cn, sn)[:, 0]
        assert torch.equal(pools[0][slots], torch.from_numpy(kv).to(pool_dtype))
        assert torch.equal(pools[1][slots], proj[:, qa + d:qa + d + extra].to(pool_dtype))
        assert torch.equal(pools[2][slots], proj[:, qa + d + extra:qa + d + 2 * extra + 1].to(pool_dtype))
        if hi:
            same_bits(qi, lane_rope(lane_linear(want_latent, idx_w.numpy()).reshape(t, hi, di), cn, sn))
        else:
            assert qi.numel() == 0


def test_attn_front_bfloat16_input_is_the_float32_bits_rounded() -> None:
    g = torch.Generator().manual_seed(11)
    t, qa, h, d, r = 9, 16, 4, 32, 8
    proj = torch.randn(t, qa + d, generator=g).bfloat16()
    qn, kvn = torch.rand(qa, generator=g) + 0.5, torch.rand(d, generator=g) + 0.5
    wq_b = torch.randn(h * d, qa, generator=g) * 0.3
    c, s = tables(g, t, r)
    slots = torch.arange(t)
    got = ops.attn_front(proj, qn, 1e-6, wq_b, h, d, 1e-6, kvn, 1e-6, c, s, slots, torch.zeros(t, d), [], [], None, 0, 0)
    want = ops.attn_front(proj.float(), qn, 1e-6, wq_b, h, d, 1e-6, kvn, 1e-6, c, s, slots, torch.zeros(t, d), [], [],
                          None, 0, 0)
    for a, b in zip(got[:2], want[:2]):
        assert a.dtype == torch.bfloat16 and torch.equal(a, b.bfloat16())


BACK_SHAPES = [  # tokens, heads, head_dim, rotated, groups, rank, hidden
    (1, 4, 32, 8, 2, 16, 32), (2, 4, 32, 8, 2, 16, 32), (5, 4, 32, 8, 2, 16, 24), (3, 3, 12, 4, 3, 5, 7),
    (17, 2, 16, 16, 1, 20, 33), (6, 4, 6, 2, 4, 3, 9),
]


@pytest.mark.parametrize("t,h,d,r,groups,rank,hidden", BACK_SHAPES)
def test_attn_back_is_the_lane_arithmetic(t: int, h: int, d: int, r: int, groups: int, rank: int, hidden: int) -> None:
    g = torch.Generator().manual_seed(t * 100 + d + groups)
    x = signed_zeros(torch.randn(t, h, d, generator=g), g)
    c, s = tables(g, t, r)
    wo_a = signed_zeros(torch.randn(groups * rank, h * d // groups, generator=g) * 0.3, g)
    wo_b = signed_zeros(torch.randn(hidden, groups * rank, generator=g) * 0.3, g)
    got = ops.attn_back(x, c, s, wo_a, groups, wo_b)
    rot = lane_rope(x.numpy(), c.numpy(), s.numpy()).reshape(t, groups, -1)
    wa = wo_a.numpy().reshape(groups, rank, -1)
    y = np.concatenate([lane_linear(rot[:, i], wa[i]) for i in range(groups)], axis=1)
    same_bits(got, lane_linear(y, wo_b.numpy()))
    half = ops.attn_back(x.bfloat16(), c, s, wo_a, groups, wo_b)
    assert half.dtype == torch.bfloat16
    assert torch.equal(half, ops.attn_back(x.bfloat16().float(), c, s, wo_a, groups, wo_b).bfloat16())
