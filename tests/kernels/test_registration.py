"""The ops as PyTorch sees them: schemas, fake (meta) implementations, ``torch.compile``, the explicit
reference mode, and errors that name the op."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import deepseek_kernels as ops
import pytest
import torch

KERNELS = str(Path(__file__).resolve().parents[2] / "kernels")


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child Python that imports this checkout's kernels."""
    path = os.pathsep.join(p for p in (KERNELS, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def _samples():
    g = torch.Generator().manual_seed(0)
    hc, d, t = 4, 16, 3
    yield "rms_norm", (torch.randn(t, d, generator=g), torch.rand(d, generator=g), 1e-6)
    yield "row_linear", (torch.randn(t, 2, d, generator=g), torch.randn(5, d, generator=g))
    yield "mhc_mixes", (torch.randn(t, hc, d, generator=g), torch.randn(24, hc * d, generator=g), 1e-6)
    yield "engram_gate", (torch.randn(t, hc, d, generator=g), torch.randn(t, (hc + 1) * d, generator=g),
                          torch.rand(hc, d, generator=g), torch.rand(hc, d, generator=g), torch.tensor([True, False, True]),
                          1e-6)
    yield "rope", (torch.randn(t, 2, d, generator=g), torch.randn(t, 8, generator=g), torch.randn(t, 8, generator=g))
    yield "hc_merge", (torch.randn(t, hc, d, generator=g), torch.randn(t, d, generator=g), torch.rand(t, hc, generator=g),
                       torch.rand(t, hc, hc, generator=g))
    yield "hc_mix", (torch.randn(t, 24, generator=g), torch.randn(24, generator=g), torch.rand(3, generator=g), hc, 3,
                     1e-6, torch.randn(t, hc, d, generator=g))
    yield "sink_attention", (torch.randn(2, t, 4, d, generator=g), torch.randn(2, 7, d, generator=g),
                             torch.rand(2, t, 7, generator=g) > 0.3, torch.randn(4, generator=g), 0.25)
    yield "compress_pool", (torch.randn(5, 4, d, generator=g), torch.randn(5, 4, d, generator=g))
    yield "sample_tokens", (torch.rand(3, 50, generator=g), torch.rand(3, 50, generator=g) + 0.1)
    yield "compress_windows", (torch.randn(4, 4, d, generator=g), torch.randn(4, 4, 2 * d, generator=g),
                               torch.randn(4, 4, 2 * d, generator=g), torch.randn(4, 2 * d, generator=g),
                               torch.tensor([[4, 5, 6, 7]]), torch.tensor([[0, 1, 2, 3]]), torch.tensor([True]), True,
                               torch.rand(d, generator=g), 1e-6, torch.ones(1, 8), torch.zeros(1, 8), torch.tensor([7]))
    yield "hc_head", (torch.randn(t, hc, d, generator=g), torch.randn(hc, hc * d, generator=g), torch.randn(hc, generator=g),
                      torch.rand(1, generator=g), 1e-6, 1e-6, torch.rand(d, generator=g), 1e-5)
    yield "indexer_select", (torch.randn(2, 1, 4, d, generator=g), torch.randn(2, 1, 4, generator=g),
                             torch.randn(12, d, generator=g), torch.tensor([[0, 3, 5], [7, 2, 9]]), torch.tensor([[3], [2]]),
                             0.25, 0.5, 2, [3, 4])
    yield "decode_layout", (torch.tensor([0, 9, 40]), torch.tensor([[3, 0, 0], [4, 5, 0], [6, 7, 8]]),
                            torch.tensor([1, 5, 41]), 16, 8, [4, 16])


@pytest.mark.parametrize("name,args", list(_samples()), ids=[n for n, _ in _samples()])
def test_opcheck(name, args) -> None:
    """Schema, fake implementation and dispatch agree (``torch.library.opcheck``)."""
    torch.library.opcheck(getattr(torch.ops.deepseek_kernels, name).default, args,
                          test_utils=("test_schema", "test_faketensor"))


def test_meta_tensors_give_shapes() -> None:
    q = torch.empty(2, 3, 4, 16, device="meta")
    out = ops.sink_attention_paged(q, torch.empty(10, 16, device="meta"),
                                   torch.empty(2, 5, dtype=torch.long, device="meta"),
                                   torch.empty(2, 3, 5, dtype=torch.bool, device="meta"), torch.empty(4, device="meta"),
                                   0.5)
    assert out.shape == q.shape and out.device.type == "meta"


def test_torch_compile_traces_the_ops() -> None:
    def block(x, w, streams, post, comb):
        return ops.hc_merge(streams, ops.rms_norm(x, w, 1e-6), post, comb)

    g = torch.Generator().manual_seed(1)
    args = (torch.randn(3, 16, generator=g), torch.rand(16, generator=g), torch.randn(3, 4, 16, generator=g),
            torch.rand(3, 4, generator=g), torch.rand(3, 4, 4, generator=g))
    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(*args), block(*args))


def test_reference_mode_from_the_environment() -> None:
    code = "import deepseek_kernels as k; print(k.mode())"
    env = child_env(DEEPSEEK_KERNELS="reference")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "reference"
    env["DEEPSEEK_KERNELS"] = "fast"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "DEEPSEEK_KERNELS must be one of" in bad.stderr


def test_missing_compiled_kernels_fail_the_import_naming_them() -> None:
    code = "import sys; sys.modules['deepseek_kernels._C'] = None; import deepseek_kernels"
    out = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True)
    assert out.returncode != 0
    assert "deepseek_kernels._C (the compiled CPU kernels) cannot be loaded" in out.stderr


def test_ops_without_an_accelerator_kernel_have_none_registered() -> None:
    """The greedy head's arg-max kernels exist for the CPU only: CUDA dispatch would raise NotImplementedError
    naming the op (the head class runs one product and torch.argmax there instead)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    assert has("deepseek_kernels::head_argmax", "CPU") and not has("deepseek_kernels::head_argmax", "CUDA")
    assert has("deepseek_kernels::rms_norm", "CUDA") and has("deepseek_kernels::fp8_gemm", "CUDA")
