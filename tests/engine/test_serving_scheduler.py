"""Block manager and scheduler properties, without a model."""

from __future__ import annotations

import pytest
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


def run_to_completion(sched: Scheduler, bm: BlockManager, aborts: dict[int, int] | None = None,
                      by_id: dict[int, Sequence] | None = None) -> list[Sequence]:
    """Step ``sched`` with the fake model until nothing is left; ``aborts`` maps a step number to the seq_id
    aborted before that step (if it is still unfinished). Checks the invariants after every step."""
    finished: list[Sequence] = []
    for step in range(10_000):
        if aborts and step in aborts and not by_id[aborts[step]].is_finished:
            sched.abort(by_id[aborts[step]])
            bm.check_invariants(sched.running)
        if not sched.has_unfinished():
            break
        batch = sched.schedule()
        assert batch.seqs, "unfinished sequences but nothing scheduled"
        sampled = {s.seq_id: len(s) % 4 for i, s in enumerate(batch.seqs) if batch.samples(i)}
        finished += sched.postprocess(batch, sampled)
        bm.check_invariants(sched.running)
    return finished


def test_twin_prompts_wait_for_the_first_one_and_share_its_blocks():
    bm = BlockManager(num_blocks=40, block_size=4)
    sched = Scheduler(bm, max_num_seqs=8, max_num_batched_tokens=20, max_model_len=64, eos_token_id=None)
    prompt = list(range(1, 15))  # 14 tokens: three full blocks
    twins = [make_seq(i, prompt, max_tokens=3) for i in range(3)]
    other = make_seq(3, [7, 7, 7])
    for s in (*twins, other):
        sched.add(s)
    first = sched.schedule()
    # The first twin is prefilled; the other twins are passed over, the prompt behind them is admitted.
    assert [s.seq_id for s in first.seqs] == [0, 3] and first.num_tokens == [14, 3]
    assert [s.seq_id for s in sched.waiting] == [1, 2]
    assert bm.prefix_in_flight(twins[1]) and not bm.prefix_in_flight(other)
    finished = sched.postprocess(first, {0: 14 % 4, 3: 3 % 4})  # the fake model of run_to_completion
    assert not bm.prefix_in_flight(twins[1])
    finished += run_to_completion(sched, bm)
    assert sorted(s.seq_id for s in finished) == [0, 1, 2, 3]
    assert twins[0].num_cached_tokens == 0
    # Twins 1 and 2 found all three full blocks cached (the last token is always computed).
    assert twins[1].num_cached_tokens == twins[2].num_cached_tokens == 12
    assert twins[1].output_token_ids == twins[0].output_token_ids
    assert bm.num_free_blocks == len(bm.blocks) and not bm.in_flight


def test_no_waiting_for_a_prefix_when_prefix_caching_is_off():
    bm = BlockManager(num_blocks=40, block_size=4, enable_prefix_caching=False)
    sched = Scheduler(bm, max_num_seqs=8, max_num_batched_tokens=64, max_model_len=64, eos_token_id=None)
    for i in range(3):
        sched.add(make_seq(i, list(range(1, 15))))
    assert len(sched.schedule().seqs) == 3


def test_abort_frees_blocks_of_running_and_waiting_sequences():
    bm = BlockManager(num_blocks=12, block_size=4)
    sched = Scheduler(bm, max_num_seqs=1, max_num_batched_tokens=64, max_model_len=40, eos_token_id=None)
    a, b = make_seq(0, list(range(10)), max_tokens=20), make_seq(1, list(range(20, 26)))
    sched.add(a)
    sched.add(b)
    batch = sched.schedule()
    sched.postprocess(batch, {0: 1})
    assert a.block_table and sched.waiting[0] is b
    sched.abort(a)
    assert a.finish_reason == "abort" and a.is_finished and not a.block_table
    assert bm.num_free_blocks == len(bm.blocks) and not bm.in_flight and not sched.running
    sched.abort(b)
    assert not sched.has_unfinished() and b.finish_reason == "abort"
    with pytest.raises(ValueError, match="already finished"):
        sched.abort(b)
    bm.check_invariants([])


@settings(max_examples=40, deadline=None)
@given(
    bases=st.lists(st.lists(st.integers(0, 3), min_size=0, max_size=20), min_size=1, max_size=3),
    picks=st.lists(st.tuples(st.integers(0, 2), st.lists(st.integers(0, 3), max_size=8)), min_size=1, max_size=10),
    block_size=st.sampled_from([1, 2, 4]),
    spare_blocks=st.integers(0, 12),
    budget=st.integers(1, 24),
    max_num_seqs=st.integers(1, 6),
    aborts=st.dictionaries(st.integers(0, 30), st.integers(0, 9), max_size=4),
)
def test_shared_prefixes_and_aborts_keep_every_request_correct(bases, picks, block_size, spare_blocks, budget,
                                                               max_num_seqs, aborts):
    """Prompts drawn from a few shared stems, some aborted at random steps: every other request completes with
    the right tokens, blocks and in-flight counts stay consistent, and nothing is left over."""
    max_model_len = 40
    prompts = [(bases[b % len(bases)] + tail)[:max_model_len - 1] or [0] for b, tail in picks]
    bm = BlockManager(-(-max_model_len // block_size) + spare_blocks, block_size)
    sched = Scheduler(bm, max_num_seqs=max_num_seqs, max_num_batched_tokens=budget,
                      max_model_len=max_model_len, eos_token_id=None)
    seqs = [make_seq(i, p, 4) for i, p in enumerate(prompts)]
    for s in seqs:
        sched.add(s)
    aborts = {step: i for step, i in aborts.items() if i < len(seqs)}
    finished = run_to_completion(sched, bm, aborts, {s.seq_id: s for s in seqs})
    aborted = {s.seq_id for s in seqs if s.finish_reason == "abort"}
    assert sorted(s.seq_id for s in finished) == sorted(set(range(len(seqs))) - aborted)
    for s, p in zip(seqs, prompts):
        assert s.token_ids[: len(p)] == p
        if s.seq_id not in aborted:
            assert s.output_token_ids == [(len(p) + k) % 4 for k in range(min(4, max_model_len - len(p)))]
    assert bm.num_free_blocks == len(bm.blocks) and not bm.in_flight
