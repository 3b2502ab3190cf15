"""Speculative decoding on the tiny V4.1 checkpoint: plain greedy vs DSpark fixed-k vs adaptive verification.

Random draft weights almost never agree with a random target, which would make
any comparison meaningless, so the drafter is *constructed* to agree often:

1. the target decodes greedily from the benchmark's own prompts; every
   (previous token -> next token) pair it produces is counted (the drafter is
   fitted to the continuations it is then asked to predict, standing in for
   a well-trained drafter; a random target's next token is too weakly tied to
   its previous one for a table from other prompts to help);
2. the drafter's Markov head becomes that bigram table: ``markov_head.embed``
   is the identity (rank = vocabulary size), ``markov_head.head[next, prev] =
   10`` for the most frequent successor of ``prev``; the draft stack's final
   ``norm`` is zeroed, so the base logits vanish and each draft is the table's
   successor of the previous draft;
3. the confidence head reads the one-hot Markov embedding only: its weight for
   ``prev`` is the log-odds of how often the table's successor of ``prev``
   was right during calibration.

Then every method decodes the same held-out prompts (greedy, identical
outputs, which is checked) and the script prints tokens per target forward,
tokens per second and their ratios to plain decoding measured in the same run.
This is a measurement, not a test.

    .venv/bin/python benchmarks/speculative.py [--prompts 8] [--max-tokens 48] [--k 4]
    .venv/bin/python benchmarks/engine.py --speculative   (the same)
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine"))

from deepseek_engine.models.loader import load_model  # noqa: E402
from deepseek_engine.sampling_params import SamplingParams  # noqa: E402
from deepseek_engine.speculative import SpeculativeConfig, SpeculativeLLM  # noqa: E402
from deepseek_engine.speculative.dspark import DSparkDrafter  # noqa: E402

CHECKPOINT = ROOT / "tests" / "engine" / "data" / "tiny_v41"


def greedy(model, prompt: list[int], steps: int) -> tuple[list[int], int]:
    cache = model.new_cache(len(prompt) + steps + 1, 16)
    logits = model(torch.tensor(prompt), torch.arange(len(prompt)), cache)
    out = [int(logits[-1].argmax())]
    while len(out) < steps:
        logits = model(torch.tensor([out[-1]]), torch.tensor([cache.num_tokens]), cache)
        out.append(int(logits[-1].argmax()))
    return out, steps


@torch.no_grad()
def agreeing_drafter(model, calibration: list[list[int]], steps: int) -> DSparkDrafter:
    """A DSpark drafter whose Markov head is the target's greedy bigram table (see the module docstring)."""
    follow: dict[int, Counter] = defaultdict(Counter)
    for p in calibration:
        seq = p[-1:] + greedy(model, p, steps)[0]
        for a, b in zip(seq, seq[1:]):
            follow[a][b] += 1
    vocab = model.config.vocab_size
    cfg = model.config.model_copy(update={"dspark_markov_rank": vocab})
    drafter = DSparkDrafter(cfg)
    g = torch.Generator().manual_seed(0)
    for p in drafter.parameters():  # random draft stack (its output is normed away below)
        p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]) if p.dim() >= 2 else torch.ones_like(p))
    drafter.norm.weight.zero_()
    drafter.markov_embed.weight.copy_(torch.eye(vocab))
    drafter.markov_head.weight.zero_()
    drafter.confidence.weight.zero_()
    d = model.config.hidden_size
    drafter.confidence.weight[0, d:] = -4.0  # unseen predecessor: low confidence
    for prev, counts in follow.items():
        nxt, hits = counts.most_common(1)[0]
        drafter.markov_head.weight[nxt, prev] = 10.0
        acc = (hits + 0.5) / (sum(counts.values()) + 1.0)
        drafter.confidence.weight[0, d + prev] = math.log(acc / (1 - acc))
    return drafter.eval()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--checkpoint", type=Path, default=CHECKPOINT)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = load_model(args.checkpoint)
    rng = random.Random(0)
    vocab = model.config.vocab_size

    def prompts(n: int) -> list[list[int]]:
        return [[rng.randrange(3, vocab) for _ in range(rng.randint(8, 24))] for _ in range(n)]

    held_out = prompts(args.prompts)
    drafter = agreeing_drafter(model, held_out, args.max_tokens)
    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, ignore_eos=True)

    t0 = time.perf_counter()
    plain = [greedy(model, p, args.max_tokens)[0] for p in held_out]
    base_s = time.perf_counter() - t0
    base_tokens = sum(len(o) for o in plain)
    print(f"plain greedy: {base_tokens} tokens, {base_tokens / base_s:.1f} tok/s, 1.00 tokens per target forward")
    # Verifying b drafts costs one target pass over b + 1 tokens; a pass's cost grows slowly with its length.
    costs = [1.0 + 0.08 * b for b in range(args.k + 1)]
    for label, spec in (("fixed-k", SpeculativeConfig("dspark", args.k)),
                        ("adaptive", SpeculativeConfig("dspark", args.k, adaptive=True, costs=costs))):
        llm = SpeculativeLLM.from_models(model, drafter, spec)
        t0 = time.perf_counter()
        outs = llm.generate(held_out, params)
        secs = time.perf_counter() - t0
        assert [o.token_ids for o in outs] == plain, "speculative greedy differs from plain greedy"
        tokens = sum(len(o.token_ids) for o in outs)
        forwards = sum(o.target_forwards for o in outs)
        accepted = sum(sum(o.accepted_per_step) for o in outs)
        verified = sum(sum(o.verify_lengths) for o in outs)
        print(f"{label:>8} k={args.k}: {tokens / forwards:.2f} tokens per target forward, "
              f"{tokens / secs:.1f} tok/s ({(tokens / secs) / (base_tokens / base_s):.2f}x plain), "
              f"drafts accepted {accepted}/{verified} verified")


if __name__ == "__main__":
    main()
