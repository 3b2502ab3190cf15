"""``wo_linear`` / ``wo_experts``' Triton kernel under the interpreter against the references, every format."""

from __future__ import annotations

import pytest
import torch
from deepseek_kernels.weight_only import dequantize_packed, pack, stack_experts, stack_rows
from deepseek_kernels.weight_only.reference import wo_experts_reference, wo_linear_reference
from deepseek_kernels.weight_only.triton import wo_experts_triton, wo_linear_triton

FORMATS = ("bf16", "int8", "fp8", "mxfp4")


def stored(fmt, n, k, g):
    if fmt == "bf16":
        return torch.randn(n, k, generator=g).to(torch.bfloat16), None
    if fmt == "int8":
        return torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8), torch.rand(n, 1, generator=g) + 0.5
    if fmt == "fp8":
        q = (torch.randn(n, k, generator=g) * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
        e = torch.randint(118, 132, (-(-n // 32), -(-k // 32)), generator=g, dtype=torch.int32).to(torch.uint8)
        return q, e.view(torch.float8_e8m0fnu)
    codes = torch.randint(0, 256, (n, k // 2), generator=g, dtype=torch.int32).to(torch.uint8).view(torch.int8)
    return codes, torch.randint(118, 132, (n, k // 32), generator=g, dtype=torch.int32).to(torch.uint8)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("m,n,k", [(3, 70, 96)])
def test_linear(fmt, m, n, k):
    g = torch.Generator().manual_seed(n + k)
    p = pack(*stored(fmt, n, k, g), 32)
    x = torch.randn(m, k, generator=g)
    got, want = wo_linear_triton(x, *p.args()), wo_linear_reference(x, *p.args())
    bound = 2 * k * 2.0**-24 * (x.abs() @ dequantize_packed(*p.args()).abs().T) + 1e-30
    assert bool(((got - want).abs() <= bound).all())


@pytest.mark.parametrize("fmt", FORMATS)
def test_experts(fmt):
    g = torch.Generator().manual_seed(5)
    e, h, inter, k, t = 6, 64, 32, 2, 5
    w13 = stack_experts([stack_rows([pack(*stored(fmt, inter, h, g), 32), pack(*stored(fmt, inter, h, g), 32)])
                         for _ in range(e)])
    w2 = stack_experts([pack(*stored(fmt, h, inter, g), 32) for _ in range(e)])
    x = torch.randn(t, h, generator=g) * 0.05
    experts = torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(t)])
    weights = torch.rand(t, k, generator=g)
    args = (x, experts, weights, w13.weight, w13.scale, w2.weight, w2.scale, w13.fmt, w13.block_rows,
            w13.block_cols, w2.block_rows, w2.block_cols, 10.0)
    got, want = wo_experts_triton(*args), wo_experts_reference(*args)
    assert float((got - want).abs().max()) <= 1e-5 * float(want.abs().max())
