"""Generated tokens per second: this engine versus ``transformers``' ``generate()``.

Both run the same tiny random DeepSeek V4 checkpoint (real 129280-token vocabulary,
created once under ``.cache/`` at the repository root) on the same prompts in the
same process: greedy decoding, every prompt generating exactly ``--max-tokens``
tokens. Prints both throughputs and their ratio (the goal is >= 5x), plus the CPU
time each side used (``time.process_time``; on a shared machine the wall-clock
ratio swings with the load of other processes, the CPU-time ratio much less).
Both sides run with the same ``torch`` thread count (``--threads``, printed). This
is a measurement, not a test: nothing here asserts on time.

    .venv/bin/python benchmarks/engine.py [--prompts 32] [--max-tokens 32] [--threads 1] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
# Measure this checkout's engine, ahead of any installed copy (an editable install from
# another checkout would otherwise be what gets timed).
sys.path.insert(0, str(ROOT / "engine"))

from deepseek_engine import LLM, SamplingParams  # noqa: E402
from deepseek_engine.tiny_checkpoint import ensure_tiny_checkpoint  # noqa: E402


def make_prompts(n: int, vocab: int, lo: int, hi: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    # Stay clear of the special tokens at the top of the vocabulary.
    return [[rng.randrange(2, min(vocab, 128000)) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


@torch.inference_mode()
def run_transformers(folder: Path, prompts: list[list[int]], max_tokens: int) -> tuple[float, float, list[list[int]]]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    width = max(map(len, prompts))
    # Left padding, so every row's last prompt token sits in the last column.
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    # No end-of-sequence token: generation runs to max_new_tokens and EOS stays an ordinary
    # token, as with the engine's ignore_eos (min_new_tokens would forbid it instead).
    model.generation_config.eos_token_id = None
    kwargs = dict(attention_mask=mask, max_new_tokens=max_tokens, do_sample=False, pad_token_id=0)
    model.generate(ids[:2, -8:], attention_mask=mask[:2, -8:], max_new_tokens=2, do_sample=False, pad_token_id=0)
    start, cpu = time.perf_counter(), time.process_time()
    out = model.generate(ids, **kwargs)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return elapsed, cpu, out[:, width:].tolist()


def run_engine(folder: Path, prompts: list[list[int]], max_tokens: int, args) -> tuple[float, float, list[list[int]]]:
    llm = LLM(folder, dtype="float32", max_model_len=args.max_model_len, max_num_seqs=len(prompts),
              max_num_batched_tokens=args.max_num_batched_tokens)
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    llm.generate(prompts[:2], SamplingParams(temperature=0, max_tokens=2))  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    outs = llm.generate(prompts, params)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return elapsed, cpu, [o.token_ids for o in outs]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=32)
    # Equal lengths by default: transformers then needs no padding, and both engines
    # must produce the same greedy tokens (left padding shifts DeepSeek V4's
    # compression windows, so padded rows legitimately differ).
    ap.add_argument("--min-len", type=int, default=64)
    ap.add_argument("--max-len", type=int, default=64)
    ap.add_argument("--vocab-size", type=int, default=129280,
                    help="vocabulary of the tiny checkpoint (default: the real tokenizer's 129280)")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--max-num-batched-tokens", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads for both engines (default 1: steadiest on a shared machine)")
    ap.add_argument("--checkpoint", type=Path, help="checkpoint folder (default: .cache/tiny-deepseek-v4[-VOCAB])")
    ap.add_argument("--skip-transformers", action="store_true")
    ap.add_argument("--repeat", type=int, default=5,
                    help="time each side this many times (alternating, fresh engine each time, so no prefix-cache "
                         "hits) and report the fastest run of each (default 5: on these shared machines either side's "
                         "single runs vary by up to 50%%, the fastest of five much less)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    default = ROOT / ".cache" / ("tiny-deepseek-v4" + ("" if args.vocab_size == 129280 else f"-{args.vocab_size}"))
    folder = ensure_tiny_checkpoint(args.checkpoint or default, vocab_size=args.vocab_size)
    prompts = make_prompts(args.prompts, args.vocab_size, args.min_len, args.max_len, seed=0)
    total = args.prompts * args.max_tokens
    print(f"{args.prompts} prompts of {args.min_len}-{args.max_len} tokens, {args.max_tokens} new tokens each, "
          f"{args.threads} threads, checkpoint {folder}")

    ours = ours_cpu = theirs = theirs_cpu = float("inf")
    their_ids: list[list[int]] = []
    for _ in range(max(1, args.repeat)):
        wall, cpu, ours_ids = run_engine(folder, prompts, args.max_tokens, args)
        ours, ours_cpu = min(ours, wall), min(ours_cpu, cpu)
        if not args.skip_transformers:
            wall, cpu, their_ids = run_transformers(folder, prompts, args.max_tokens)
            theirs, theirs_cpu = min(theirs, wall), min(theirs_cpu, cpu)
    best = " (fastest of %d)" % args.repeat if args.repeat > 1 else ""
    print(f"deepseek_engine       {total / ours:9.1f} tok/s  ({ours:.2f} s wall, {ours_cpu:.2f} s CPU){best}")
    if args.skip_transformers:
        return
    print(f"transformers generate {total / theirs:9.1f} tok/s  ({theirs:.2f} s wall, {theirs_cpu:.2f} s CPU){best}")
    print(f"speed-up: {theirs / ours:.2f}x wall-clock, {theirs_cpu / ours_cpu:.2f}x CPU time, "
          f"{args.threads} threads each (goal >= 5x)")
    same = sum(a == b for a, b in zip(ours_ids, their_ids))
    print(f"identical greedy outputs: {same}/{len(prompts)} prompts")


if __name__ == "__main__":
    main()
