"""Bounded sliding-window replay on a prefix-cache hit vs recomputing the whole prefix (tiny V4.1).

A hit of ``h`` tokens either recomputes all ``h`` tokens (no prefix caching) or, with
bounded replay, reuses the hit's compressed state and replays only the last
``window`` tokens into a private window ring. Prints the window-KV bytes a sequence
holds (every position's rows in the pool vs the ring), and the time of both ways
measured in the same run (fastest of ``--repeat``), for the window depth (vLLM's) and the
exact depth ``layers * (window - 1)``. Then the same through ``LLM``'s prefix cache: the time
of a request whose prompt hits a cached ``--prefix``-token prefix, with each ``swa_replay``
mode and with prefix caching off (a full recompute). A measurement, not a test.

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

from deepseek_engine.models.deepseek_v4.kv_cache import SequenceCache  # noqa: E402
from deepseek_engine.models.deepseek_v41.kv_cache import V41CachePool, WindowRing  # noqa: E402
from deepseek_engine.models.loader import load_model  # noqa: E402


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
    full_s = replay_s = exact_s = float("inf")
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
        cache.num_tokens = h
        t0 = time.perf_counter()
        m.replay_prefix(prefix, cache, ring, m.exact_replay_depth())
        exact_s = min(exact_s, time.perf_counter() - t0)
    per_token = pool.bytes_per_token()["window_kv"]
    print(f"hit of {h} tokens, window {w}")
    print(f"window KV held: pool rows {per_token * h} B vs ring {ring.nbytes()} B "
          f"({per_token * h / ring.nbytes():.1f}x less)")
    print(f"recompute: full {full_s * 1e3:.1f} ms vs replay of {min(h, w)} tokens {replay_s * 1e3:.1f} ms "
          f"({full_s / replay_s:.1f}x less); exact replay of {min(h, m.exact_replay_depth())} tokens "
          f"{exact_s * 1e3:.1f} ms ({full_s / exact_s:.1f}x less)")
    through_llm(args)


def through_llm(args) -> None:
    """Time of a request hitting a cached prefix, per ``swa_replay`` mode, vs prefix caching off."""
    from deepseek_engine import LLM, SamplingParams

    g = torch.Generator().manual_seed(1)
    shared = torch.randint(3, 1024, (args.prefix,), generator=g).tolist()
    first, second = shared + [5, 6, 7], shared + [8, 9, 10]
    params = SamplingParams(temperature=0.0, max_tokens=1)
    print(f"LLM, a request whose {len(second)}-token prompt hits a cached {args.prefix}-token prefix:")
    results = {}
    for label, kw in (("no prefix caching", dict(enable_prefix_caching=False)), ("swa_replay=None", dict(swa_replay=None)),
                      ("swa_replay='exact'", dict(swa_replay="exact")), ("swa_replay='window'", dict(swa_replay="window"))):
        best = float("inf")
        for _ in range(args.repeat):
            llm = LLM(args.checkpoint, block_size=16, max_num_seqs=1, **kw)
            llm.generate([first], params)
            t0 = time.perf_counter()
            out = llm.generate([second], params)[0]
            best = min(best, time.perf_counter() - t0)
        pool = llm.runner.kv
        held = pool.bytes_per_token()["window_kv"]
        results[label] = best
        print(f"  {label:20s} {best * 1e3:7.1f} ms  cached {out.num_cached_tokens:4d}  replayed "
              f"{out.num_replayed_tokens:3d}  window KV per pool token {held} B")
    base = results["no prefix caching"]
    print("  speed-up vs no prefix caching: " + ", ".join(f"{k} {base / v:.1f}x" for k, v in results.items()
                                                          if k != "no prefix caching"))


if __name__ == "__main__":
    main()
