"""Weight-only products (``wo_linear``, ``wo_experts``) on packed bf16 / int8 / FP8 / MXFP4 weights.

The CPU kernel dequantises every weight to the reference's bits (decode, one multiplication by the block scale)
and only sums in another order, so each output is within ``2 K 2^-24 (|x| @ |W|.T)`` of the reference (the bound
the op documents); the packing is exact (checked against the loader's own dequantisation).
"""

from __future__ import annotations

import pytest
import torch
from deepseek_engine.models.quantization import dequantize
from deepseek_kernels.weight_only import (
    FORMATS,
    dequantize_packed,
    pack,
    packed_experts,
    split_rows,
    stack_experts,
    stack_rows,
    wo_experts,
    wo_experts_reference,
    wo_linear,
    wo_linear_reference,
)

torch.set_num_threads(1)


def stored(fmt: str, n: int, k: int, g: torch.Generator, block: int = 128):
    """A random matrix as a checkpoint stores it: (weight, scale or None)."""
    if fmt == "bf16":
        return torch.randn(n, k, generator=g).to(torch.bfloat16), None
    if fmt == "int8":
        return torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8), torch.rand(n, 1, generator=g) + 0.5
    if fmt == "fp8":
        q = (torch.randn(n, k, generator=g) * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
        e = torch.randint(118, 132, (-(-n // block), -(-k // block)), generator=g, dtype=torch.int32).to(torch.uint8)
        return q, e.view(torch.float8_e8m0fnu)
    codes = torch.randint(0, 256, (n, k // 2), generator=g, dtype=torch.int32).to(torch.uint8).view(torch.int8)
    e = torch.randint(118, 132, (n, k // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    return codes, e.view(torch.float8_e8m0fnu)


def bound(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return 2 * w.shape[-1] * 2.0**-24 * (x.abs() @ w.abs().T) + 1e-30


SHAPES = [(1, 40, 64), (2, 7, 32), (3, 130, 256), (5, 17, 96), (9, 33, 160), (32, 64, 1024)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_row_alone_and_among_others_gets_the_same_bits(fmt):
    """Each output sums its own row's products in an order fixed by the widths: a row's result never depends on
    how many rows share the call (1, a tile of 2 / 4 / 8, or the float panels above 8 rows), which the V4.1 path's
    batch invariance relies on."""
    g = torch.Generator().manual_seed(7)
    w, s = stored(fmt, 70, 256, g, block=32)
    p = pack(w, s, 32)
    x = torch.randn(21, 256, generator=g)
    alone = torch.cat([wo_linear(x[i:i + 1], *p.args()) for i in range(21)])
    for rows in (2, 3, 4, 7, 8, 9, 21):
        assert torch.equal(wo_linear(x[:rows], *p.args()), alone[:rows]), rows


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("sizes,block", [([32, 32], 32), ([24, 40], 32), ([16, 16, 16, 16], 128)])
def test_split_rows_keeps_every_weight(fmt, sizes, block):
    """``split_rows`` (a grouped projection's groups): each part dequantises to its rows of the whole, block grids
    kept where the parts start on block edges, one scale row per weight row where they do not."""
    g = torch.Generator().manual_seed(len(sizes) + block)
    w, s = stored(fmt, sum(sizes), 64, g, block=block)
    p = pack(w, s, block)
    whole = dequantize_packed(*p.args())
    parts = split_rows(p, sizes)
    a = 0
    for part, n in zip(parts, sizes):
        assert torch.equal(dequantize_packed(*part.args()), whole[a:a + n])
        a += n
    assert torch.equal(dequantize_packed(*stack_rows(parts).args()), whole)
    with pytest.raises(ValueError):
        split_rows(p, [sizes[0], 1])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_linear_within_the_bound_of_its_reference(fmt, m, n, k):
    g = torch.Generator().manual_seed(m * 1000 + n + k)
    w, s = stored(fmt, n, k, g)
    p = pack(w, s, 128)
    x = torch.randn(m, k, generator=g)
    got, want = wo_linear(x, *p.args()), wo_linear_reference(x, *p.args())
    err = (got - want).abs()
    assert bool((err <= bound(x, dequantize_packed(*p.args()))).all()), float(err.max())


@pytest.mark.parametrize("fmt", ["int8", "fp8", "mxfp4"])
def test_packing_is_exact(fmt):
    g = torch.Generator().manual_seed(7)
    w, s = stored(fmt, 96, 256, g)
    assert torch.equal(dequantize_packed(*pack(w, s, 128).args()), dequantize(w, s, 128))


def test_fp8_blocks_of_32_and_float_scales():
    g = torch.Generator().manual_seed(3)
    q = (torch.randn(70, 96, generator=g) * 64).to(torch.float8_e4m3fn)
    s = torch.rand(3, 3, generator=g) + 0.1
    p = pack(q, s, 32)
    assert (p.block_rows, p.block_cols) == (32, 32)
    assert torch.equal(dequantize_packed(*p.args()), dequantize(q, s, 32))
    x = torch.randn(4, 96, generator=g)
    assert bool(((wo_linear(x, *p.args()) - wo_linear_reference(x, *p.args())).abs()
                 <= bound(x, dequantize_packed(*p.args()))).all())


def test_nan_fp8_codes_are_refused():
    q = torch.zeros(8, 32, dtype=torch.uint8)
    q[0, 0] = 0x7F
    with pytest.raises(ValueError, match="NaN"):
        pack(q.view(torch.float8_e4m3fn), torch.ones(1, 1))


def test_inexact_bf16_packing_is_refused():
    with pytest.raises(ValueError, match="exact"):
        pack(torch.full((2, 8), 1.0 + 2.0**-20))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("tokens", [1, 3, 17])
def test_experts_within_the_bound_of_their_reference(fmt, tokens):
    g = torch.Generator().manual_seed(tokens)
    e, h, inter, k = 8, 64, 32 if fmt != "fp8" else 128, 3
    ups = [stack_rows([pack(*stored(fmt, inter, h, g), 128), pack(*stored(fmt, inter, h, g), 128)]) for _ in range(e)]
    downs = [pack(*stored(fmt, h, inter, g), 128) for _ in range(e)]
    w13, w2 = stack_experts(ups), stack_experts(downs)
    x = torch.randn(tokens, h, generator=g) * 0.05
    experts = torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(tokens)])
    weights = torch.rand(tokens, k, generator=g)
    args = (x, experts, weights, w13.weight, w13.scale, w2.weight, w2.scale, w13.fmt, w13.block_rows,
            w13.block_cols, w2.block_rows, w2.block_cols, 10.0)
    got, want = wo_experts(*args), wo_experts_reference(*args)
    # two projections and SwiGLU: tested (not derived) within 1e-5 of the output's largest magnitude
    assert float((got - want).abs().max()) <= 1e-5 * float(want.abs().max())


def test_experts_read_only_the_experts_picked():
    """An expert no token picks may hold anything: the result does not change."""
    g = torch.Generator().manual_seed(1)
    w13 = stack_experts([stack_rows([pack(*stored("mxfp4", 32, 64, g)), pack(*stored("mxfp4", 32, 64, g))])
                         for _ in range(4)])
    w2 = stack_experts([pack(*stored("mxfp4", 64, 32, g)) for _ in range(4)])
    x, experts, weights = torch.randn(2, 64, generator=g), torch.tensor([[0, 2], [2, 0]]), torch.rand(2, 2)
    call = lambda a, b: packed_experts(x, experts, weights, a, b, 10.0)  # noqa: E731
    before = call(w13, w2)
    w13.weight[1].fill_(0x77)
    w13.scale[3].fill_(255)  # NaN scales
    assert torch.equal(call(w13, w2), before)


def test_bad_arguments_are_errors():
    g = torch.Generator().manual_seed(0)
    p = pack(*stored("mxfp4", 8, 64, g))
    with pytest.raises(RuntimeError, match="wo_linear"):
        wo_linear(torch.randn(2, 63), *p.args())
    with pytest.raises(RuntimeError, match="fmt"):
        wo_linear(torch.randn(2, 64), p.weight, p.scale, 7, 1, 32)
    with pytest.raises(RuntimeError, match="scale"):
        wo_linear(torch.randn(2, 64), p.weight, None, 3, 1, 32)
    up = pack(*stored("mxfp4", 32, 64, g))
    w13 = stack_experts([stack_rows([up, up])] * 2)
    w2 = stack_experts([pack(*stored("mxfp4", 64, 32, g))] * 2)
    with pytest.raises(RuntimeError, match="expert ids"):
        packed_experts(torch.randn(1, 64), torch.tensor([[5]]), torch.ones(1, 1), w13, w2, 10.0)


def test_registration_opcheck():
    g = torch.Generator().manual_seed(0)
    p = pack(*stored("fp8", 16, 128, g))
    torch.library.opcheck(torch.ops.deepseek_kernels.wo_linear, (torch.randn(3, 128), *p.args()))
    w13 = stack_experts([stack_rows([pack(*stored("int8", 8, 32, g)), pack(*stored("int8", 8, 32, g))])] * 3)
    w2 = stack_experts([pack(*stored("int8", 32, 8, g))] * 3)
    torch.library.opcheck(torch.ops.deepseek_kernels.wo_experts,
                          (torch.randn(2, 32), torch.tensor([[0, 2], [1, 2]]), torch.rand(2, 2), w13.weight,
                           w13.scale, w2.weight, w2.scale, w13.fmt, w13.block_rows, w13.block_cols, w2.block_rows,
                           w2.block_cols, 10.0))
