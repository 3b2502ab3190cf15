"""Continuous batching: which sequences run in the next model step, and how many tokens each.

Every step has a token budget. Running sequences go first, in admission order: a
decode costs one token, an unfinished (chunked) prefill takes what is left of the
budget. Then waiting sequences are admitted while the budget, the sequence limit and
the free cache blocks allow; a long prompt is cut into chunks across steps. When a
running sequence needs a new block and none is free, the most recently admitted
running sequence is preempted: its blocks are released and it goes back to the
front of the waiting queue, to be recomputed later (its full blocks usually come
back from the prefix cache).

A waiting sequence whose next prefix block a running sequence is computing right now
(``BlockManager.prefix_in_flight``: the same prompt submitted several times, e.g. the
choices of an ``n > 1`` request) is passed over until that block is computed, then
admitted with it as a cache hit; sequences behind it are admitted meanwhile.
``abort`` removes a waiting or running sequence and frees its blocks at once.

Constrained sequences (``Sequence.constraint``) are counted: a step is marked ``constrained`` only while
one is unfinished, so that the model runner does no per-row grammar work at all otherwise. After a
constrained sequence's token is appended its matcher accepts it, and a matcher whose language ends
there ends the sequence (:mod:`deepseek_engine.core.constraint`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from deepseek_engine.core.block_manager import BlockManager
from deepseek_engine.core.sequence import Sequence, SequenceStatus


@dataclass
class ScheduledBatch:
    """One model step: ``num_tokens[i]`` tokens of ``seqs[i]``, starting at its ``num_computed_tokens``."""

    seqs: list[Sequence]
    num_tokens: list[int]
    #: Whether any unfinished sequence is constrained (some of ``seqs`` may then need a token bitmask).
    constrained: bool = False

    def samples(self, i: int) -> bool:
        """Whether sequence ``i`` reaches its last token this step, so a new token is sampled."""
        seq = self.seqs[i]
        return seq.num_computed_tokens + self.num_tokens[i] == len(seq)


class Scheduler:
    def __init__(
        self,
        block_manager: BlockManager,
        *,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        max_model_len: int,
        eos_token_id: int | list[int] | None,
    ) -> None:
        if max_num_seqs < 1 or max_num_batched_tokens < 1:
            raise ValueError("max_num_seqs and max_num_batched_tokens must be positive")
        self.block_manager = block_manager
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_model_len = max_model_len
        if eos_token_id is None:
            eos_token_id = []
        self.eos_token_ids = frozenset([eos_token_id] if isinstance(eos_token_id, int) else eos_token_id)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0
        self.num_constrained = 0  # unfinished sequences with a constraint

    def add(self, seq: Sequence) -> None:
        """Queue a validated sequence (``LLM`` checks IDs and length first)."""
        self.waiting.append(seq)
        if seq.constraint is not None:
            self.num_constrained += 1

    def _finished(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.FINISHED
        self.block_manager.deallocate(seq)
        if seq.constraint is not None:
            self.num_constrained -= 1

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def _preempt(self, seq: Sequence) -> None:
        self.block_manager.deallocate(seq)
        seq.num_computed_tokens = 0
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)

    def schedule(self) -> ScheduledBatch:
        budget = self.max_num_batched_tokens
        seqs: list[Sequence] = []
        counts: list[int] = []
        preempted = False

        # The running sequences in admission order: running[i:end] are still to be scheduled; preemption takes
        # the newest of them (running[end - 1]).
        running, i, end = self.running, 0, len(self.running)
        slots_per_block = self.block_manager.block_size
        kept: list[Sequence] = []
        while i < end:
            seq = running[i]
            i += 1
            n = min(len(seq.token_ids) - seq.num_computed_tokens, budget)
            if n == 0:
                kept.append(seq)
                continue
            needed = seq.num_computed_tokens + n
            # (Most decode steps stay inside the last block: no block manager call.)
            while needed > len(seq.block_table) * slots_per_block and not self.block_manager.ensure_slots(seq, needed):
                preempted = True
                if i < end:
                    end -= 1
                    self._preempt(running[end])
                else:
                    self._preempt(seq)
                    seq = None
                    break
            if seq is None:
                break
            kept.append(seq)
            seqs.append(seq)
            counts.append(n)
            budget -= n
        self.running = kept

        passed_over: list[Sequence] = []
        while not preempted and self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if self.block_manager.prefix_in_flight(seq):
                passed_over.append(self.waiting.popleft())
                continue
            cached = self.block_manager.allocate(seq)
            if cached is None:
                break
            self.waiting.popleft()
            seq.num_computed_tokens = cached
            if seq.num_cached_tokens is None:
                seq.num_cached_tokens = cached
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            n = min(seq.num_uncomputed_tokens, budget)
            seqs.append(seq)
            counts.append(n)
            budget -= n
        self.waiting.extendleft(reversed(passed_over))
        return ScheduledBatch(seqs, counts, self.num_constrained > 0)

    def abort(self, seq: Sequence) -> None:
        """Remove an unfinished sequence (waiting or running) and release its blocks;
        it ends with ``finish_reason`` "abort"."""
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
        elif seq.status is SequenceStatus.WAITING:
            self.waiting.remove(seq)
        else:
            raise ValueError(f"sequence {seq.seq_id} has already finished")
        self._finished(seq)
        seq.finish_reason = "abort"

    def postprocess(self, batch: ScheduledBatch, sampled: dict[int, int]) -> list[Sequence]:
        """Advance the sequences of ``batch``; ``sampled`` maps seq_id to its new token.

        Returns the sequences that finished in this step (their blocks are released).
        """
        finished: list[Sequence] = []
        commit = self.block_manager.commit
        for seq, n in zip(batch.seqs, batch.num_tokens):
            token = sampled.get(seq.seq_id)
            seq.num_computed_tokens += n
            commit(seq)
            if token is None:
                continue
            seq.token_ids.append(token)
            params = seq.params
            if (not params.ignore_eos and token in self.eos_token_ids) or token in params.stop_token_ids:
                seq.finish_reason, seq.stop_token_id = "stop", token
                # (an ending token is never fed to the matcher: the grammar allowed it as the output's end)
            elif seq.constraint is not None and seq.constraint.advance(token):
                seq.finish_reason = "stop"
                if seq.on_token is not None:
                    seq.on_token(seq)  # the caller still sees the grammar's last token
            elif seq.on_token is not None and seq.on_token(seq):
                seq.finish_reason = "stop"
            elif params.max_tokens is not None and seq.num_output_tokens >= params.max_tokens:
                seq.finish_reason = "length"
            elif len(seq) >= self.max_model_len:
                seq.finish_reason = "length"
            if seq.finish_reason is not None:
                self._finished(seq)
                self.running.remove(seq)
                finished.append(seq)
        return finished
