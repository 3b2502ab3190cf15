"""The CPU kernels that work on groups of tokens (``hc_step``: sixteen tokens per AVX-512 register) give, bit for
bit, the composition of the per-token kernels they replaced, on shapes the benchmark never takes: token counts
that are not multiples of sixteen (one token, partial last groups), ``hc`` other than 4 and widths that are not
multiples of eight or sixteen.

The old ``hc_step`` was ``hc_merge``, ``rms_norm`` of the flattened streams, ``small_linear`` (the mix
projection) and ``hc_mix``, then the weighted ``rms_norm``; all but ``small_linear`` are ops of their own, and
``small_linear``'s order of float32 operations is written out below with single elementwise torch operations
(each one IEEE rounding, like the kernel's lane arithmetic).
"""

from __future__ import annotations

import deepseek_kernels as ops
import pytest
import torch


def small_linear_bits(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x [T, n] @ w [m, n].T`` in ``small_linear``'s order: from n >= 8 on, eight running sums (column k into
    sum k mod 8, below the last multiple of eight) added up in lane order; then the remaining columns one by
    one; every sum starts from +0."""
    t, n = x.shape
    m = w.shape[0]
    prod = x[:, None, :] * w[None, :, :]
    n8 = n - n % 8 if n >= 8 else 0
    total = torch.zeros(t, m)
    if n8:
        acc = torch.zeros(t, m, 8)
        for k in range(0, n8, 8):
            acc = acc + prod[:, :, k:k + 8]
        for lane in range(8):
            total = total + acc[:, :, lane]
    for k in range(n8, n):
        total = total + prod[:, :, k]
    return total


def hc_step_composed(streams, block, post_prev, comb_prev, fn, base, scale, hc, iters, hc_eps, norm_eps, weight,
                     block_eps):
    """``hc_step`` as the chain of per-token kernels it fuses."""
    t = streams.shape[0]
    merged = ops.hc_merge(streams, block, post_prev, comb_prev) if block is not None else streams.clone()
    flat = ops.rms_norm(merged.reshape(t, -1), None, norm_eps)
    _, post, comb, collapsed = ops.hc_mix(small_linear_bits(flat, fn), base, scale, hc, iters, hc_eps, merged)
    return merged, post, comb, ops.rms_norm(collapsed, weight, block_eps)


def hc_inputs(seed: int, tokens: int, hc: int, dim: int):
    g = torch.Generator().manual_seed(seed)
    mix = (2 + hc) * hc
    streams = torch.randn(tokens, hc, dim, generator=g)
    block, post = torch.randn(tokens, dim, generator=g), torch.rand(tokens, hc, generator=g) * 2
    comb = torch.rand(tokens, hc, hc, generator=g)
    fn = torch.randn(mix, hc * dim, generator=g) * 0.2
    base, scale = torch.randn(mix, generator=g) * 0.5, torch.rand(3, generator=g) + 0.5
    weight = 1 + 0.1 * torch.randn(dim, generator=g)
    return streams, block, post, comb, fn, base, scale, weight


@pytest.mark.parametrize(("tokens", "hc", "dim"), [
    (1, 4, 32), (15, 4, 32), (16, 4, 32), (33, 4, 32),  # decode's one token, partial and whole groups
    (17, 4, 5), (9, 4, 12), (20, 4, 40),                # widths not multiples of 8 / 16 (hc * dim >= 16)
    (7, 1, 3), (18, 1, 9), (5, 2, 7), (21, 3, 24),      # hc other than 4; flattened widths under 8, under 16
    (3, 8, 2), (19, 5, 16),
])
@pytest.mark.parametrize("merge", [False, True])
def test_hc_step_is_the_composition_of_the_per_token_kernels(tokens, hc, dim, merge) -> None:
    streams, block, post, comb, fn, base, scale, weight = hc_inputs(300 + 7 * tokens + hc + dim, tokens, hc, dim)
    args = (block, post, comb) if merge else (None, None, None)
    iters = 20 if hc == 4 else 3
    got = ops.hc_step(streams, *args, fn, base, scale, hc, iters, 1e-6, 1e-6, weight, 1e-5)
    want = hc_step_composed(streams, *args, fn, base, scale, hc, iters, 1e-6, 1e-6, weight, 1e-5)
    for a, b in zip(got, want):
        assert a.shape == b.shape and torch.equal(a, b)

