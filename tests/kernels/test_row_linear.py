"""``row_linear``: bit for bit its reference (the fixed order of float32 operations written out in elementwise
tensor operations), and every row the same bits alone as in a call with any number of other rows.

The row-independence check does not lean on this machine's BLAS: each row is computed in a call of its own and
in calls of 2 to 65 rows (sizes on both sides of the blockings a BLAS would pick), with the other rows random,
zero or huge, and the results must be ``torch.equal``.

The CPU kernel has three paths (sixteen-lane vectors holding two outputs each, the AVX-512 one; eight-lane
vectors, the AVX2 one; scalar code), for float32 and bfloat16 weights (read as stored, converted in registers).
``row_linear_path`` forces each: all give the reference's bits, whatever the machine builds natively (a path
wider than the machine's vectors still runs, on narrower instructions, with the same operations), and so does
any split of the outputs across threads.
"""

from __future__ import annotations

import deepseek_kernels as ops
import pytest
import torch
from deepseek_kernels.mhc_mixes.reference import mhc_mixes_reference
from deepseek_kernels.row_linear.reference import row_linear_reference

ROWS = (1, 2, 7, 8, 16, 17, 33, 65)
PATHS = ("avx512", "avx2", "scalar")


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("n", [1, 5, 8, 16, 24, 33, 40, 128])
@pytest.mark.parametrize("m", [1, 7, 8, 19, 64])
def test_row_linear_is_its_reference_bit_for_bit(n, m):
    g = gen(n * 100 + m)
    x, w = torch.randn(9, n, generator=g), torch.randn(m, n, generator=g)
    out = ops.row_linear(x, w)
    assert out.dtype == torch.float32 and out.shape == (9, m)
    assert torch.equal(out, row_linear_reference(x, w))
    torch.testing.assert_close(out, x @ w.T, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("n, m", [(32, 129), (16, 24), (33, 8), (7, 40), (160, 96)])
def test_a_row_never_depends_on_the_other_rows(n, m):
    g = gen(n + m)
    w = torch.randn(m, n, generator=g)
    rows = torch.randn(max(ROWS), n, generator=g)
    alone = torch.cat([ops.row_linear(rows[i:i + 1], w) for i in range(rows.shape[0])])
    for count in ROWS:
        for fill in ("random", "zeros", "huge"):
            batch = rows[:count].clone()
            if fill != "random":
                other = torch.zeros_like(batch) if fill == "zeros" else torch.full_like(batch, 3e30)
                other[0] = batch[0]
                batch = other
            got = ops.row_linear(batch, w)
            assert torch.equal(got[0], alone[0]), (count, fill)
            if fill == "random":
                assert torch.equal(got, alone[:count]), count
    # in reference mode too
    with ops.using("reference"):
        assert torch.equal(ops.row_linear(rows[:17], w), alone[:17])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("path", PATHS)
def test_an_output_never_depends_on_the_other_outputs(dtype, path):
    """Logits at a few token IDs from the gathered head rows are the full row's bits there (the constrained greedy
    step computes a row's logits at its allowed tokens only)."""
    g = gen(11)
    w, x = torch.randn(4099, 32, generator=g).to(dtype), torch.randn(3, 32, generator=g).to(dtype)
    full = by_path(x, w, path)
    assert torch.equal(full, ops.row_linear(x, w))
    for count in (1, 2, 3, 7, 15, 16, 17, 31, 33, 100, 1000):
        ids = torch.randperm(4099, generator=g)[:count].sort().values
        assert torch.equal(by_path(x, w[ids], path), full[:, ids]), (count, path)


def test_row_linear_keeps_shapes_dtypes_and_strides():
    g = gen(3)
    x = torch.randn(2, 3, 40, generator=g)
    w = torch.randn(11, 40, generator=g)
    flat = ops.row_linear(x.reshape(6, 40), w)
    assert torch.equal(ops.row_linear(x, w), flat.view(2, 3, 11))
    wide = torch.randn(6, 80, generator=g)
    assert torch.equal(ops.row_linear(wide[:, 20:60], w), ops.row_linear(wide[:, 20:60].contiguous(), w))
    xb, wb = x.bfloat16(), w.bfloat16()
    out = ops.row_linear(xb, wb)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, row_linear_reference(xb, wb))
    assert ops.row_linear(torch.randn(0, 40), w).shape == (0, 11)
    assert ops.row_linear(x, torch.randn(0, 40)).shape == (2, 3, 0)


def test_row_linear_refuses_mismatched_widths():
    with pytest.raises(RuntimeError, match="row_linear"):
        ops.row_linear(torch.randn(3, 8), torch.randn(4, 9))
    with pytest.raises(RuntimeError, match="row_linear"):
        ops.row_linear(torch.randn(3, 8), torch.randn(8))


@pytest.mark.parametrize("t, hc, d, m", [(1, 4, 32, 24), (9, 4, 7, 24), (33, 1, 16, 3), (17, 8, 5, 80)])
def test_mhc_mixes_is_its_reference_and_row_independent(t, hc, d, m):
    """``mhc_mixes``: ``row_linear``'s sums, bit for bit its reference (and the composition it replaces), every row
    the same alone."""
    g = gen(t + hc + d)
    streams, fn = torch.randn(t, hc, d, generator=g), torch.randn(m, hc * d, generator=g)
    out = ops.mhc_mixes(streams, fn, 1e-6)
    assert out.dtype == torch.float32 and out.shape == (t, m)
    assert torch.equal(out, mhc_mixes_reference(streams, fn, 1e-6))
    x = streams.reshape(t, -1)
    composed = ops.row_linear(x, fn) * torch.rsqrt(ops.row_linear(x.square(), torch.ones(1, hc * d)).squeeze(-1)
                                                   / (hc * d) + 1e-6)[:, None]
    assert torch.equal(out, composed)
    torch.testing.assert_close(out, (x @ fn.T) * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6))
    for i in range(t):
        assert torch.equal(ops.mhc_mixes(streams[i:i + 1], fn, 1e-6)[0], out[i])
    assert torch.equal(ops.mhc_mixes(streams.bfloat16(), fn, 1e-6), mhc_mixes_reference(streams.bfloat16(), fn, 1e-6))


def by_path(x: torch.Tensor, w: torch.Tensor, path: str) -> torch.Tensor:
    return torch.ops.deepseek_kernels.row_linear_path(x, w, path)


@pytest.mark.parametrize("wdtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", [3, 8, 13, 16, 40, 136])
@pytest.mark.parametrize("m", [1, 2, 3, 9, 17, 40])
def test_every_path_is_the_reference_bit_for_bit(wdtype, n, m):
    """Row tiles of 1 to 3 rows and output tiles of 1, 2, 4 and 8 outputs (and their tails) all meet."""
    g = gen(n * 1000 + m)
    x = torch.randn(11, n, generator=g) * 3
    w = torch.randn(m, n, generator=g).to(wdtype)
    want = row_linear_reference(x, w)
    for path in PATHS:
        assert torch.equal(by_path(x, w, path), want), path
    assert torch.equal(ops.row_linear(x, w), want)
    torch.testing.assert_close(ops.row_linear(x, w), x @ w.float().T, atol=1e-4, rtol=1e-4)


def test_bf16_weights_are_read_as_stored_and_match_their_float32_copy():
    """A bfloat16 weight converts exactly to float32: the same sums as its float32 copy, for float32 and
    bfloat16 inputs (the output in the input's dtype)."""
    g = gen(11)
    x, w = torch.randn(37, 72, generator=g), torch.randn(50, 72, generator=g).bfloat16()
    for path in PATHS:
        assert torch.equal(by_path(x, w, path), by_path(x, w.float(), path)), path
    xb = x.bfloat16()
    assert torch.equal(ops.row_linear(xb, w), row_linear_reference(xb, w))
    assert ops.row_linear(xb, w).dtype == torch.bfloat16


def test_the_default_path_is_named_and_unknown_paths_are_refused():
    assert torch.ops.deepseek_kernels.row_linear_default_path() in PATHS
    with pytest.raises(RuntimeError, match="unknown path"):
        by_path(torch.randn(2, 8), torch.randn(3, 8), "avx9000")


def test_threads_split_outputs_without_changing_a_bit():
    """A product large enough to run on several threads gives the bits of one thread, on every path."""
    g = gen(5)
    x, w = torch.randn(64, 520, generator=g), torch.randn(300, 520, generator=g).bfloat16()
    want = row_linear_reference(x, w)
    threads = torch.get_num_threads()
    try:
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            for path in PATHS:
                assert torch.equal(by_path(x, w, path), want), (count, path)
    finally:
        torch.set_num_threads(threads)
