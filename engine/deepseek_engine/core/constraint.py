"""Constrained decoding: the matcher contract, and one sequence's grammar state between steps.

A request is constrained by ``SamplingParams(constraint=...)``: a :class:`TokenMatcher` (one request only),
or a :class:`MatcherSource` such as the codec's ``deepseek_recipe.OutputGrammar``, compiled once per request,
whose ``matcher()`` gives every sequence of it (each prompt of a ``generate`` call, each choice of ``n > 1``)
a matcher of its own. The engine drives the matcher; it never looks inside it:

* before a constrained row is sampled, ``fill_bitmask`` writes the row of allowed tokens (bit ``i % 32`` of
  int32 word ``i // 32`` set: token ``i`` allowed) and the logits of every other token become ``-inf``
  (``deepseek_kernels.apply_token_bitmask_``), before temperature, top-k and top-p, greedy rows included.
  Log probabilities are still taken from the model's raw logits.
* the tokens that end the sequence (EOS unless ``ignore_eos``, and ``stop_token_ids``) are allowed exactly
  when ``is_accepting()``: the output may end only where the grammar's language may. They are never fed to
  the matcher; the sequence ends on them.
* a matcher that can plan an end (:class:`ClosingMatcher`, the codec's ``GrammarMatcher``) is given the
  sequence's output budget (``max_tokens``, or what the context leaves): near it the bitmask holds only the
  next token of a valid end the matcher planned, so the output is complete, not cut, when the budget runs
  out (``finish_reason`` "stop"); a sequence with no constraint pays nothing for it.
* every other sampled token is fed to ``accept_token``; a matcher that ``is_terminated()`` afterwards (its
  language allows nothing more) ends the sequence with ``finish_reason`` "stop".
* speculative decoding walks the matcher through its drafts and ``rollback``s the ones the verifier
  rejects (:mod:`deepseek_engine.speculative.decoding`).

The matcher state follows the sequence's output tokens: preemption keeps them (only the cache is
recomputed), and a prefix-cache hit concerns the prompt only, so neither touches the matcher.

Contract for a matcher: a token its last ``fill_bitmask`` allowed is accepted. A grammar at a dead end (no
token allowed and not accepting, i.e. a broken grammar) gets the ending tokens allowed, so that the
sequence ends instead of sampling from nothing; a token refused in spite of the bitmask ends the sequence
too (``finish_reason`` "stop") and is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import deepseek_kernels as ops
import numpy as np
import torch

log = logging.getLogger(__name__)


@runtime_checkable
class TokenMatcher(Protocol):
    """A grammar's state over the tokens generated so far (``deepseek_recipe.GrammarMatcher`` has this shape)."""

    def fill_bitmask(self, buf: Any, index: int = 0) -> None:
        """Write the allowed next tokens into row ``index`` of the writable int32 array ``buf`` ``[n, words]``."""

    def accept_token(self, token: int) -> bool:
        """Advance by one token; ``False`` (state unchanged) when the grammar forbids it."""

    def accept_tokens(self, tokens: Sequence[int]) -> int:
        """Advance by a run of tokens; how many were accepted (it stops at the first forbidden one)."""

    def rollback(self, n: int) -> None:
        """Undo the last ``n`` accepted tokens."""

    def is_accepting(self) -> bool:
        """Whether the output may end here (EOS allowed)."""

    def is_terminated(self) -> bool:
        """Whether the grammar allows no further token."""


@runtime_checkable
class ClosingMatcher(TokenMatcher, Protocol):
    """A matcher that can keep an output valid within a token budget (``deepseek_recipe.GrammarMatcher``):
    ``fill_bitmask(buf, index, max_tokens=N)`` steers to a valid end before ``N`` output tokens."""

    def fill_bitmask(self, buf: Any, index: int = 0, *, max_tokens: int | None = None) -> None:
        """Write the allowed next tokens; with ``max_tokens``, near that budget only a valid end's."""

    def closing_tokens(self, limit: int) -> list[int] | None:
        """The valid end the matcher's planner finds from here (at most ``limit`` tokens, EOS not included)."""


@runtime_checkable
class MatcherSource(Protocol):
    """A compiled constraint that makes a fresh matcher per sequence (``deepseek_recipe.OutputGrammar``)."""

    @property
    def vocab_size(self) -> int:
        """The vocabulary its bitmasks cover (``ceil(vocab_size / 32)`` words per row)."""

    def matcher(self) -> TokenMatcher:
        """A matcher at the start of the output."""


def bitmask_words(vocab_size: int) -> int:
    """Int32 words per bitmask row for ``vocab_size`` tokens."""
    return -(-vocab_size // 32)


def check_constraint(constraint: object) -> None:
    """``ValueError`` unless ``constraint`` is a ``TokenMatcher`` or a ``MatcherSource``."""
    if not isinstance(constraint, (TokenMatcher, MatcherSource)):
        raise ValueError("constraint must be a token matcher (fill_bitmask, accept_token, accept_tokens, rollback, "
                         "is_accepting, is_terminated) or a grammar with matcher() and vocab_size, got "
                         f"{type(constraint).__name__}")


class SequenceConstraint:
    """One sequence's matcher, the width of its bitmask rows and the tokens that would end the sequence."""

    __slots__ = ("_matcher", "_closing", "words", "end_tokens", "source", "max_tokens")

    def __init__(self, matcher: TokenMatcher, words: int, end_tokens: Iterable[int],
                 source: MatcherSource | None = None, max_tokens: int | None = None) -> None:
        self.matcher = matcher
        self.source = source  # the grammar the matcher came from (``None``: a matcher given as it is)
        self.words = words
        self.end_tokens = tuple(sorted({int(t) for t in end_tokens if 0 <= int(t) < 32 * words}))
        self.max_tokens = max_tokens  # the sequence's output budget, ending token included (``None``: none)

    @property
    def matcher(self) -> TokenMatcher:
        return self._matcher

    @matcher.setter
    def matcher(self, matcher: TokenMatcher) -> None:
        self._matcher = matcher
        # whether it takes a budget: checked once per matcher (a runtime-checkable Protocol's isinstance costs
        # tens of microseconds, more than many a bitmask)
        self._closing = isinstance(matcher, ClosingMatcher)

    @classmethod
    def create(cls, constraint: TokenMatcher | MatcherSource, model_vocab: int,
               end_tokens: Iterable[int], max_tokens: int | None = None) -> SequenceConstraint:
        """The state for a new sequence: a fresh matcher from a ``MatcherSource``, or the matcher itself.
        ``max_tokens``: the most output tokens the sequence may have (``max_tokens``, or what the context
        leaves), for a matcher that can steer to a valid end before it (:class:`ClosingMatcher`)."""
        if isinstance(constraint, MatcherSource) and not isinstance(constraint, TokenMatcher):
            return cls(constraint.matcher(), bitmask_words(int(constraint.vocab_size)), end_tokens, constraint,
                       max_tokens)
        vocab = getattr(constraint, "vocab_size", None)
        return cls(constraint, bitmask_words(int(vocab) if vocab is not None else model_vocab), end_tokens,
                   max_tokens=max_tokens)

    def fill(self, rows: np.ndarray, index: int) -> None:
        """Write the allowed tokens into ``rows[index]`` (a uint32 view of the int32 buffer): the matcher's
        bitmask, with the ending tokens allowed exactly when it is accepting (and at a dead end, or when the
        matcher fails: the sequence then ends instead of the engine)."""
        row = rows[index]
        try:
            if self.max_tokens is not None and self._closing:
                self.matcher.fill_bitmask(rows.view(np.int32), index, max_tokens=self.max_tokens)
            else:
                self.matcher.fill_bitmask(rows.view(np.int32), index)
            accepting = self.matcher.is_accepting()
        except Exception:  # noqa: BLE001 - a broken grammar ends its own sequence, never the engine step
            log.exception("a matcher failed to fill its bitmask; the sequence ends")
            row[:] = 0
            accepting = True
        self.finish_row(row, accepting)

    @property
    def budget(self) -> int | None:
        """The ``max_tokens`` its matcher's ``fill_bitmask`` takes (``None``: no budget, or a matcher without one)."""
        return self.max_tokens if self._closing else None

    def finish_row(self, row: np.ndarray, accepting: bool) -> None:
        """The ending tokens in a row the matcher filled: allowed exactly when it is ``accepting`` (and at a dead
        end)."""
        if not self.end_tokens:
            return
        if accepting:
            for t in self.end_tokens:
                row[t >> 5] |= np.uint32(1 << (t & 31))
            return
        for t in self.end_tokens:
            row[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)
        if not row.any():
            log.warning("a grammar allows no token and is not accepting; the sequence ends")
            for t in self.end_tokens:
                row[t >> 5] |= np.uint32(1 << (t & 31))

    def rollback(self, n: int, replay: Callable[[], Sequence[int]]) -> bool:
        """Undo the last ``n`` accepted tokens. A matcher that cannot (llguidance refuses to roll back some
        grammars, e.g. with a token budget) is replaced by a fresh one from its grammar fed ``replay()``, the
        output tokens it must hold afterwards. ``False`` when neither works (the sequence should end)."""
        if n == 0:
            return True
        try:
            self.matcher.rollback(n)
            return True
        except Exception:  # noqa: BLE001 - replayed below, or the sequence ends
            if self.source is None:
                log.exception("a matcher failed to roll back %d tokens; the sequence ends", n)
                return False
        try:
            tokens = [t for t in replay() if t not in self.end_tokens]
            matcher = self.source.matcher()
            if matcher.accept_tokens(tokens) != len(tokens):
                log.warning("a fresh matcher refused the output it must hold; the sequence ends")
                return False
        except Exception:  # noqa: BLE001
            log.exception("a fresh matcher failed to replay the output; the sequence ends")
            return False
        self.matcher = matcher
        return True

    def advance(self, token: int) -> bool:
        """Feed a sampled token; ``True`` when the sequence must end after it (an ending token, a terminated
        matcher, or a token the matcher refused)."""
        if token in self.end_tokens:
            return True
        try:
            if not self.matcher.accept_token(token):
                log.warning("a matcher refused token %d that its bitmask allowed; the sequence ends", token)
                return True
            return self.matcher.is_terminated()
        except Exception:  # noqa: BLE001 - a broken grammar ends its own sequence, never the engine step
            log.exception("a matcher failed to accept token %d; the sequence ends", token)
            return True


def only_token(row: np.ndarray) -> int | None:
    """The token a uint32 bitmask row allows when it allows exactly one, else ``None``."""
    nonzero = np.flatnonzero(row)
    if len(nonzero) != 1:
        return None
    word = int(row[nonzero[0]])
    if word & (word - 1):
        return None
    return int(nonzero[0]) * 32 + word.bit_length() - 1


_BITS = np.arange(32, dtype=np.uint32)


def allowed_tokens(row: np.ndarray, limit: int) -> torch.Tensor | None:
    """The token IDs a uint32 bitmask row allows, ascending, when there are at most ``limit`` of them (at least
    one); else ``None``."""
    count = int(np.bitwise_count(row).sum())
    if not 0 < count <= limit:
        return None
    nonzero = np.flatnonzero(row)
    bits = (row[nonzero, None] >> _BITS) & 1
    ids = (nonzero[:, None] * 32 + _BITS)[bits.astype(bool)]
    return torch.from_numpy(ids.astype(np.int64))


class TokenMasks:
    """The bitmask buffers of one engine's constrained rows, reused from step to step.

    ``apply(logits, constraints)`` fills one int32 row per constrained row (``[rows, words]``, one buffer per
    bitmask width, in practice one) and masks those rows of ``logits`` in place. Unconstrained rows are never
    touched and cost nothing: nothing here runs for a step without constrained rows.
    """

    def __init__(self) -> None:
        self._buffers: dict[int, torch.Tensor] = {}

    def buffer(self, rows: int, words: int) -> torch.Tensor:
        """An int32 CPU buffer with at least ``rows`` rows of ``words`` words (its first ``rows`` rows)."""
        buf = self._buffers.get(words)
        if buf is None or buf.shape[0] < rows:
            buf = torch.empty((max(rows, 8 if buf is None else 2 * buf.shape[0]), words), dtype=torch.int32)
            self._buffers[words] = buf
        return buf[:rows]

    def fill(self, constraints: Sequence[SequenceConstraint]) -> torch.Tensor:
        """Row ``i`` of the returned int32 buffer ``[len(constraints), words]``: the bitmask of ``constraints[i]``
        (all of one width)."""
        buf = self.buffer(len(constraints), constraints[0].words)
        rows = buf.numpy().view(np.uint32)
        # Matchers of one kind that fill many rows in one call (``GrammarMatcher.fill_bitmasks``) do so; a row that
        # fails there is filled alone, which reports the error (and ends that sequence).
        many = getattr(type(constraints[0].matcher), "fill_bitmasks", None)
        if len(constraints) > 1 and many is not None and \
                all(getattr(type(c.matcher), "fill_bitmasks", None) is many for c in constraints):
            accepting = many([c.matcher for c in constraints], rows.view(np.int32), [c.budget for c in constraints])
            for i, (c, acc) in enumerate(zip(constraints, accepting)):
                if acc is None:
                    c.fill(rows, i)
                else:
                    c.finish_row(rows[i], acc)
            return buf
        for i, c in enumerate(constraints):
            c.fill(rows, i)
        return buf

    def apply(self, logits: torch.Tensor, constraints: Sequence[SequenceConstraint]) -> None:
        """Mask row ``i`` of the float32 ``logits`` ``[len(constraints), vocab]`` by ``constraints[i]``."""
        words = constraints[0].words
        if all(c.words == words for c in constraints):
            self._apply(logits, constraints, words)
            return
        for w in {c.words for c in constraints}:
            picked = [i for i, c in enumerate(constraints) if c.words == w]
            part = logits[picked]
            self._apply(part, [constraints[i] for i in picked], w)
            logits[picked] = part

    def _apply(self, logits: torch.Tensor, constraints: Sequence[SequenceConstraint], words: int) -> None:
        ops.apply_token_bitmask_(logits, self.fill(constraints).to(logits.device, non_blocking=True))

    def greedy(self, picks: list[int], constraints: Sequence[SequenceConstraint],
               logits_of: Callable[[list[int]], torch.Tensor],
               logits_at: Callable[[int, torch.Tensor], torch.Tensor] | None = None) -> list[int]:
        """Greedy tokens of constrained rows from their unconstrained arg-maxes ``picks``: a pick the row's bitmask
        allows is the masked arg-max too (the first maximum of all logits is the first of the allowed ones);
        a row that allows one token only takes it; a row that allows few tokens (at most 1/8 of its bitmask) gets
        the logits of those tokens only (``logits_at(row index, token IDs)``, when the model has it: the same
        values as its full row there); the other rows' logits (``logits_of(row indices)``) are masked and
        arg-maxed. The same tokens as masking every row, without the logits of rows whose arg-max the grammar
        allows (most free-text positions) or whose grammar leaves one choice."""
        buf = self.fill(constraints)
        words = buf.numpy().view(np.uint32)
        out = list(picks)
        bad = [i for i, t in enumerate(picks) if t >= 32 * words.shape[1] or not (words[i, t >> 5] >> (t & 31)) & 1]
        # A row that allows one token only (a grammar's fixed text, a closing plan) needs no logits.
        for i in list(bad):
            forced = only_token(words[i])
            if forced is not None:
                out[i] = forced
                bad.remove(i)
        if bad and logits_at is not None:
            for i in list(bad):
                ids = allowed_tokens(words[i], words.shape[1] * 4)
                if ids is not None:
                    # ascending IDs: the first maximum is the lowest allowed ID, as on the masked full row
                    out[i] = int(ids[int(torch.argmax(logits_at(i, ids)))])
                    bad.remove(i)
        if bad:
            logits = logits_of(bad).contiguous()
            ops.apply_token_bitmask_(logits, buf[bad].to(logits.device, non_blocking=True))
            for i, t in zip(bad, torch.argmax(logits, dim=-1).tolist()):
                out[i] = t
        return out
