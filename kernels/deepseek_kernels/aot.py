"""Ahead-of-time compilation of every Triton kernel for NVIDIA targets, without a GPU.

``triton.compile`` with an explicit ``GPUTarget`` lowers a kernel through TTIR / TTGIR / LLIR to PTX and runs
the ``ptxas`` that Triton bundles to produce the cubin, so the whole NVIDIA pipeline can be checked on a
machine with no GPU. :data:`SPECS` lists every kernel with the argument types, constexprs and launch
configurations the wrappers use (the autotune configs of the GEMMs included); :func:`check` compiles one and
asserts on the artifacts: the PTX targets ``sm_100a`` (or ``sm_90a``), GEMM-shaped kernels use the
architecture's tensor-core instructions (``tcgen05.mma`` on SM100, ``wgmma`` on SM90) with no ``mma.sync``
fallback, and descriptor loads are TMA (``cp.async.bulk.tensor``).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

ARCHES = {"sm_100a": 100, "sm_90a": 90}


@dataclasses.dataclass(frozen=True)
class Spec:
    """One kernel compilation: ``module:kernel``, its signature, constexprs, options and expectations."""

    name: str
    kernel: str
    signature: dict[str, str]
    constexprs: dict[str, Any]
    num_warps: int = 4
    num_stages: int = 3
    mma: bool = False  # a GEMM-shaped kernel: must use the tensor-core MMA of the target
    tma: bool = False  # reads tiles through tensor descriptors: must use TMA
    block_scaled: bool = False  # MXFP4: SM100's block-scaled MMA

    def fn(self):
        module, attr = self.kernel.split(":")
        return getattr(importlib.import_module(f"deepseek_kernels.{module}"), attr)


def _sig(names: str, types: str) -> dict[str, str]:
    return dict(zip(names.split(), types.split()))


def _specs() -> list[Spec]:
    out: list[Spec] = []
    for dt in ("bf16", "fp32"):
        for has_w, block in ((True, 4096), (False, 1024), (True, 512)):
            out.append(Spec(f"rms_norm[{dt},w={has_w},D={block}]", "rms_norm.triton:rms_norm_kernel",
                            _sig("x_ptr w_ptr out_ptr stride_x D eps", f"*{dt} *{dt} *{dt} i32 i32 fp32"),
                            {"HAS_W": has_w, "BLOCK_D": block}))
        out.append(Spec(f"rope[{dt}]", "rope.triton:rope_kernel",
                        _sig("x_ptr c_ptr s_ptr out_ptr INNER D R", f"*{dt} *fp32 *fp32 *{dt} i32 i32 i32"),
                        {"BLOCK_D": 512}))
        out.append(Spec(f"hc_merge[{dt}]", "hyper_connection.triton:hc_merge_kernel",
                        _sig("streams_ptr block_ptr post_ptr comb_ptr out_ptr D",
                             f"*{dt} *{dt} *fp32 *fp32 *{dt} i32"), {"HC": 4, "BLOCK_D": 1024}))
        out.append(Spec(f"hc_collapse[{dt}]", "hyper_connection.triton:hc_collapse_kernel",
                        _sig("streams_ptr pre_ptr out_ptr D", f"*{dt} *fp32 *{dt} i32"), {"HC": 4, "BLOCK_D": 1024}))
    out.append(Spec("hc_weights", "hyper_connection.triton:hc_weights_kernel",
                    _sig("mix_ptr base_ptr scale_ptr pre_ptr post_ptr comb_ptr iters hc_eps",
                         "*fp32 *fp32 *fp32 *fp32 *fp32 *fp32 i32 fp32"), {"HC": 4, "BLOCK": 4}))
    for bd in (512, 128):
        out.append(Spec(f"sink_attention[bf16,D={bd}]", "attention.triton:sink_attention_kernel",
                        _sig("q_ptr k_ptr vis_ptr sink_ptr out_ptr TQ H K D scale",
                             "*bf16 *bf16 *u8 *fp32 *bf16 i32 i32 i32 i32 fp32"),
                        {"BLOCK_H": 64, "BLOCK_K": 32, "BLOCK_D": bd, "UPCAST": False, "PRECISION": "ieee"},
                        num_warps=4, num_stages=2, mma=True))
    out.append(Spec("indexer_scores[bf16]", "indexer.triton:indexer_scores_kernel",
                    _sig("q_ptr w_ptr pool_ptr slots_ptr thr_ptr out_ptr TQ HI DI N qscale wscale",
                         "*bf16 *fp32 *bf16 *i64 *i64 *fp32 i32 i32 i32 i32 fp32 fp32"),
                    {"BLOCK_H": 64, "BLOCK_N": 32, "BLOCK_D": 128, "UPCAST": False, "PRECISION": "ieee"},
                    mma=True))
    out.append(Spec("compress_pool[bf16]", "compressor.triton:compress_pool_kernel",
                    _sig("kv_ptr gate_ptr out_ptr R C", "*bf16 *bf16 *bf16 i32 i32"), {"BLOCK_R": 8, "BLOCK_C": 128}))
    for ratio in (1, 2):
        out.append(Spec(f"v41_compress_pool[r={ratio}]", "v41_compress.triton:v41_compress_pool_kernel",
                        _sig("rows_ptr w_ptr out_ptr D eps", "*fp32 *fp32 *fp32 i32 fp32"),
                        {"RATIO": ratio, "BLOCK_D": 512}))
    # V4.1's mhc_pre_delayed launches these two kernels (named for the op, so the sweep lists it).
    out.append(Spec("mhc_pre_delayed[weights,hc=4]", "hyper_connection.triton:hc_weights_kernel",
                    _sig("mix_ptr base_ptr scale_ptr pre_ptr post_ptr comb_ptr iters hc_eps",
                         "*fp32 *fp32 *fp32 *fp32 *fp32 *fp32 i32 fp32"), {"HC": 4, "BLOCK": 4}))
    out.append(Spec("mhc_pre_delayed[collapse,bf16]", "hyper_connection.triton:hc_collapse_kernel",
                    _sig("streams_ptr pre_ptr out_ptr D", "*bf16 *fp32 *bf16 i32"), {"HC": 4, "BLOCK_D": 1024}))
    out.append(Spec("mhc_mixes[hc=4]", "mhc_mixes.triton:mhc_mixes_kernel",
                    _sig("x_ptr w_ptr out_ptr N M eps", "*bf16 *fp32 *fp32 i32 i32 fp32"),
                    {"BLOCK_M": 32, "BLOCK_K": 256}))
    out.append(Spec("engram_gate[bf16,hc=4]", "engram_gate.triton:engram_gate_kernel",
                    _sig("h_ptr kv_ptr qw_ptr kw_ptr keep_ptr out_ptr D eps", "*bf16 *bf16 *fp32 *fp32 *i8 *bf16 i32 fp32"),
                    {"HC": 4, "BLOCK_D": 4096}))
    out.append(Spec("engram_hash", "engram_hash.triton:engram_hash_kernel",
                    _sig("comp_ptr pos_ptr mult_ptr prime_ptr offset_ptr out_ptr LAYERS pad_id dead_id",
                         "*i64 *i64 *i64 *i64 *i64 *i64 i32 i64 i64"), {"MAX_NGRAM": 4, "N_HEADS": 8}))
    out.append(Spec("v41_select[candidates]", "v41_select.triton:candidate_mask_kernel",
                    _sig("l_ptr cand_ptr out_ptr N NC BS", "*fp32 *i64 *fp32 i32 i32 i32"), {"BLOCK": 64}))
    out.append(Spec("v41_select[blocks]", "v41_select.triton:block_scores_kernel",
                    _sig("v_ptr ends_ptr out_ptr N NB BS", "*fp32 *i64 *fp32 i32 i32 i32"), {"BLOCK": 64}))
    for blocks in (False, True):
        out.append(Spec(f"v41_select[rank,blocks={int(blocks)}]", "v41_select.triton:rank_kernel",
                        _sig("v_ptr ends_ptr out_ptr M K TOPK OUT_W", f"*fp32 *i64 *{'i64' if blocks else 'i8'} i32 i32 i32 i32"),
                        {"BLOCKS": blocks, "BLOCK_I": 64, "BLOCK_J": 64}))
    for dt in ("bf16", "fp32"):
        out.append(Spec(f"row_linear[{dt}]", "row_linear.triton:row_linear_kernel",
                        _sig("x_ptr w_ptr out_ptr stride_x N M", f"*{dt} *{dt} *{dt} i32 i32 i32"),
                        {"BLOCK_M": 32, "BLOCK_K": 128}))
    for fmt, (name, wt, st) in enumerate((("bf16", "*bf16", "*fp32"), ("int8", "*i8", "*fp32"), ("fp8", "*u8", "*fp32"),
                                          ("mxfp4", "*u8", "*u8"))):
        out.append(Spec(f"wo_gemv[{name}]", "weight_only.triton:wo_gemv_kernel",
                        _sig("x_ptr xrow_ptr e_ptr w_ptr s_ptr out_ptr N K KS expert_w expert_s BR BC",
                             f"*fp32 *i64 *i64 {wt} {st} *fp32 i32 i32 i32 i64 i64 i32 i32"),
                        {"FMT": fmt, "BLOCK_N": 64, "BLOCK_K": 64}))
    out.append(Spec("sample_tokens", "sampling.triton:sample_tokens_kernel",
                    _sig("p_ptr e_ptr out_ptr V", "*fp32 *fp32 *i64 i32"), {"BLOCK_V": 1024}))
    from deepseek_kernels.quant.triton import FP8_CONFIGS

    for cfg in FP8_CONFIGS:
        bm = cfg.kwargs["BLOCK_M"]
        out.append(Spec(f"fp8_gemm[BM={bm},w={cfg.num_warps},s={cfg.num_stages}]", "quant.triton:fp8_gemm_kernel",
                        _sig("a_desc b_desc a_scale_ptr b_scale_ptr c_ptr M N K stride_as stride_bs",
                             f"tensordesc<fp8e4nv[{bm},128]> tensordesc<fp8e4nv[128,128]> *fp32 *fp32 *fp32 "
                             "i32 i32 i32 i32 i32"),
                        {"BLOCK_M": bm, "BLOCK_N": 128, "BLOCK_K": 128, "UPCAST": False},
                        num_warps=cfg.num_warps, num_stages=cfg.num_stages, mma=True, tma=True))
    out.append(Spec("mxfp4_gemm[BM=128]", "quant.triton:mxfp4_gemm_kernel",
                    _sig("a_desc b_desc a_scale_ptr b_scale_ptr c_ptr M N K",
                         "tensordesc<fp8e4nv[128,128]> tensordesc<u8[128,64]> *u8 *u8 *fp32 i32 i32 i32"),
                    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "UPCAST": False},
                    mma=True, tma=True, block_scaled=True))
    return out


SPECS = _specs()


def compile_spec(spec: Spec, arch: str = "sm_100a"):
    """Compile ``spec`` for ``arch``; returns the compiled kernel (``.asm`` holds ttir/ttgir/llir/ptx/cubin)."""
    import triton
    from triton.backends.compiler import GPUTarget

    src = triton.compiler.ASTSource(fn=spec.fn(), signature={**spec.signature, **{k: "constexpr" for k in
                                                                                   spec.constexprs}},
                                    constexprs=dict(spec.constexprs))
    target = GPUTarget("cuda", ARCHES[arch], 32)
    return triton.compile(src, target=target, options={"num_warps": spec.num_warps, "num_stages": spec.num_stages})


def problems(spec: Spec, compiled, arch: str = "sm_100a") -> list[str]:
    """What is wrong with the artifacts of ``spec`` compiled for ``arch`` (empty: all expectations hold)."""
    ptx = compiled.asm["ptx"]
    found = []
    if f".target {arch}" not in ptx:
        found.append(f"PTX does not target {arch}")
    if not compiled.asm.get("cubin"):
        found.append("no cubin (ptxas did not run)")
    if spec.mma:
        want = "tcgen05.mma" if arch == "sm_100a" else "wgmma.mma_async"
        if want not in ptx:
            found.append(f"no {want} in the PTX")
        if "mma.sync" in ptx:
            found.append("mma.sync fallback in the PTX")
    if spec.tma and "cp.async.bulk.tensor" not in ptx:
        found.append("no TMA load (cp.async.bulk.tensor) in the PTX")
    if spec.block_scaled and arch == "sm_100a" and "block_scale" not in ptx:
        found.append("no block-scaled tcgen05.mma in the PTX")
    return found


def check(spec: Spec, arch: str = "sm_100a") -> list[str]:
    return problems(spec, compile_spec(spec, arch), arch)
