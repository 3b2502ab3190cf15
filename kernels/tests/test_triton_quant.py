"""The block-scaled GEMM kernels (TMA tensor descriptors, FP8 / MXFP4) under the Triton interpreter against
their references (a file of their own: they need Triton's host-side tensor descriptors, which the other
kernels, also run under triton-ascend's older interpreter, do not use)."""

from __future__ import annotations

import pytest
import torch
from deepseek_kernels.quant.reference import fp8_gemm_reference, mxfp4_gemm_reference
from deepseek_kernels.quant.triton import fp8_gemm_triton, mxfp4_gemm_triton


def gen(seed):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("m,n,k", [(5, 130, 256), (130, 128, 128)])
def test_fp8_gemm(m, n, k) -> None:
    g = gen(m + n)
    a = (torch.randn(m, k, generator=g) * 3).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, generator=g) * 3).to(torch.float8_e4m3fn)
    a_scale = torch.rand(m, k // 128, generator=g) + 0.1
    b_scale = torch.rand(-(-n // 128), k // 128, generator=g) + 0.1
    got = fp8_gemm_triton(a, a_scale, b, b_scale)
    torch.testing.assert_close(got, fp8_gemm_reference(a, a_scale, b, b_scale), atol=1e-3, rtol=1e-5)


@pytest.mark.parametrize("m,n,k", [(5, 130, 256)])
def test_mxfp4_gemm(m, n, k) -> None:
    g = gen(m)
    a = (torch.randn(m, k, generator=g) * 3).to(torch.float8_e4m3fn)
    a_exp = torch.randint(120, 130, (m, k // 32), dtype=torch.uint8, generator=g)
    packed = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=g)
    b_exp = torch.randint(120, 130, (n, k // 32), dtype=torch.uint8, generator=g)
    got = mxfp4_gemm_triton(a, a_exp, packed, b_exp)
    torch.testing.assert_close(got, mxfp4_gemm_reference(a, a_exp, packed, b_exp), atol=1e-3, rtol=1e-5)
