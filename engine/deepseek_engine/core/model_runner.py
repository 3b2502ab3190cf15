"""Turns a scheduled batch into one model call and samples the next tokens.

The model contract is ``model(input_ids, positions, cache) -> logits``:

* ``input_ids`` and ``positions`` are flat ``[T]`` int64 tensors holding the new
  tokens of every scheduled sequence, one sequence after the other;
* ``cache`` is a ``StepContext``: the paged storage (``cache.kv``) plus, per
  sequence, its block table, where its tokens start in the flat batch
  (``query_start_loc``), how many tokens it holds in the cache after this step
  (``context_lens``) and the flat cache slot of each new token (``slot_mapping``,
  ``block_id * block_size + offset``);
* the result holds one row of logits per entry of ``cache.logits_indices`` (the
  flat positions whose next token is needed), or one row per input token when
  ``logits_indices`` is ``None``;
* ``cache.seq_states`` holds each sequence's ``model_state`` dict, where a model may
  keep private per-sequence state between steps (V4.1's window ring).

Constrained rows (a step whose batch is ``constrained``, :mod:`deepseek_engine.core.constraint`) are sampled
from a masked copy of their logits; every other row, and the log probabilities of all rows, come from the
model's logits as they are, so an unconstrained sequence gets the same tokens in any batch. A model may
offer ``greedy_tokens(input_ids, positions, cache)`` (arg-maxes without the logits) and
``greedy_step(...) -> (arg-maxes, logits_of(rows), logits_at(row, token IDs) or None)``, which all-greedy
steps use, constrained or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from deepseek_engine.core.constraint import TokenMasks
from deepseek_engine.core.int_tensors import long_tensor
from deepseek_engine.core.sampler import row_logprobs, sample_row
from deepseek_engine.core.scheduler import ScheduledBatch
from deepseek_engine.core.sequence import Sequence


@dataclass
class StepContext:
    kv: Any
    block_size: int
    query_start_loc: list[int]
    context_lens: list[int]
    block_tables: list[list[int]]
    slot_mapping: torch.Tensor
    logits_indices: torch.Tensor | None
    prompt_lens: list[int] | None = None  # prompt length of each sequence (``None``: unknown)
    # Each sequence's ``model_state`` dict: private per-sequence state the model keeps between steps.
    seq_states: list[dict] | None = None

    @property
    def num_seqs(self) -> int:
        return len(self.block_tables)


class ModelRunner:
    def __init__(self, model: torch.nn.Module, kv: Any, block_size: int, device: torch.device) -> None:
        self.model = model
        self.kv = kv
        self.block_size = block_size
        self.device = device
        self.masks = TokenMasks()

    def _context(self, seqs: list[Sequence], counts: list[int], all_logits: bool, sample_rows: list[int]):
        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        starts = [0]
        ctx_lens: list[int] = []
        bs = self.block_size
        for seq, n in zip(seqs, counts):
            begin = seq.num_computed_tokens
            table = seq.block_table
            if n == 1:  # a decode step: no slices or generators
                ids.append(seq.token_ids[begin])
                positions.append(begin)
                slots.append(table[begin // bs] * bs + begin % bs)
            else:
                ids.extend(seq.token_ids[begin : begin + n])
                positions.extend(range(begin, begin + n))
                slots.extend(table[p // bs] * bs + p % bs for p in range(begin, begin + n))
            starts.append(starts[-1] + n)
            ctx_lens.append(begin + n)
        dev = self.device
        logits_indices = None
        # Every token sampled (a decode step where each sequence samples): all rows, which ``None`` says without
        # an index tensor and a gather.
        if not all_logits and not (len(sample_rows) == len(seqs) == starts[-1]):
            logits_indices = torch.tensor([starts[i + 1] - 1 for i in sample_rows], dtype=torch.long, device=dev)
        # ids, positions and slots as one tensor, split into three views
        n = len(ids)
        flat = long_tensor(ids + positions + slots, dev)
        input_ids, pos, slot_mapping = flat[:n], flat[n:2 * n], flat[2 * n:]
        ctx = StepContext(
            kv=self.kv,
            block_size=bs,
            query_start_loc=starts,
            context_lens=ctx_lens,
            block_tables=[s.block_table for s in seqs],
            slot_mapping=slot_mapping,
            logits_indices=logits_indices,
            prompt_lens=[s.num_prompt_tokens for s in seqs],
            seq_states=[s.model_state for s in seqs],
        )
        return input_ids, pos, ctx

    @torch.inference_mode()
    def forward(self, seqs: list[Sequence], counts: list[int], all_logits: bool = False,
                sample_rows: list[int] | None = None) -> torch.Tensor:
        input_ids, positions, ctx = self._context(seqs, counts, all_logits, sample_rows or [])
        return self.model(input_ids, positions, ctx)

    @torch.inference_mode()
    def step(self, batch: ScheduledBatch) -> dict[int, int]:
        """Run ``batch`` through the model; return the token sampled for each sequence that finished its prompt."""
        if not batch.seqs:
            return {}
        # (batch.samples(i), inlined: this runs for every sequence of every step)
        rows = [i for i, (seq, n) in enumerate(zip(batch.seqs, batch.num_tokens))
                if seq.num_computed_tokens + n == len(seq.token_ids)]
        seqs = [batch.seqs[i] for i in rows]
        # Rows of ``seqs`` whose sequence is constrained (none, without a list, while no request is).
        constrained = [r for r, seq in enumerate(seqs) if seq.constraint is not None] if batch.constrained else []
        greedy_tokens = getattr(self.model, "greedy_tokens", None)
        if greedy_tokens is not None and all(s.params.greedy and s.params.logprobs is None for s in seqs):
            # Only arg-maxes are needed: the model may skip materialising the logits.
            input_ids, positions, ctx = self._context(batch.seqs, batch.num_tokens, False, rows)
            if not constrained:
                picks = greedy_tokens(input_ids, positions, ctx).tolist()
                return {seq.seq_id: token for seq, token in zip(seqs, picks)}
            greedy_step = getattr(self.model, "greedy_step", None)
            cons = [seqs[r].constraint for r in constrained]
            if greedy_step is not None and all(c.words == cons[0].words for c in cons):
                # The grammar checks each arg-max; only rows whose arg-max it forbids get their logits.
                found, logits_of, logits_at = greedy_step(input_ids, positions, ctx)
                picks = found.tolist()
                fixed = self.masks.greedy([picks[r] for r in constrained], cons,
                                          lambda bad: logits_of([constrained[i] for i in bad]),
                                          None if logits_at is None else
                                          lambda i, ids: logits_at(constrained[i], ids))
                for r, token in zip(constrained, fixed):
                    picks[r] = token
                return {seq.seq_id: token for seq, token in zip(seqs, picks)}
        logits = self.forward(batch.seqs, batch.num_tokens, sample_rows=rows)
        tokens: list[int | None] = [None] * len(seqs)
        masked: dict[int, torch.Tensor] = {}
        if constrained:
            rows_logits = logits[constrained].float()  # a copy: the raw rows stay for log probabilities
            self.masks.apply(rows_logits, [seqs[r].constraint for r in constrained])
            picked = [i for i, r in enumerate(constrained) if seqs[r].params.greedy]
            if picked:
                for i, token in zip(picked, torch.argmax(rows_logits[picked], dim=-1).tolist()):
                    tokens[constrained[i]] = token
            masked = {r: rows_logits[i] for i, r in enumerate(constrained)}
        # Greedy rows share one arg-max call: each row's result depends on that row only.
        greedy = [r for r, seq in enumerate(seqs) if seq.params.greedy and r not in masked]
        if greedy:
            picks = torch.argmax(logits[greedy], dim=-1).tolist() if len(greedy) < len(seqs) \
                else torch.argmax(logits, dim=-1).tolist()
            for r, token in zip(greedy, picks):
                tokens[r] = token
        sampled: dict[int, int] = {}
        for r, seq in enumerate(seqs):
            token = tokens[r]
            if token is None:
                token = sample_row(masked[r] if r in masked else logits[r], seq.params, seq.generator)
            if seq.params.logprobs is not None:
                seq.logprobs.append(row_logprobs(logits[r], token, seq.params.logprobs))
            sampled[seq.seq_id] = token
        return sampled
