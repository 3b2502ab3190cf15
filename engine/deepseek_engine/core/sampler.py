"""Token selection, one row of logits per sequence.

Each row is processed on its own, with its request's own ``torch.Generator``, so the
choice for a request never depends on the other rows of the batch: greedy rows take
the arg-max (ties go to the lowest ID), sampled rows apply temperature, top-k and
top-p and then draw with the exponential-race trick (``argmax(p / E)`` with
``E ~ Exp(1)`` i.i.d., which picks index ``i`` with probability ``p_i``). A sampled
row always consumes exactly one vocabulary-sized draw from its generator
(``exponential_noise``).
"""

from __future__ import annotations

import math

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
        probs = probs.masked_fill(~top_p_keep(probs, params.top_p), 0.0)
        probs = probs / probs.sum()
    return probs


#: The bits of a float32 a top-p pass buckets by: the sign, exponent and 7 mantissa bits first, then the rest.
_HIGH_SHIFT = 16
_LOW_MASK = (1 << _HIGH_SHIFT) - 1


def top_p_keep(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Which tokens the nucleus keeps: in order of falling probability, every token whose preceding mass is
    below ``top_p`` (so the top token always stays). Among tokens of equal probability the lower IDs come
    first.

    No sort of the vocabulary: probabilities are non-negative, so the order of their float32 bit patterns is
    their order. One weighted histogram over the high 16 bits finds the bucket where the falling mass crosses
    ``top_p``, a second over that bucket's low 16 bits finds the exact threshold value; masses are summed in
    float64. About 2 ms for a 129,280-token row where a sort takes about 12. A row with NaN probabilities (a
    broken model) keeps every token rather than failing the step."""
    bits = probs.contiguous().view(torch.int32)
    high = bits >> _HIGH_SHIFT
    if int(high.min()) < 0:  # a sign bit: a NaN of the kind x86 arithmetic makes (softmax gives no -0.0)
        return torch.ones_like(probs, dtype=torch.bool)
    weights = probs.double()
    # above[b]: the mass of the buckets over b. The threshold's bucket is the lowest occupied one with
    # above < top_p: every bucket over it is kept whole, every occupied one under it dropped whole.
    mass = torch.bincount(high, weights=weights)
    count = torch.bincount(high, minlength=mass.numel())
    if not math.isfinite(float(mass.sum())):  # NaN probabilities: no threshold to find
        return torch.ones_like(probs, dtype=torch.bool)
    above = _mass_above(mass)
    bucket = int(torch.nonzero((above < top_p) & (count > 0))[0])
    inside = high == bucket
    low = bits[inside] & _LOW_MASK
    low_mass = torch.bincount(low, weights=weights[inside])
    low_count = torch.bincount(low, minlength=low_mass.numel())
    low_above = above[bucket] + _mass_above(low_mass)
    level = int(torch.nonzero((low_above < top_p) & (low_count > 0))[0])
    threshold = (bucket << _HIGH_SHIFT) | level
    keep = bits > threshold
    # Ties at the threshold value: the j-th (by ID) is kept while the mass before it is below top_p.
    ties = torch.nonzero(bits == threshold).flatten()
    value = float(probs[ties[0]])
    before = float(low_above[level])
    kept_ties = ties.numel() if value == 0.0 else min(ties.numel(), math.ceil((top_p - before) / value))
    keep[ties[:max(1, kept_ties)]] = True
    return keep


def _mass_above(mass: torch.Tensor) -> torch.Tensor:
    """``out[i] = sum(mass[i + 1:])``."""
    inclusive = torch.flip(torch.cumsum(torch.flip(mass, (0,)), 0), (0,))
    return torch.cat([inclusive[1:], inclusive.new_zeros(1)])


def sample_row(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> int:
    """Pick the next token from one row of logits ``[vocab]``."""
    if params.greedy:
        return int(torch.argmax(logits))
    probs = filtered_probs(logits, params)
    return int(ops.sample_tokens(probs[None], exponential_noise(probs, generator)[None])[0])


def exponential_noise(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One Exp(1) draw per entry of ``probs`` (float32, clamped away from 0), as ``-log U`` of float64
    uniforms: the same distribution as ``Tensor.exponential_``, at 2.5x its speed on CPU (1.3 against 3.2 ms for
    a 129,280-token row)."""
    return torch.rand(probs.shape, generator=generator, dtype=torch.float64).log_().neg_().float().clamp_min_(1e-30)


def row_logprobs(logits: torch.Tensor, token: int, num_top: int) -> TokenLogprob:
    """Log probability of ``token`` and the ``num_top`` most likely tokens, from raw logits."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    top: list[tuple[int, float]] = []
    if num_top > 0:
        values, ids = torch.topk(logp, num_top)
        top = [(int(i), float(v)) for i, v in zip(ids.tolist(), values.tolist())]
    return TokenLogprob(float(logp[token]), top)
