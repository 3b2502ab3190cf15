"""Bounded sliding-window replay on a prefix-cache hit vs recomputing the whole prefix (tiny V4.1).

A hit of ``h`` tokens either recomputes all ``h`` tokens (no prefix caching) or, with
bounded replay, reuses the hit's compressed state and replays only the last
``window`` tokens into a private window ring. Prints the window-KV bytes a sequence
holds (every position's rows in the pool vs the ring), and the time of both ways
measured in the same run (fastest of ``--repeat``). A measurement, not a test.

    .venv/bin/python benchmarks/replay.py [--prefix 256] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))

from deepseek_engine.kv_cache import SequenceCache  # noqa: E402
from deepseek_engine.kv_cache_v41 import V41CachePool, WindowRing  # noqa: E402
from deepseek_engine.loader import load_model  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prefix", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--checkpoint", type=Path, default=ROOT / "tests" / "engine" / "data" / "tiny_v41")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    m = load_model(args.checkpoint)
    h, bs, w = args.prefix, 16, m.config.sliding_window
    prefix = torch.randint(3, m.config.vocab_size, (h,), generator=torch.Generator().manual_seed(0))
    pool = V41CachePool(m.config, 2 * (h // bs) + 2, bs)
    m(prefix, torch.arange(h), SequenceCache(pool, range(h // bs)))
    full_s = replay_s = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        m.forward_full(prefix, block_size=bs)
        full_s = min(full_s, time.perf_counter() - t0)
        cache = SequenceCache(pool, range(h // bs, 2 * (h // bs)), num_tokens=h)
        cache.block_table[: h // bs] = list(range(h // bs))
        ring = WindowRing(m.config, max_step=64)
        t0 = time.perf_counter()
        m.replay_prefix(prefix, cache, ring)
        replay_s = min(replay_s, time.perf_counter() - t0)
    per_token = pool.bytes_per_token()["window_kv"]
    print(f"hit of {h} tokens, window {w}")
    print(f"window KV held: pool rows {per_token * h} B vs ring {ring.nbytes()} B "
          f"({per_token * h / ring.nbytes():.1f}x less)")
    print(f"recompute: full {full_s * 1e3:.1f} ms vs replay of {min(h, w)} tokens {replay_s * 1e3:.1f} ms "
          f"({full_s / replay_s:.1f}x less)")


if __name__ == "__main__":
    main()
