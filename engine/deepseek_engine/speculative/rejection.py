"""Verification of drafted tokens against the target model (greedy and rejection sampling).

Greedy: draft ``d_i`` is accepted while it equals the target's arg-max at its
position; the first mismatch is replaced by the target's arg-max, and when all
drafts pass the target's next arg-max is appended. The tokens produced are
exactly those of greedy decoding without speculation.

Sampling (Leviathan et al., Chen et al.): with the target's filtered
distribution ``p_i`` and the draft's ``q_i`` at position ``i``, draft ``d_i`` is
accepted with probability ``min(1, p_i(d_i) / q_i(d_i))``; on the first
rejection the replacement is drawn from ``max(p_i - q_i, 0)`` (renormalised);
when every draft is accepted a bonus token is drawn from ``p_k``. Each emitted
token is then distributed exactly as ``p`` (the target's own sampling
distribution), whatever ``q`` is. A draft with ``q_i(d_i) = 0`` is rejected.
"""

from __future__ import annotations

import torch

from deepseek_engine.core.sampler import exponential_noise, filtered_probs
from deepseek_engine.sampling_params import SamplingParams


def verify_greedy(target_logits: torch.Tensor, drafts: list[int]) -> list[int]:
    """Tokens emitted for ``drafts`` given the target's logits ``[len(drafts) + 1, vocab]``."""
    picks = torch.argmax(target_logits, dim=-1).tolist()
    out = []
    for i, d in enumerate(drafts):
        if picks[i] != d:
            out.append(picks[i])
            return out
        out.append(d)
    out.append(picks[len(drafts)])
    return out


def draw(probs: torch.Tensor, generator: torch.Generator) -> int:
    """One token from ``probs`` (exponential race, one vocabulary-sized draw)."""
    return int(torch.argmax(probs / exponential_noise(probs, generator)))


def verify_sampling(target_probs: torch.Tensor, draft_probs: torch.Tensor, drafts: list[int],
                    generator: torch.Generator) -> list[int]:
    """Rejection sampling: ``target_probs`` ``[k + 1, V]``, ``draft_probs`` ``[k, V]`` (the rows drafts came from)."""
    out = []
    for i, d in enumerate(drafts):
        p, q = target_probs[i], draft_probs[i]
        u = float(torch.rand((), generator=generator))
        if q[d] > 0 and u * float(q[d]) < float(p[d]):
            out.append(d)
            continue
        residual = (p - q).clamp_min(0)
        if float(residual.sum()) <= 0:  # p == q: cannot happen after a rejection, kept for safety
            residual = p
        out.append(draw(residual / residual.sum(), generator))
        return out
    out.append(draw(target_probs[len(drafts)], generator))
    return out


def target_distribution(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Row-wise sampling distribution of the target (temperature, top-k, top-p)."""
    return torch.stack([filtered_probs(row, params) for row in logits])
