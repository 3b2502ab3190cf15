"""Quantised weights: dequantisation and the two block-scaled GEMMs of DeepSeek checkpoints.

* ``dequantize_fp8_blocks(w, scale, bo, bi)``, ``dequantize_mxfp4(packed, scale)``.
* ``fp8_gemm(a, a_scale, b, b_scale)``: e4m3 activations (one scale per row and 128 inputs) times e4m3
  weights (one scale per 128 x 128 block), float32 out.
* ``mxfp4_gemm(a, a_scale, b, b_scale)``: e4m3 activations times MXFP4 expert weights, e8m0 scales per 32.

CPU: ``cpu.cpp`` (lookup-table dequantisation, then one float32 GEMM). CUDA: ``triton.py`` — TMA
tensor-descriptor loads, ``tl.dot`` on e4m3 tiles with the scales applied per K block (``tcgen05.mma`` on
SM100, ``wgmma`` on SM90) and ``tl.dot_scaled`` for MXFP4 (block-scaled MMA on SM100).
"""

from __future__ import annotations

import torch

from .._registry import device_impl, entry_point, fake, op
from .reference import (
    dequantize_fp8_blocks_reference,
    dequantize_mxfp4_reference,
    fp8_gemm_reference,
    mxfp4_gemm_reference,
)

_fp8, _fp4 = op("dequantize_fp8_blocks"), op("dequantize_mxfp4")
_fp8_gemm, _fp4_gemm = op("fp8_gemm"), op("mxfp4_gemm")


@fake("dequantize_fp8_blocks")
def _(w, scale, bo, bi):
    return w.new_empty(w.shape, dtype=torch.float32)


@fake("dequantize_mxfp4")
def _(packed, scale):
    return packed.new_empty(packed.shape[0], packed.shape[1] * 2, dtype=torch.float32)


@fake("fp8_gemm")
def _(a, a_scale, b, b_scale):
    return a.new_empty(a.shape[0], b.shape[0], dtype=torch.float32)


@fake("mxfp4_gemm")
def _(a, a_scale, b, b_scale):
    return a.new_empty(a.shape[0], b.shape[0], dtype=torch.float32)


def _fp8_gemm_accelerator(a, a_scale, b, b_scale):
    from .triton import fp8_gemm_triton

    return fp8_gemm_triton(a, a_scale, b, b_scale)


def _fp4_gemm_accelerator(a, a_scale, b, b_scale):
    from .triton import mxfp4_gemm_triton

    return mxfp4_gemm_triton(a, a_scale, b, b_scale)


device_impl("dequantize_fp8_blocks", dequantize_fp8_blocks_reference, "PyTorch composition")
device_impl("dequantize_mxfp4", dequantize_mxfp4_reference, "PyTorch composition")
device_impl("fp8_gemm", _fp8_gemm_accelerator, "triton (TMA + tcgen05 / wgmma)", devices=("CUDA",))
device_impl("mxfp4_gemm", _fp4_gemm_accelerator, "triton (TMA + dot_scaled)", devices=("CUDA",))


dequantize_fp8_blocks = entry_point("dequantize_fp8_blocks", dequantize_fp8_blocks_reference)
dequantize_mxfp4 = entry_point("dequantize_mxfp4", dequantize_mxfp4_reference)
fp8_gemm = entry_point("fp8_gemm", fp8_gemm_reference)
mxfp4_gemm = entry_point("mxfp4_gemm", mxfp4_gemm_reference)


__all__ = ["dequantize_fp8_blocks", "dequantize_mxfp4", "fp8_gemm", "mxfp4_gemm", "dequantize_fp8_blocks_reference",
           "dequantize_mxfp4_reference", "fp8_gemm_reference", "mxfp4_gemm_reference"]
