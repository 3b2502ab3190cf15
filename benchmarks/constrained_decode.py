"""Decode tokens per second with an output constraint versus without, in the same run (issue #24's goal:
constrained >= 90% of unconstrained).

The engine serves a random DeepSeek V4 checkpoint (created once under ``.cache/`` at the repository root):
``--model tiny`` (default), the tiny one with the real 129280-token vocabulary (hidden 32: the head is most of
a step, the worst case for a constraint's cost), or ``--model large``, ``benchmarks/engine.py``'s
compute-bound one (hidden 1024, 8 layers, 64 experts, 16384-token vocabulary); greedy and sampled, every prompt generating exactly
``--max-tokens`` tokens (``ignore_eos``). Each round runs the same prompts three ways, interleaved so that the
load of other processes hits them alike: no constraint, every request constrained, and half of them
constrained. Prefill is excluded (a run of one new token is subtracted).

The constraint (``--constraint``):

* ``dfa`` (default): ``deepseek_engine.testing.token_dfa``, whose bitmask rows are precomputed, so the figure
  is the engine's own cost: one bitmask row per constrained row and step, the mask kernel
  (``apply_token_bitmask_``), the full-logits path instead of the greedy head's arg-max-only one, and the
  matcher calls. Its language alternates free text (every ordinary token: all-ones bitmask words) and
  structural positions (a dozen tokens: mostly all-zero words), the two kinds of position a tool-call
  grammar has.
* ``grammar``: the codec's ``OutputGrammar`` for a JSON-schema request (needs a codec built with it): the
  grammar's own mask computation included.

Prints tokens per second (wall and CPU) and the ratios; a measurement, nothing asserts on time.

    .venv/bin/python benchmarks/constrained_decode.py [--prompts 8] [--max-tokens 32] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))
sys.path.insert(0, str(ROOT / "kernels"))
sys.path.insert(0, str(ROOT / "python"))

from deepseek_engine import LLM, SamplingParams  # noqa: E402
from deepseek_engine.testing.tiny_checkpoint import ensure_tiny_checkpoint  # noqa: E402
from deepseek_engine.testing.token_dfa import TokenDFA  # noqa: E402


def text_and_structure_dfa(vocab: int, seed: int = 0) -> TokenDFA:
    """Free text (any ordinary token but 16 "structural" ones) until one of those 16, then one of 12 tokens,
    then free text again: both kinds of bitmask row, in whatever order the model's picks lead to."""
    rng = random.Random(seed)
    ordinary = ordinary_tokens(vocab)
    openers = rng.sample(range(2, ordinary), 16)
    inner = rng.sample(range(2, ordinary), 12)
    free = {t: 0 for t in range(2, ordinary)}
    free.update({t: 1 for t in openers})
    return TokenDFA(vocab, {0: free, 1: {t: 0 for t in inner}}, accepting={0})


def ordinary_tokens(vocab: int) -> int:
    """Tokens below this are ordinary text (the real vocabulary's control tokens sit above 128000)."""
    return min(vocab, 128000) if vocab > 100000 else vocab - 64


def json_grammar(tokenizer_json: str):
    import deepseek_recipe as dr
    from deepseek_recipe.output_constraints import compile_output_grammar

    schema = {"type": "object", "properties": {"name": {"type": "string"}, "count": {"type": "integer"},
                                               "tags": {"type": "array", "items": {"type": "string"}}},
              "required": ["name", "count"]}
    body = {"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "Reply in JSON."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}}
    conv = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())
    return compile_output_grammar(conv, dr.Tokenizer.from_file(tokenizer_json))


def prompts(n: int, vocab: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(2, ordinary_tokens(vocab)) for _ in range(rng.randint(12, 40))] for _ in range(n)]


def timed(llm: LLM, ps: list[list[int]], params: list[SamplingParams]) -> tuple[float, float]:
    start, cpu = time.perf_counter(), time.process_time()
    llm.generate(ps, params)
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--model", choices=["tiny", "large"], default="tiny")
    p.add_argument("--constraint", choices=["dfa", "grammar"], default="dfa")
    p.add_argument("--tokenizer", help="tokenizer.json for --constraint grammar (default: $DEEPSEEK_TOKENIZER_JSON)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.model == "tiny":
        folder = ensure_tiny_checkpoint(ROOT / ".cache" / "tiny-deepseek-v4")
    else:
        from engine import LARGE_CONFIG, LARGE_VOCAB  # benchmarks/engine.py's compute-bound model

        folder = ensure_tiny_checkpoint(ROOT / ".cache" / "large-deepseek-v4", vocab_size=LARGE_VOCAB,
                                        config=LARGE_CONFIG)
    llm = LLM(folder, dtype="float32", max_num_seqs=args.prompts, num_threads=args.threads)
    vocab = llm.vocab_size
    if args.constraint == "dfa":
        source = text_and_structure_dfa(vocab)
    else:
        from deepseek_engine.entrypoints.protocol_api import find_tokenizer_json

        source = json_grammar(str(find_tokenizer_json(args.tokenizer)))
    ps = prompts(args.prompts, vocab, 1)
    n = len(ps)
    print(f"{args.model} V4 checkpoint, vocabulary {vocab}, {n} prompts x {args.max_tokens} tokens, "
          f"{args.threads} thread(s), constraint: {args.constraint}")
    for mode, base in (("greedy", dict(temperature=0.0)), ("sampled", dict(temperature=0.8, top_p=0.95))):
        def params(tokens: int, constrained: list[bool]) -> list[SamplingParams]:
            return [SamplingParams(**base, seed=i, max_tokens=tokens, ignore_eos=True,
                                   constraint=source if c else None) for i, c in enumerate(constrained)]

        kinds = {"none": [False] * n, "all": [True] * n, "half": [i % 2 == 0 for i in range(n)]}
        timed(llm, ps[:2], params(2, [True, False]))  # warm-up
        wall: dict[str, list[float]] = {k: [] for k in kinds}
        cpu: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(args.repeat):
            for kind, constrained in kinds.items():
                w1, c1 = timed(llm, ps, params(1, constrained))  # prefill and the first token
                w, c = timed(llm, ps, params(args.max_tokens, constrained))
                wall[kind].append(w - w1)
                cpu[kind].append(c - c1)
        decoded = n * (args.max_tokens - 1)
        tps = {k: decoded / statistics.median(v) for k, v in wall.items()}
        cps = {k: decoded / statistics.median(v) for k, v in cpu.items()}
        print(f"{mode}: decode tokens/s (median of {args.repeat}) wall / CPU")
        for kind in kinds:
            print(f"  {kind:>5} constrained: {tps[kind]:8.0f} / {cps[kind]:8.0f}   "
                  f"ratio to none: {tps[kind] / tps['none']:.2f} / {cps[kind] / cps['none']:.2f}")


if __name__ == "__main__":
    main()
