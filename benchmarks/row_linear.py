"""``deepseek_kernels.row_linear`` versus ``F.linear`` (BLAS), in one run, on the same inputs.

``row_linear`` computes every output of a row in one order fixed by the widths (so a row's bits never depend on
the other rows of the call); ``F.linear`` hands the product to BLAS, whose blocking follows the row count. For
each shape (rows x in -> out) and weight dtype (float32, bfloat16) it prints the median time of both and their
ratio (row_linear / F.linear: below 1 is faster), for the default path and, with ``--paths``, for each forced
path (``row_linear_path``: ``avx512``, ``avx2``, ``scalar``; a path wider than the machine's vectors runs on
narrower instructions and is slow). Both sides use the same ``torch`` thread count (``--threads``, printed). A
measurement, not a test: nothing asserts on time.

    .venv/bin/python benchmarks/row_linear.py [--threads 1] [--repeat 7] [--paths]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "kernels"))

import deepseek_kernels as ops  # noqa: E402

#: (rows, in, out): decode-sized and prefill-sized products of the tiny and the bandwidth checkpoints, a
#: 129280-row head, and a model-sized projection.
SHAPES = [(1, 1024, 1024), (16, 1024, 1024), (256, 1024, 1024), (1, 4096, 4096), (32, 4096, 4096),
          (512, 1024, 3072), (1, 64, 129280), (16, 64, 129280), (1, 1024, 16384), (32, 1024, 16384)]


def timed(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--paths", action="store_true", help="also time each forced path")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    native = torch.ops.deepseek_kernels.row_linear_default_path()
    paths = ["avx512", "avx2", "scalar"] if args.paths else []
    print(f"threads {torch.get_num_threads()}, row_linear default path: {native}")
    head = f"{'rows x in -> out':>24} {'weight':>8} {'F.linear ms':>12} {'row_linear ms':>14} {'ratio':>7}"
    print(head + "".join(f" {p + ' ratio':>13}" for p in paths))
    g = torch.Generator().manual_seed(0)
    ratios: dict[str, list[float]] = {}
    for rows, n, m in SHAPES:
        x = torch.randn(rows, n, generator=g)
        w32 = torch.randn(m, n, generator=g) / n**0.5
        for name, w in (("float32", w32), ("bfloat16", w32.bfloat16())):
            # BLAS on the stored dtype: bfloat16 weights with a bfloat16 input (what F.linear of a bf16 model does)
            xb = x if w.dtype == torch.float32 else x.bfloat16()
            blas = timed(lambda: F.linear(xb, w), args.repeat)
            ours = timed(lambda: ops.row_linear(xb, w), args.repeat)
            line = f"{f'{rows} x {n} -> {m}':>24} {name:>8} {blas * 1e3:12.3f} {ours * 1e3:14.3f} {ours / blas:7.2f}"
            ratios.setdefault(name, []).append(ours / blas)
            for p in paths:
                t = timed(lambda: torch.ops.deepseek_kernels.row_linear_path(xb, w, p), args.repeat)
                line += f" {t / blas:13.2f}"
            print(line, flush=True)
    for name, rs in ratios.items():
        print(f"geometric mean ratio row_linear / F.linear, {name} weights: "
              f"{statistics.geometric_mean(rs):.2f} (min {min(rs):.2f}, max {max(rs):.2f})")


if __name__ == "__main__":
    main()
