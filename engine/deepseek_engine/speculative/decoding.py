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
   :mod:`deepseek_engine.models.deepseek_v41.kv_cache`), is only read below the cache's token
   count, and is rewritten before it is read again; the drafter's caches follow
   the same rule. Nothing else has to be undone.

Greedy output equals greedy decoding without speculation token for token (up
to float rounding of the target's logits between a one-token step and a
multi-token verification pass). Sampled output keeps the target's
distribution (rejection sampling).

A constrained run (``SamplingParams.constraint``, :mod:`deepseek_engine.core.constraint`) walks its
matcher through the drafts as they are proposed: draft ``j`` is picked from the drafter's logits masked
by the grammar's bitmask after the ``j - 1`` drafts before it (a draft the grammar forbids cannot be
proposed; drafting stops after an ending token or where the grammar terminates, and a draft the matcher
refuses is dropped there). The same bitmask rows mask the target's logits before verification, so the
verifier's tokens obey the grammar too and sampled verification keeps the target's *masked*
distribution (the drafts' ``q`` is the masked drafter distribution they were drawn from). After
verification the matcher rolls back the rejected drafts and accepts the correction or bonus token: its
state is again that of the run's tokens. Greedy output with a constraint equals greedy constrained
decoding without speculation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import deepseek_kernels as ops
import numpy as np
import torch

from deepseek_engine.core.constraint import SequenceConstraint, TokenMasks
from deepseek_engine.core.sampler import filtered_probs, sample_row
from deepseek_engine.sampling_params import SamplingParams
from deepseek_engine.speculative.config import SpeculativeConfig
from deepseek_engine.speculative.rejection import (
    draw,
    target_distribution,
    verify_greedy,
    verify_sampling,
)

__all__ = ["SpeculativeConfig", "SpeculativeDecoder", "SpeculativeResult", "SpeculativeRun"]


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
        self.masks = TokenMasks()

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
    def cache_tokens(self, prompt: list[int], params: SamplingParams, max_len: int | None = None) -> int:
        """Positions a run's caches must hold: the prompt, every new token and a step's drafts beyond them."""
        n = self.spec.num_speculative_tokens
        limit = len(prompt) + (params.max_tokens or 1 << 30) + n + 2
        return limit if max_len is None else min(limit, max_len + n + 2)

    @torch.no_grad()
    def begin(self, prompt: list[int], params: SamplingParams, generator: torch.Generator,
              eos_token_ids: set[int] | frozenset = frozenset(), max_len: int | None = None,
              cache=None, constraint: SequenceConstraint | None = None) -> SpeculativeRun:
        """Prefill ``prompt`` into fresh target and drafter caches (``cache``: the target cache to use, e.g. a
        block table of a pool that other runs share) and sample the first token (``constraint``: the run's
        grammar state, see the module docstring)."""
        t0 = time.perf_counter()
        max_tokens = params.max_tokens or 1 << 30
        limit = self.cache_tokens(prompt, params, max_len)
        if cache is None:
            cache = self.target.new_cache(limit, self.block_size)
        dcache = self.drafter.new_cache(limit, self.block_size, self.target.dtype, self.target.device)
        logits, aux = self._target(prompt, 0, cache)
        run = SpeculativeRun(list(prompt), params, generator, frozenset(eos_token_ids), max_len, max_tokens,
                             cache, dcache, SpeculativeResult([], "length", target_forwards=1), constraint=constraint)
        row = logits[-1]
        if constraint is not None:
            row = row[None].float().clone()
            buf = self.masks.buffer(1, constraint.words)
            constraint.fill(buf.numpy().view(np.uint32), 0)
            ops.apply_token_bitmask_(row, buf)
            row = row[0]
        run.tokens.append(sample_row(row, params, generator))
        run.ctx = self._absorb(aux, run.tokens[1:len(prompt) + 1], 0, dcache)
        run.reason = run.finished()
        if constraint is not None and run.reason != "stop" and constraint.advance(run.tokens[-1]):
            run.reason = "stop"
        run.result.seconds += time.perf_counter() - t0
        return run

    @torch.no_grad()
    def advance(self, run: SpeculativeRun) -> None:
        """One speculative step of an unfinished run: draft, verify in one target pass, keep the accepted part."""
        t0 = time.perf_counter()
        step = self.propose(run)
        logits, aux = self._target(step.ids, step.start, run.cache)
        self.settle(run, step, logits, aux)
        run.result.seconds += time.perf_counter() - t0

    @torch.no_grad()
    def propose(self, run: SpeculativeRun) -> PendingStep:
        """The first half of a step: the drafts to verify and the target's input ``[last token, drafts...]``."""
        n = self.spec.num_speculative_tokens
        params, generator, tokens = run.params, run.generator, run.tokens
        walk = None if run.constraint is None else \
            _GrammarWalk(run.constraint, self.masks.buffer(n + 1, run.constraint.words), tokens[len(run.prompt):])

        def pick(row: torch.Tensor, j: int) -> int:
            if walk is not None:
                row = walk.masked(row, j)
            token = int(torch.argmax(row)) if params.greedy else draw(filtered_probs(row, params), generator)
            if walk is not None:
                walk.take(token, j)
            return token

        start = len(tokens) - 1  # position of the last sampled token
        drafts, draft_rows, conf = self._draft(tokens[-1], start, tokens, run.ctx, run.dcache, pick)
        b = adaptive(conf, self.spec.step_costs()) if self.spec.adaptive else n
        if walk is None:
            return PendingStep(start, [tokens[-1]] + drafts[:b], drafts[:b], draft_rows[:b], b)
        b = min(b, walk.limit)
        rows = torch.stack(walk.rows[:b]) if b else draft_rows[:0]
        return PendingStep(start, [tokens[-1]] + drafts[:b], drafts[:b], rows, b, *walk.verify_masks(b))

    @torch.no_grad()
    def settle(self, run: SpeculativeRun, step: PendingStep, logits: torch.Tensor, aux) -> None:
        """The second half of a step, from the target's logits (and DSpark context) of ``step.ids``: verify, keep
        the accepted prefix, roll the caches back, give the drafter the accepted positions."""
        params, generator, tokens, result = run.params, run.generator, run.tokens, run.result
        start, drafts, draft_rows, b = step.start, step.drafts, step.draft_rows, step.budget
        result.target_forwards += 1
        constraint = run.constraint
        if step.lost:  # the grammar state is lost: the run ends with the tokens it has
            run.cache.num_tokens = start + 1
            run.reason = "stop"
            return
        if step.bitmask is not None:
            logits = logits.float().contiguous()
            ops.apply_token_bitmask_(logits, step.bitmask)  # the verifier's tokens obey the grammar too
        if params.greedy:
            emitted = verify_greedy(logits, drafts)
        else:
            q = target_distribution(draft_rows, params) if drafts else logits.new_zeros((0, logits.shape[-1]))
            emitted = verify_sampling(target_distribution(logits, params), q, drafts, generator)
        m = len(emitted) - 1
        result.accepted_per_step.append(m)
        result.verify_lengths.append(b)
        output = tokens[len(run.prompt):]
        if constraint is not None and step.fed > m and not constraint.rollback(
                step.fed - m, lambda: output + drafts[:m]):  # the rejected drafts leave the matcher
            run.cache.num_tokens = start + 1
            run.reason = "stop"  # the grammar state is lost: the run ends with the tokens it has
            return
        run.cache.num_tokens = start + 1 + m  # roll back: rows of rejected drafts are never read again
        for i, token in enumerate(emitted):
            tokens.append(token)
            run.reason = run.finished()
            if constraint is not None and run.reason != "stop" and (
                    constraint.advance(token) if i == m  # the correction or bonus token
                    else i == step.fed - 1 and step.terminal):  # a draft after which the grammar allows nothing
                run.reason = "stop"
            if run.reason is not None:
                if constraint is not None and min(step.fed, m) > i + 1:  # drafts cut off by the end
                    constraint.rollback(min(step.fed, m) - (i + 1), lambda: tokens[len(run.prompt):])
                break
        if run.reason is None:
            run.ctx = self._absorb(aux[: m + 1], tokens[start + 1:start + 2 + m], start, run.dcache)

    def generate(self, prompt: list[int], params: SamplingParams, generator: torch.Generator,
                 eos_token_ids: set[int] | frozenset = frozenset(), max_len: int | None = None,
                 constraint: SequenceConstraint | None = None) -> SpeculativeResult:
        run = self.begin(prompt, params, generator, eos_token_ids, max_len, constraint=constraint)
        while run.reason is None:
            self.advance(run)
        return run.outcome()


@dataclass
class PendingStep:
    """A step between :meth:`SpeculativeDecoder.propose` and :meth:`SpeculativeDecoder.settle`: the target runs
    ``ids`` (the last sampled token, then the drafts to verify) at positions ``start ..``."""

    start: int
    ids: list[int]
    drafts: list[int]
    draft_rows: torch.Tensor  # the rows the drafts were picked from (masked by the grammar when constrained)
    budget: int
    # Constrained runs: the bitmask of each of the ``budget + 1`` target rows, how many drafts the matcher
    # accepted, and whether it terminated after the last of them.
    bitmask: torch.Tensor | None = None
    fed: int = 0
    terminal: bool = False
    lost: bool = False


@dataclass
class SpeculativeRun:
    """One request in the speculative loop: its tokens, private caches and statistics so far."""

    prompt: list[int]
    params: SamplingParams
    generator: torch.Generator
    eos_token_ids: frozenset
    max_len: int | None
    max_tokens: int
    cache: object
    dcache: object
    result: SpeculativeResult
    tokens: list[int] = field(default_factory=list)
    ctx: object = None
    reason: str | None = None
    constraint: SequenceConstraint | None = None

    def __post_init__(self) -> None:
        if not self.tokens:
            self.tokens = list(self.prompt)

    def finished(self) -> str | None:
        last, params = self.tokens[-1], self.params
        if (not params.ignore_eos and last in self.eos_token_ids) or last in params.stop_token_ids:
            return "stop"
        if len(self.tokens) - len(self.prompt) >= self.max_tokens or (
                self.max_len is not None and len(self.tokens) >= self.max_len):
            return "length"
        return None

    def outcome(self) -> SpeculativeResult:
        self.result.token_ids = self.tokens[len(self.prompt):]
        self.result.finish_reason = self.reason or "length"
        return self.result


class _GrammarWalk:
    """A constrained run's matcher walked through one step's drafts (see the module docstring).

    ``masked(row, j)`` is the drafter's row ``j`` masked by the grammar after drafts ``0 .. j - 1`` (that
    bitmask is row ``j`` of ``buf``, and masks the target's row ``j`` later); ``take(token, j)`` feeds draft
    ``j``. ``limit`` is how many drafts are worth verifying: drafting stops after an ending token or a
    draft where the grammar terminates, and before a draft the matcher refuses.
    """

    def __init__(self, constraint: SequenceConstraint, buf: torch.Tensor, output: list[int]) -> None:
        self.constraint, self.buf, self.output = constraint, buf, output  # output: the run's tokens so far
        self.words = buf.numpy().view(np.uint32)
        self.rows: list[torch.Tensor] = []
        self.drafts: list[int] = []  # the drafts the matcher accepted
        self._stop: int | None = None  # drafts kept, once drafting is over
        self.fed = 0
        self.terminal = False
        self.lost = False  # the matcher could not be rolled back (nor rebuilt)

    def masked(self, row: torch.Tensor, j: int) -> torch.Tensor:
        if self._stop is not None:
            return row  # past the end of what will be verified
        self.constraint.fill(self.words, j)
        row = row[None].float().clone()
        ops.apply_token_bitmask_(row, self.buf[j:j + 1])
        self.rows.append(row[0])
        return row[0]

    def take(self, token: int, j: int) -> None:
        if self._stop is not None:
            return
        c = self.constraint
        if token in c.end_tokens:
            self._stop = j + 1
        elif not _accepts(c, token):
            self._stop = j
        else:
            self.fed += 1
            self.drafts.append(token)
            if c.matcher.is_terminated():
                self._stop, self.terminal = j + 1, True

    @property
    def limit(self) -> int:
        return len(self.rows) if self._stop is None else self._stop

    def verify_masks(self, b: int) -> tuple[torch.Tensor, int, bool, bool]:
        """For verifying ``b`` drafts: the target rows' bitmasks ``[b + 1, words]``, the drafts the matcher holds
        whether it terminated after them (drafts beyond ``b`` are rolled back first), and whether the matcher
        was lost (it could not be rolled back)."""
        if self.fed > b:
            if not self.constraint.rollback(self.fed - b, lambda: self.output + self.drafts[:b]):
                self.lost = True  # settle ends the run
            self.fed, self.terminal = b, False
        if self.fed == b and not self.terminal:
            self.constraint.fill(self.words, b)  # the bonus row: the grammar after every draft
        else:
            self.buf[b] = -1  # after an ending or terminal draft: the run ends there, the row is not used
        return self.buf[:b + 1].clone(), self.fed, self.terminal, self.lost


def _accepts(constraint: SequenceConstraint, token: int) -> bool:
    """Whether the matcher takes a draft (a matcher that fails refuses it; the draft is dropped)."""
    try:
        return constraint.matcher.accept_token(token)
    except Exception:  # noqa: BLE001 - a broken grammar costs its own drafts, never the step
        return False


def run_lockstep(steps: list[tuple[SpeculativeDecoder, SpeculativeRun]]) -> None:
    """Advance every unfinished run by one speculative step per round until all are finished.

    Requests progress together (a long request does not hold the others back); each
    run's tokens depend only on its own prompt, parameters and generator.
    """
    plan = None  # the target's step plan for the batched passes, built once for the call
    while True:
        active = [(dec, run) for dec, run in steps if run.reason is None]
        if not active:
            return
        together: dict[int, list] = {}  # DSpark runs whose target caches share a pool: one batched pass
        for dec, run in active:
            if dec.v41 and hasattr(dec.target, "layers"):
                together.setdefault(id(run.cache.pool), []).append((dec, run))
        for group in together.values():
            if len(group) > 1:
                if plan is None:
                    from deepseek_engine.models.deepseek_v41.step_plan import V41StepPlan

                    plan = V41StepPlan(group[0][0].target)
                verify_together(group, plan)
        for dec, run in active:
            if len(together.get(id(run.cache.pool), ())) <= 1:
                dec.advance(run)


@dataclass
class _StepContext:
    """The batch context of :func:`verify_together`'s target pass (the model-runner contract's fields)."""

    kv: object
    query_start_loc: list[int]
    context_lens: list[int]
    block_tables: list[list[int]]
    slot_mapping: torch.Tensor | None = None
    logits_indices: torch.Tensor | None = None


@torch.no_grad()
def verify_together(group: list[tuple[SpeculativeDecoder, SpeculativeRun]], plan=None) -> None:
    """One step of several DSpark runs over one target pool: each run drafts on its own, then every run's
    ``[last token, drafts...]`` goes through the target in one batched pass (``batched_hidden``: each row the
    bits of its run alone), then each run verifies and rolls back on its own."""
    from deepseek_engine.layers.packed_linear import matrix
    from deepseek_engine.layers.row_invariant import linear
    from deepseek_engine.models.deepseek_v41.serving import batched_hidden

    t0 = time.perf_counter()
    target = group[0][0].target
    steps = [dec.propose(run) for dec, run in group]
    ids = [i for step in steps for i in step.ids]
    positions = [p for step in steps for p in range(step.start, step.start + len(step.ids))]
    starts = [0]
    for step in steps:
        starts.append(starts[-1] + len(step.ids))
    ctx = _StepContext(group[0][1].cache.pool, starts, [s.start + len(s.ids) for s in steps],
                       [run.cache.block_table for _, run in group])
    aux: list[torch.Tensor] = []
    layers = tuple(target.config.dspark_target_layer_ids)
    h = batched_hidden(target, torch.tensor(ids, device=target.device), torch.tensor(positions, device=target.device),
                       ctx, plan=plan, aux_layers=layers, aux=aux)
    logits = linear(h, matrix(target.head)).float()
    context = torch.cat(aux, dim=-1)
    share = (time.perf_counter() - t0) / len(group)
    for (dec, run), step, a, b in zip(group, steps, starts[:-1], starts[1:]):
        t1 = time.perf_counter()
        run.cache.num_tokens = b - a + step.start
        dec.settle(run, step, logits[a:b], context[a:b])
        run.result.seconds += share + time.perf_counter() - t1


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
