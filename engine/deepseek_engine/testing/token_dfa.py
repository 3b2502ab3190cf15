"""A token-level DFA with the matcher interface of ``deepseek_recipe.GrammarMatcher``, for tests and benchmarks.

The engine's constrained decoding (:mod:`deepseek_engine.core.constraint`) is checked against this small
language model of a grammar: states, per-state allowed tokens and their successors, accepting states. A
state without successors is terminal (``is_terminated``). ``TokenDFA`` is also a ``MatcherSource``
(``matcher()``, ``vocab_size``), so one DFA can constrain many requests, each with its own matcher.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np


class TokenDFA:
    """``transitions[state][token] = next_state``; ``accepting``: the states where the output may end."""

    def __init__(self, vocab_size: int, transitions: Mapping[int, Mapping[int, int]], accepting: Iterable[int],
                 start: int = 0) -> None:
        self.vocab_size = vocab_size
        self.transitions = {int(s): {int(t): int(n) for t, n in edges.items()} for s, edges in transitions.items()}
        self.accepting = frozenset(int(s) for s in accepting)
        self.start = start
        words = -(-vocab_size // 32)
        self._rows: dict[int, np.ndarray] = {}
        for state, edges in self.transitions.items():
            bits = np.zeros(words * 32, dtype=np.uint8)
            for token in edges:
                if not 0 <= token < vocab_size:
                    raise ValueError(f"token {token} is outside the vocabulary of {vocab_size}")
                bits[token] = 1
            self._rows[state] = np.packbits(bits, bitorder="little").view(np.int32)
        self._empty = np.zeros(words, dtype=np.int32)

    @classmethod
    def chain(cls, vocab_size: int, steps: Sequence[Iterable[int]], loop: Iterable[int] = (),
              accept_from: int | None = None) -> TokenDFA:
        """The language ``steps[0] steps[1] ... loop*``: one token of each set in turn, then any number of
        ``loop`` tokens (none: the last state is terminal). The output may end once ``accept_from`` steps
        are done (default: all of them)."""
        n = len(steps)
        transitions: dict[int, dict[int, int]] = {i: {int(t): i + 1 for t in step} for i, step in enumerate(steps)}
        transitions[n] = {int(t): n for t in loop}
        first = n if accept_from is None else accept_from
        return cls(vocab_size, transitions, range(first, n + 1))

    def row(self, state: int) -> np.ndarray:
        """The bitmask row (int32 words) of ``state``."""
        return self._rows.get(state, self._empty)

    def run(self, tokens: Iterable[int]) -> int | None:
        """The state after ``tokens`` from the start (``None``: a token was not allowed)."""
        state: int | None = self.start
        for t in tokens:
            state = self.transitions.get(state, {}).get(int(t))
            if state is None:
                return None
        return state

    def accepts(self, tokens: Iterable[int]) -> bool:
        """Whether ``tokens`` is a complete word of the language."""
        state = self.run(tokens)
        return state is not None and state in self.accepting

    def is_prefix(self, tokens: Iterable[int]) -> bool:
        """Whether ``tokens`` can be continued into a word of the language (each token allowed)."""
        return self.run(tokens) is not None

    def matcher(self) -> DFAMatcher:
        return DFAMatcher(self)


class DFAMatcher:
    """One output's position in a ``TokenDFA`` (the ``TokenMatcher`` interface, with a full history for
    ``rollback``). ``calls`` counts the calls of each method (tests check what the engine asked)."""

    def __init__(self, dfa: TokenDFA) -> None:
        self.dfa = dfa
        self.vocab_size = dfa.vocab_size
        self.states = [dfa.start]
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    @property
    def state(self) -> int:
        return self.states[-1]

    @property
    def accepted(self) -> int:
        """Tokens accepted so far (and not rolled back)."""
        return len(self.states) - 1

    def fill_bitmask(self, buf, index: int = 0) -> None:
        self._count("fill_bitmask")
        row = self.dfa.row(self.state)
        if buf.shape[1] != row.shape[0]:
            raise ValueError(f"bitmask rows have {buf.shape[1]} words, this vocabulary needs {row.shape[0]}")
        buf[index] = row

    def accept_token(self, token: int) -> bool:
        self._count("accept_token")
        nxt = self.dfa.transitions.get(self.state, {}).get(int(token))
        if nxt is None:
            return False
        self.states.append(nxt)
        return True

    def accept_tokens(self, tokens: Sequence[int]) -> int:
        self._count("accept_tokens")
        n = 0
        for t in tokens:
            if not self.accept_token(t):
                break
            n += 1
        return n

    def rollback(self, n: int) -> None:
        self._count("rollback")
        if not 0 <= n <= self.accepted:
            raise ValueError(f"cannot roll back {n} tokens, {self.accepted} accepted")
        if n:
            del self.states[-n:]

    def is_accepting(self) -> bool:
        return self.state in self.dfa.accepting

    def is_terminated(self) -> bool:
        return not self.dfa.transitions.get(self.state)
