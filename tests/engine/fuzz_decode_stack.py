"""Bounded fuzz of ``deepseek_kernels.decode_stack``'s arguments: every call must return or raise an error,
never crash the process.

Records the op's real arguments from a few decode steps of the tiny checkpoint, then calls it again with one
part corrupted per trial: a per-layer int or float, a position, the block tables, the rotary tables, the block
size or window, or one weight / pool (missing, cut, another dtype, flattened). A crash shows as the process
dying (exit status 139); the counts of returns and errors are printed.

    PYTHONPATH=kernels:engine .venv/bin/python tests/engine/fuzz_decode_stack.py [TRIALS] [SEED]
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import deepseek_kernels as ops  # noqa: E402
from deepseek_engine import LLM, SamplingParams  # noqa: E402
from model_fixtures import PLAIN, model  # noqa: E402

POSITIONS, TABLES, BLOCK_SIZE, WINDOW, ROPE_TABLES, WEIGHTS, INTS, FLOATS, POOLS = 2, 4, 6, 7, 8, 9, 10, 11, 12


def copied(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list):
        return [copied(v) for v in value]
    return value


def record_calls(rng: random.Random) -> list[list]:
    llm = LLM.from_model(model(PLAIN), max_model_len=512)
    calls: list[list] = []
    real = ops.decode_stack

    def spy(*args):
        calls.append(copied(list(args)))
        return real(*args)

    ops.decode_stack = spy
    try:
        prompts = [[rng.randrange(2, 128) for _ in range(n)] for n in (5, 17, 40)]
        llm.generate(prompts, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True))
    finally:
        ops.decode_stack = real
    return calls


def corrupt(args: list, rng: random.Random) -> None:
    kind = rng.randrange(7)
    if kind == 0:
        args[INTS][rng.randrange(len(args[INTS]))] = rng.choice([-1, 0, 1, 3, 7, 1000, -(2**40), 2**40])
    elif kind == 1:
        args[FLOATS][rng.randrange(len(args[FLOATS]))] = rng.choice([-1.0, 0.0, float("nan"), 1e30])
    elif kind == 2:
        args[POSITIONS][rng.randrange(args[POSITIONS].numel())] = rng.choice([-1, 0, 10**6, 2**40])
    elif kind == 3:
        t = args[TABLES]
        args[TABLES] = rng.choice([t[:, :1], t[:1], t * 1000, -t, t.int()])
    elif kind == 4:
        t = args[ROPE_TABLES]
        args[ROPE_TABLES] = rng.choice([[], t[:1], [x[:, :1] for x in t], [x.double() for x in t]])
    elif kind == 5:
        args[rng.choice([BLOCK_SIZE, WINDOW])] = rng.choice([0, -1, 1, 10**9])
    else:
        which = rng.choice([WEIGHTS, POOLS])
        i = rng.randrange(len(args[which]))
        t = args[which][i]
        if t is not None:
            args[which][i] = rng.choice([None, t[:1] if t.dim() else t, t.double(), t.flatten()])


def main(trials: int = 500, seed: int = 0) -> None:
    rng = random.Random(seed)
    calls = record_calls(rng)
    returned = errors = 0
    with torch.inference_mode():
        for _ in range(trials):
            args = copied(rng.choice(calls))
            corrupt(args, rng)
            try:
                torch.ops.deepseek_kernels.decode_stack(*args)
                returned += 1
            except (RuntimeError, IndexError, ValueError, TypeError):
                errors += 1
    print(f"{trials} corrupted calls: {returned} returned, {errors} raised an error, no crash")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
