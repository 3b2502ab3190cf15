"""On a machine with a CUDA GPU: every op's CUDA implementation against its PyTorch reference, timed against
the reference run eagerly on the same GPU, then the tiny V4 checkpoints end to end on the GPU against the
recorded ``transformers`` logits. Prints one line per check; exit status 1 when a check fails.

    python kernels/tools/gpu_check.py [--repeat 50]

Run from the repository root after ``bash .ci/setup.sh`` (the references under ``tests/engine/data``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "kernels"), str(ROOT / "engine"), str(ROOT / "tests" / "engine")]

import deepseek_kernels as ops  # noqa: E402


def cases(dev: str):
    """(name, op function, args, tolerance) at decode-like and prefill-like sizes of DeepSeek V4 Flash."""
    g = torch.Generator(device=dev).manual_seed(0)

    def randn(*shape, dtype=torch.bfloat16, scale=1.0):
        return (torch.randn(*shape, generator=g, device=dev) * scale).to(dtype)

    bf = dict(atol=3e-2, rtol=3e-2)
    for t in (8, 2048):
        yield f"rms_norm[T={t}]", ops.rms_norm, (randn(t, 4096), randn(4096), 1e-6), bf
        yield f"rope[T={t}]", ops.rope, (randn(t, 64, 512), randn(t, 64, dtype=torch.float32),
                                         randn(t, 64, dtype=torch.float32)), bf
        yield f"hc_merge[T={t}]", ops.hc_merge, (randn(t, 4, 4096), randn(t, 4096), randn(t, 4, dtype=torch.float32),
                                                 randn(t, 4, 4, dtype=torch.float32)), bf
        yield f"hc_mix[T={t}]", ops.hc_mix, (randn(t, 24, dtype=torch.float32), randn(24, dtype=torch.float32),
                                             randn(3, dtype=torch.float32), 4, 20, 1e-6, randn(t, 4, 4096)), bf
    for b, k in ((32, 640), (4, 4096)):
        vis = torch.rand(b, 1, k, generator=g, device=dev) > 0.1
        yield f"sink_attention[B={b},K={k}]", ops.sink_attention, (randn(b, 1, 64, 512), randn(b, k, 512), vis,
                                                                   randn(64, dtype=torch.float32), 512**-0.5), bf
    pool = randn(65536, 128)
    slots = torch.randint(0, 65536, (32, 1024), generator=g, device=dev)
    thr = torch.randint(0, 1025, (32, 1), generator=g, device=dev)
    yield "indexer_scores", ops.indexer_scores, (randn(32, 1, 64, 128), randn(32, 1, 64, dtype=torch.float32), pool,
                                                 slots, thr, 128**-0.5, 64**-0.5), bf
    yield "compress_pool", ops.compress_pool, (randn(256, 8, 1024), randn(256, 8, 1024)), bf
    probs = torch.softmax(torch.randn(32, 129280, generator=g, device=dev), -1)
    yield "sample_tokens", ops.sample_tokens, (probs, torch.empty_like(probs).exponential_(generator=g)), None
    for m in (16, 4096):
        a = randn(m, 7168, dtype=torch.float32, scale=3).to(torch.float8_e4m3fn)
        w = randn(4096, 7168, dtype=torch.float32, scale=3).to(torch.float8_e4m3fn)
        yield f"fp8_gemm[M={m}]", ops.fp8_gemm, (a, torch.rand(m, 56, generator=g, device=dev) + 0.1, w,
                                                 torch.rand(32, 56, generator=g, device=dev) + 0.1), dict(atol=1.0, rtol=1e-2)
        packed = torch.randint(0, 256, (4096, 3584), dtype=torch.uint8, generator=g, device=dev)
        a_exp = torch.randint(120, 130, (m, 224), dtype=torch.uint8, generator=g, device=dev)
        b_exp = torch.randint(120, 130, (4096, 224), dtype=torch.uint8, generator=g, device=dev)
        yield f"mxfp4_gemm[M={m}]", ops.mxfp4_gemm, (a, a_exp, packed, b_exp), dict(atol=1.0, rtol=1e-2)


def timed(fn, args, repeat: int) -> float:
    fn(*args)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeat


def check_ops(repeat: int) -> int:
    failed = 0
    for name, fn, args, tol in cases("cuda"):
        try:
            got = fn(*args)
            with ops.using("reference"):
                want = fn(*args)
                eager = timed(fn, args, repeat)
            got_t, want_t = (got, want) if isinstance(got, tuple) else ((got,), (want,))
            for a, b in zip(got_t, want_t):
                if tol is None:
                    assert torch.equal(a, b), "results differ"
                else:
                    torch.testing.assert_close(a.float(), b.float(), **tol)
            kernel = timed(fn, args, repeat)
            print(f"ok   {name:32s} kernel {kernel * 1e6:9.1f} us  eager {eager * 1e6:9.1f} us  "
                  f"speed-up {eager / kernel:6.2f}x")
        except Exception as err:  # report every op, then fail
            failed += 1
            print(f"FAIL {name:32s} {type(err).__name__}: {str(err).splitlines()[0]}")
    return failed


def check_checkpoints() -> int:
    from deepseek_engine import LLM
    from model_fixtures import reference

    failed = 0
    for name, folder in (("plain", "tiny_v4"), ("quantised", "tiny_v4_quant")):
        path = ROOT / "tests" / "engine" / "data" / folder
        if not path.is_dir():
            print(f"FAIL checkpoint {name}: {path} missing")
            failed += 1
            continue
        ref = reference(folder)
        ids = ref["prefill_0.input_ids"].tolist()
        llm = LLM(path, dtype="float32", device="cuda", max_model_len=512)
        got = llm.forward_logits(ids).cpu()
        err = float((got - ref["prefill_0.logits"]).abs().max())
        status = "ok  " if err <= 1e-3 else "FAIL"
        failed += status == "FAIL"
        print(f"{status} checkpoint {name:10s} max |logit - transformers| = {err:.2e} (CUDA float32)")
    return failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 1
    print(torch.cuda.get_device_name(), "capability", torch.cuda.get_device_capability())
    failed = check_ops(args.repeat) + check_checkpoints()
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
