"""Block manager and scheduler properties, without a model."""

from __future__ import annotations

import torch
from deepseek_engine.core.block_manager import BlockManager
from deepseek_engine.core.scheduler import Scheduler
from deepseek_engine.core.sequence import Sequence
from deepseek_engine.sampling_params import SamplingParams
from hypothesis import given, settings
from hypothesis import strategies as st


def make_seq(i: int, tokens: list[int], max_tokens: int = 4) -> Sequence:
    return Sequence(i, tokens, SamplingParams(temperature=0, max_tokens=max_tokens), torch.Generator())


def test_prefix_blocks_are_shared_only_once_computed():
    bm = BlockManager(num_blocks=10, block_size=4)
    a = make_seq(0, list(range(10)))
    assert bm.allocate(a) == 0 and len(a.block_table) == 3
    # Nothing computed yet: a twin prompt must not reuse a's blocks.
    b = make_seq(1, list(range(10)))
    assert bm.allocate(b) == 0
    bm.deallocate(b)
    a.num_computed_tokens = 10
    bm.commit(a)
    c = make_seq(2, list(range(8)) + [99, 98])
    assert bm.allocate(c) == 8
    assert c.block_table[:2] == a.block_table[:2]
    assert bm.blocks[a.block_table[0]].ref_count == 2
    # A prompt of exactly two full blocks still computes its last token.
    d = make_seq(3, list(range(8)))
    assert bm.allocate(d) == 4
    bm.check_invariants([a, c, d])
    for s in (a, c, d):
        bm.deallocate(s)
    bm.check_invariants([])
    # Freed blocks keep their hash: the prefix is still found.
    e = make_seq(4, list(range(9)))
    assert bm.allocate(e) == 8
    bm.check_invariants([e])


def test_allocation_failure_changes_nothing():
    bm = BlockManager(num_blocks=3, block_size=4)
    a = make_seq(0, list(range(9)))
    assert bm.allocate(a) == 0
    b = make_seq(1, list(range(5)))
    assert bm.allocate(b) is None and b.block_table == []
    assert not bm.ensure_slots(a, 13) and len(a.block_table) == 3
    bm.check_invariants([a])


@settings(max_examples=40, deadline=None)
@given(
    prompts=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=30), min_size=1, max_size=12),
    block_size=st.sampled_from([1, 2, 4, 8]),
    spare_blocks=st.integers(0, 20),
    budget=st.integers(1, 40),
    max_num_seqs=st.integers(1, 6),
    max_tokens=st.integers(1, 6),
)
def test_scheduler_completes_every_request_within_limits(prompts, block_size, spare_blocks, budget, max_num_seqs,
                                                         max_tokens):
    max_model_len = 40
    bm = BlockManager(-(-max_model_len // block_size) + spare_blocks, block_size)
    sched = Scheduler(bm, max_num_seqs=max_num_seqs, max_num_batched_tokens=budget,
                      max_model_len=max_model_len, eos_token_id=None)
    seqs = [make_seq(i, p, max_tokens) for i, p in enumerate(prompts)]
    for s in seqs:
        sched.add(s)
    finished = []
    for _ in range(10_000):
        if not sched.has_unfinished():
            break
        batch = sched.schedule()
        assert sum(batch.num_tokens) <= budget
        assert len(sched.running) <= max_num_seqs
        assert len({s.seq_id for s in batch.seqs}) == len(batch.seqs)
        for s, n in zip(batch.seqs, batch.num_tokens):
            assert n >= 1 and s.num_computed_tokens + n <= len(s)
            assert len(s.block_table) * block_size >= s.num_computed_tokens + n
        # A deterministic fake model: the next token is the current length mod 4.
        sampled = {s.seq_id: len(s) % 4 for i, s in enumerate(batch.seqs) if batch.samples(i)}
        finished += sched.postprocess(batch, sampled)
        bm.check_invariants(sched.running)
    assert sorted(s.seq_id for s in finished) == list(range(len(prompts)))
    for s, p in zip(seqs, prompts):
        assert s.token_ids[: len(p)] == p
        assert s.num_output_tokens == min(max_tokens, max_model_len - len(p))
        assert s.output_token_ids == [(len(p) + k) % 4 for k in range(s.num_output_tokens)]
    assert bm.num_free_blocks == len(bm.blocks)
