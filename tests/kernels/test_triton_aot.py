"""Ahead-of-time compilation of Triton kernels for NVIDIA targets on this GPU-less machine, with checks on
the PTX: ``.target sm_100a``, ``tcgen05.mma`` (SM100) / ``wgmma`` (SM90) for GEMM-shaped kernels and no
``mma.sync`` fallback, TMA loads for descriptor reads. A short subset; ``kernels/tools/aot_sweep.py``
compiles every kernel and autotune configuration for both targets."""

from __future__ import annotations

import pytest
from deepseek_kernels import aot

SUBSET = {
    ("fp8_gemm[BM=128,w=4,s=3]", "sm_100a"),
    ("fp8_gemm[BM=128,w=4,s=3]", "sm_90a"),
    ("sink_attention[bf16,D=128]", "sm_100a"),
    ("rms_norm[bf16,w=True,D=4096]", "sm_100a"),
    ("v41_compress_pool[r=2]", "sm_100a"),
    ("row_linear[bf16]", "sm_100a"),
    ("engram_hash", "sm_100a"),
    ("engram_gate[bf16,hc=4]", "sm_100a"),
    ("mhc_mixes[hc=4]", "sm_100a"),
    ("mhc_pre_delayed[weights,hc=4]", "sm_100a"),
    ("mhc_pre_delayed[collapse,bf16]", "sm_100a"),
    ("v41_select[rank,blocks=0]", "sm_100a"),
    ("wo_gemv[mxfp4]", "sm_100a"),
}


@pytest.mark.parametrize("name,arch", sorted(SUBSET))
def test_aot_artifacts(name, arch) -> None:
    spec = next(s for s in aot.SPECS if s.name == name)
    compiled = aot.compile_spec(spec, arch)
    assert aot.problems(spec, compiled, arch) == []
    assert f".target {arch}" in compiled.asm["ptx"]


def test_problems_are_reported() -> None:
    """The checks can fail: a float32 GEMM-shaped kernel with an ``ieee`` dot has no tensor-core MMA (the
    bf16 kernels keep theirs: the precision setting only applies to float32 operands)."""
    spec = next(s for s in aot.SPECS if s.name == "sink_attention[bf16,D=128]")
    fp32 = aot.Spec("sink_attention[fp32,ieee]", spec.kernel,
                    {k: v.replace("bf16", "fp32") for k, v in spec.signature.items()},
                    {**spec.constexprs, "PRECISION": "ieee"}, mma=True)
    found = aot.check(fp32, "sm_100a")
    assert any("tcgen05.mma" in p for p in found)
