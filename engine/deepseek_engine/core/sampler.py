"""Token selection, one row of logits per sequence.

Each row is processed on its own, with its request's own ``torch.Generator``, so the
choice for a request never depends on the other rows of the batch: greedy rows take
the arg-max (ties go to the lowest ID), sampled rows apply temperature, top-k and
top-p and then draw with the exponential-race trick (``argmax(p / E)`` with
``E ~ Exp(1)`` i.i.d., which picks index ``i`` with probability ``p_i``). A sampled
row always consumes exactly one vocabulary-sized draw from its generator.
"""

from __future__ import annotations

import deepseek_kernels as ops
import torch

from deepseek_engine.core.sequence import TokenLogprob
from deepseek_engine.sampling_params import SamplingParams


def filtered_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """The distribution a sampled row draws from: temperature, then top-k, then top-p."""
    logits = logits.float() / params.temperature
    vocab = logits.shape[-1]
    if 0 < params.top_k < vocab:
        kth = torch.topk(logits, params.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if params.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        cum = torch.cumsum(sorted_probs, dim=-1)
        # Keep the smallest prefix whose mass reaches top_p (the top token always stays).
        drop_sorted = (cum - sorted_probs) >= params.top_p
        drop = torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum()
    return probs


def sample_row(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> int:
    """Pick the next token from one row of logits ``[vocab]``."""
    if params.greedy:
        return int(torch.argmax(logits))
    probs = filtered_probs(logits, params)
    noise = torch.empty_like(probs).exponential_(generator=generator).clamp_min_(1e-30)
    return int(ops.sample_tokens(probs[None], noise[None])[0])


def row_logprobs(logits: torch.Tensor, token: int, num_top: int) -> TokenLogprob:
    """Log probability of ``token`` and the ``num_top`` most likely tokens, from raw logits."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    top: list[tuple[int, float]] = []
    if num_top > 0:
        values, ids = torch.topk(logp, num_top)
        top = [(int(i), float(v)) for i, v in zip(ids.tolist(), values.tolist())]
    return TokenLogprob(float(logp[token]), top)
