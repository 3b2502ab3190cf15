"""DeepSeek V4 and V4.1 hot operations as ``torch.library`` custom ops (namespace ``deepseek_kernels``).

Each op lives in its own folder: ``reference.py`` (the PyTorch definition it is tested against),
``cpu.h`` / ``cpu.cpp`` (the C++ CPU kernel and its registration, compiled when the package is installed),
``triton.py`` (the Triton kernel for CUDA and Ascend, where the op has one) and ``__init__.py`` (fake /
meta and accelerator registrations, and the Python entry point). The model calls the entry point; PyTorch
dispatches by device. ``DEEPSEEK_KERNELS=reference`` (or :func:`set_mode`) runs the references instead.

Importing this package fails, naming ``deepseek_kernels._C``, when the compiled kernels are missing.
"""

from __future__ import annotations

from . import _registry  # noqa: F401  (loads the compiled kernels first)
from ._mode import mode, reference_mode, set_mode, using
from ._registry import DEVICE_IMPLS
from .attention import sink_attention, sink_attention_paged
from .attention_block import attn_back, attn_front
from .compressor import compress_pool, compress_windows, compress_windows_reference
from .decode_stack import decode_stack
from .engram_gate import engram_gate
from .engram_hash import engram_hash
from .head import GreedyHead
from .hyper_connection import hc_head, hc_merge, hc_mix, hc_step
from .indexer import indexer_scores, indexer_select, top_entries
from .mhc_delayed import mhc_pre_delayed
from .mhc_mixes import mhc_mixes
from .moe import moe_dense_experts, route
from .quant import dequantize_fp8_blocks, dequantize_mxfp4, fp8_gemm, mxfp4_gemm
from .rms_norm import rms_norm
from .rope import rope
from .row_linear import row_linear
from .sampling import sample_tokens
from .step_layout import decode_layout
from .token_bitmask import apply_token_bitmask_
from .v41_compress import v41_compress_pool
from .v41_select import v41_select
from .weight_only import packed_linear, wo_experts, wo_linear

__all__ = [
    "DEVICE_IMPLS", "GreedyHead", "apply_token_bitmask_", "attn_back", "attn_front", "compress_pool", "compress_windows", "compress_windows_reference", "decode_layout", "decode_stack", "dequantize_fp8_blocks", "dequantize_mxfp4",
    "engram_gate", "engram_hash", "mhc_mixes", "mhc_pre_delayed", "v41_compress_pool", "v41_select",
    "fp8_gemm", "mxfp4_gemm", "hc_head", "hc_merge", "hc_mix", "hc_step", "indexer_scores", "indexer_select", "mode", "moe_dense_experts",
    "reference_mode", "rms_norm", "rope", "row_linear", "route", "sample_tokens", "set_mode", "sink_attention",
    "sink_attention_paged", "top_entries", "using", "packed_linear", "wo_experts", "wo_linear",
]
