"""Speculative decoding of one sequence: draft, verify in one target pass, keep the accepted prefix.

A step, with the last sampled token ``a`` at position ``P`` (not yet run
through the target):

1. the drafter proposes ``d_1 .. d_n`` for positions ``P+1 .. P+n``;
2. ``b`` of them are verified: all ``n`` (fixed-k), or, with adaptive
   verification, the ``b`` that maximises expected accepted tokens per unit
   of step cost (survival products of the DSpark confidences,
   :func:`~deepseek_engine.speculative.dspark.adaptive_budget`);
3. the target runs ``[a, d_1 .. d_b]`` at ``P .. P+b`` in one forward;
4. :mod:`~deepseek_engine.speculative.rejection` keeps the longest acceptable
   prefix ``d_1 .. d_m`` and adds one token from the target (the correction or
   the bonus), so a step emits ``m + 1`` tokens;
5. roll back: the target cache is set to hold ``P + 1 + m`` tokens. Every
   piece of target state is addressed by position (window KV, compressor rows,
   compressed entries, index keys, engram token history; see
   :mod:`deepseek_engine.kv_cache_v41`), is only read below the cache's token
   count, and is rewritten before it is read again; the drafter's caches follow
   the same rule. Nothing else has to be undone.

Greedy output equals greedy decoding without speculation token for token (up
to float rounding of the target's logits between a one-token step and a
multi-token verification pass). Sampled output keeps the target's
distribution (rejection sampling).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from deepseek_engine.sampler import filtered_probs, sample_row
from deepseek_engine.sampling_params import SamplingParams
from deepseek_engine.speculative.rejection import (
    draw,
    target_distribution,
    verify_greedy,
    verify_sampling,
)


@dataclass
class SpeculativeConfig:
    """``method``: ``"dspark"`` (V4.1) or ``"mtp"`` (V4); ``num_speculative_tokens`` drafts per step.

    ``adaptive`` (DSpark only) verifies the confidence-chosen number of drafts;
    ``costs[b]`` is the relative cost of a step verifying ``b`` drafts (default:
    ``1 + verify_cost_per_token * b``).
    """

    method: str
    num_speculative_tokens: int = 3
    adaptive: bool = False
    costs: list[float] | None = None
    verify_cost_per_token: float = 0.1

    def __post_init__(self) -> None:
        if self.method not in ("dspark", "mtp"):
            raise ValueError(f"unknown speculative method {self.method!r} (expected 'dspark' or 'mtp')")
        if self.num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be at least 1")
        if self.adaptive and self.method != "dspark":
            raise ValueError("adaptive verification needs DSpark's confidence head")

    def step_costs(self) -> list[float]:
        n = self.num_speculative_tokens
        if self.costs is not None:
            if len(self.costs) != n + 1:
                raise ValueError(f"costs needs {n + 1} entries (verifying 0 .. {n} drafts)")
            return list(self.costs)
        return [1.0 + self.verify_cost_per_token * b for b in range(n + 1)]


@dataclass
class SpeculativeResult:
    token_ids: list[int]
    finish_reason: str
    accepted_per_step: list[int] = field(default_factory=list)  # drafts accepted in each step
    verify_lengths: list[int] = field(default_factory=list)     # drafts verified in each step
    target_forwards: int = 0
    seconds: float = 0.0

    @property
    def tokens_per_target_forward(self) -> float:
        return len(self.token_ids) / max(1, self.target_forwards)


class SpeculativeDecoder:
    """Runs the speculative loop for a target model and its drafter (see the module docstring)."""

    def __init__(self, target, drafter, spec: SpeculativeConfig, block_size: int = 16) -> None:
        self.target, self.drafter, self.spec, self.block_size = target, drafter, spec, block_size
        self.v41 = spec.method == "dspark"

    # -- target passes -------------------------------------------------------------------------
    def _target(self, ids: list[int], start: int, cache):
        t = self.target
        input_ids = torch.tensor(ids, dtype=torch.long, device=t.device)
        positions = torch.arange(start, start + len(ids), device=t.device)
        cache.num_tokens = start
        if self.v41:
            logits, aux = t.forward_with_aux(input_ids, positions, cache, self.target.config.dspark_target_layer_ids)
            return logits, aux
        streams = _v4_streams(t, input_ids, positions, cache)
        logits = t.head(t.norm(_v4_head(t, streams))).float()
        return logits, streams

    def _draft(self, anchor: int, start: int, history: list[int], ctx, dcache, pick):
        """Drafts, their logits rows and confidences (``None`` for MTP)."""
        n = self.spec.num_speculative_tokens
        t = self.target
        if self.v41:
            return self.drafter.propose(anchor, start, n, t.embed, t.head, dcache, pick)
        streams = ctx  # MTP output streams at position start - 1 (predicting the token at start + 1)
        drafts, rows = [], []
        pos = start - 1
        for j in range(n):
            logits = self.drafter.logits(streams, t.head)[-1]
            token = pick(logits, j)
            drafts.append(token)
            rows.append(logits)
            if j + 1 < n:
                streams = self.drafter.step(streams[-1:], torch.tensor([token], device=t.device),
                                            torch.tensor([pos + 1], device=t.device), t.embed, dcache)
                pos += 1
        return drafts, torch.stack(rows), None

    def _absorb(self, aux, tokens: list[int], start: int, dcache):
        """Give the drafter the target's view of accepted positions ``start ..``; return MTP's last streams."""
        if self.v41:
            positions = torch.arange(start, start + aux.shape[0], device=aux.device)
            self.drafter.store_context(aux, positions, dcache)
            return None
        positions = torch.arange(start, start + aux.shape[0], device=aux.device)
        nxt = torch.tensor(tokens, dtype=torch.long, device=aux.device)
        return self.drafter.step(aux, nxt, positions, self.target.embed, dcache)

    # -- the loop --------------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompt: list[int], params: SamplingParams, generator: torch.Generator,
                 eos_token_ids: set[int] | frozenset = frozenset(), max_len: int | None = None) -> SpeculativeResult:
        t0 = time.perf_counter()
        n = self.spec.num_speculative_tokens
        max_tokens = params.max_tokens or 1 << 30
        limit = len(prompt) + max_tokens + n + 2
        if max_len is not None:
            limit = min(limit, max_len + n + 2)
        cache = self.target.new_cache(limit, self.block_size)
        dcache = self.drafter.new_cache(limit, self.block_size, self.target.dtype, self.target.device)
        logits, aux = self._target(prompt, 0, cache)
        result = SpeculativeResult([], "length", target_forwards=1)
        first = sample_row(logits[-1], params, generator)
        tokens = list(prompt) + [first]
        ctx = self._absorb(aux, tokens[1:len(prompt) + 1], 0, dcache)
        costs = self.spec.step_costs()

        def pick(row: torch.Tensor, j: int) -> int:
            if params.greedy:
                return int(torch.argmax(row))
            return draw(filtered_probs(row, params), generator)

        def finished() -> str | None:
            last = tokens[-1]
            if (not params.ignore_eos and last in eos_token_ids) or last in params.stop_token_ids:
                return "stop"
            if len(tokens) - len(prompt) >= max_tokens or (max_len is not None and len(tokens) >= max_len):
                return "length"
            return None

        reason = finished()
        while reason is None:
            start = len(tokens) - 1  # position of the last sampled token
            drafts, draft_rows, conf = self._draft(tokens[-1], start, tokens, ctx, dcache, pick)
            b = adaptive(conf, costs) if self.spec.adaptive else n
            drafts, draft_rows = drafts[:b], draft_rows[:b]
            logits, aux = self._target([tokens[-1]] + drafts, start, cache)
            result.target_forwards += 1
            if params.greedy:
                emitted = verify_greedy(logits, drafts)
            else:
                q = target_distribution(draft_rows, params) if drafts else logits.new_zeros((0, logits.shape[-1]))
                emitted = verify_sampling(target_distribution(logits, params), q, drafts, generator)
            m = len(emitted) - 1
            result.accepted_per_step.append(m)
            result.verify_lengths.append(b)
            cache.num_tokens = start + 1 + m  # roll back: rows of rejected drafts are never read again
            accepted_aux = aux[: m + 1]
            for token in emitted:
                tokens.append(token)
                reason = finished()
                if reason is not None:
                    break
            if reason is None:
                ctx = self._absorb(accepted_aux, tokens[start + 1:start + 2 + m], start, dcache)
        result.token_ids = tokens[len(prompt):]
        result.finish_reason = reason
        result.seconds = time.perf_counter() - t0
        return result


def adaptive(conf, costs: list[float]) -> int:
    from deepseek_engine.speculative.dspark import adaptive_budget

    return adaptive_budget(conf, costs)


def _v4_streams(model, input_ids: torch.Tensor, positions: torch.Tensor, cache) -> torch.Tensor:
    """Final residual streams of a V4 model (what ``forward_sequence`` computes before its head mix)."""
    cache.check_step(positions)
    h = model.embed(input_ids)
    streams = h.unsqueeze(1).expand(-1, model.config.hc_mult, -1).contiguous()
    for layer in model.layers:
        streams = layer(streams, input_ids, positions, cache)
    cache.num_tokens += input_ids.numel()
    return streams


def _v4_head(model, streams: torch.Tensor) -> torch.Tensor:
    from deepseek_engine.layers.hyper_connection import hyper_head

    c = model.config
    return hyper_head(streams, model.hc_head_fn, model.hc_head_base, model.hc_head_scale, c.hc_eps, c.rms_norm_eps)
