"""Triton block-scaled GEMMs for NVIDIA SM100 (and SM90).

Tiles are read with TMA (host-side tensor descriptors; out-of-bounds rows and columns read as zero, which
handles the edge tiles). ``fp8_gemm``: per K block of 128, ``tl.dot`` of two e4m3 tiles into float32
(``tcgen05.mma ... kind::f8f6f4`` on SM100), then the partial product is scaled by the activation row scales
and the weight block scale and accumulated in registers, as DeepSeek's FP8 GEMMs do. ``mxfp4_gemm``:
``tl.dot_scaled`` on e4m3 activations and e2m1 weights with their e8m0 scales (block-scaled MMA on SM100).

``UPCAST`` (the interpreter) dequantises the tiles to float32 in the kernel and uses a plain ``tl.dot``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._triton_common import interpreting

FP8_CONFIGS = [
    triton.Config({"BLOCK_M": bm}, num_warps=w, num_stages=s)
    for bm, w, s in ((128, 4, 3), (128, 8, 4), (64, 4, 4))
]


@triton.jit
def fp8_gemm_kernel(a_desc, b_desc, a_scale_ptr, b_scale_ptr, c_ptr, M, N, K, stride_as, stride_bs,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr):
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    rows = off_m + tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, kb * BLOCK_K])
        b = b_desc.load([off_n, kb * BLOCK_K])
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        part = tl.dot(a, b.T)
        sa = tl.load(a_scale_ptr + rows * stride_as + kb, mask=rows < M, other=0.0)
        sb = tl.load(b_scale_ptr + (off_n // 128) * stride_bs + kb)
        acc += part * (sa[:, None] * sb)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _e8m0(s):
    return tl.exp2(s.to(tl.float32) - 127.0)


@triton.jit
def _e2m1(n):
    """e2m1 nibble -> float32: sign, 2 exponent bits, 1 mantissa bit (0, 0.5, 1, 1.5, 2, 3, 4, 6)."""
    e = (n >> 1) & 3
    m = (n & 1).to(tl.float32)
    mag = tl.where(e == 0, m * 0.5, (1.0 + m * 0.5) * tl.exp2(e.to(tl.float32) - 1.0))
    return tl.where((n & 8) != 0, -mag, mag)


@triton.jit
def mxfp4_gemm_kernel(a_desc, b_desc, a_scale_ptr, b_scale_ptr, c_ptr, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr):
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    rows = off_m + tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, BLOCK_N)
    G: tl.constexpr = BLOCK_K // 32
    groups = tl.arange(0, G)
    KG = K // 32
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, kb * BLOCK_K])  # e4m3 [BM, BK]
        b = b_desc.load([off_n, kb * (BLOCK_K // 2)])  # packed e2m1 pairs [BN, BK / 2]
        gm = (kb * G + groups) < KG
        sa = tl.load(a_scale_ptr + rows[:, None] * KG + kb * G + groups[None, :],
                     mask=(rows[:, None] < M) & gm[None, :], other=127)
        sb = tl.load(b_scale_ptr + cols[:, None] * KG + kb * G + groups[None, :],
                     mask=(cols[:, None] < N) & gm[None, :], other=127)
        if UPCAST:
            af = tl.reshape(tl.reshape(a.to(tl.float32), (BLOCK_M, G, 32)) * _e8m0(sa)[:, :, None],
                            (BLOCK_M, BLOCK_K))
            bv = tl.reshape(tl.join(_e2m1(b & 15), _e2m1(b >> 4)), (BLOCK_N, BLOCK_K))
            bf = tl.reshape(tl.reshape(bv, (BLOCK_N, G, 32)) * _e8m0(sb)[:, :, None], (BLOCK_N, BLOCK_K))
            acc += tl.dot(af, bf.T, input_precision="ieee")
        else:
            acc = tl.dot_scaled(a, sa, "e4m3", b.T, sb, "e2m1", acc)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


def _byte_scales(scale: torch.Tensor) -> torch.Tensor:
    return scale.view(torch.uint8).contiguous() if scale.element_size() == 1 else scale


def fp8_gemm_triton(a, a_scale, b, b_scale, block_m: int = 128, num_warps: int = 4, num_stages: int = 3):
    from triton.tools.tensor_descriptor import (
        TensorDescriptor,  # (Triton >= 3.4; imported when launched)
    )

    m, k = a.shape
    n = b.shape[0]
    if k % 16:
        raise ValueError("deepseek_kernels::fp8_gemm: K must be a multiple of 16 (TMA row alignment)")
    a, b = a.contiguous(), b.contiguous()
    a_scale, b_scale = a_scale.float().contiguous(), b_scale.float().contiguous()
    out = torch.empty(m, n, dtype=torch.float32, device=a.device)
    a_desc = TensorDescriptor.from_tensor(a, [block_m, 128])
    b_desc = TensorDescriptor.from_tensor(b, [128, 128])
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, 128))
    fp8_gemm_kernel[grid](a_desc, b_desc, a_scale, b_scale, out, m, n, k, a_scale.stride(0), b_scale.stride(0),
                          BLOCK_M=block_m, BLOCK_N=128, BLOCK_K=128, UPCAST=interpreting(), num_warps=num_warps,
                          num_stages=num_stages)
    return out


def mxfp4_gemm_triton(a, a_scale, b, b_scale, block_m: int = 128, block_n: int = 128, num_warps: int = 4):
    from triton.tools.tensor_descriptor import TensorDescriptor

    m, k = a.shape
    n = b.shape[0]
    if k % 128:
        raise ValueError("deepseek_kernels::mxfp4_gemm: K must be a multiple of 128")
    a, b = a.contiguous(), b.view(torch.uint8).contiguous()
    out = torch.empty(m, n, dtype=torch.float32, device=a.device)
    a_desc = TensorDescriptor.from_tensor(a, [block_m, 128])
    b_desc = TensorDescriptor.from_tensor(b, [block_n, 64])
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    mxfp4_gemm_kernel[grid](a_desc, b_desc, _byte_scales(a_scale), _byte_scales(b_scale), out, m, n, k,
                            BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=128, UPCAST=interpreting(),
                            num_warps=num_warps)
    return out
