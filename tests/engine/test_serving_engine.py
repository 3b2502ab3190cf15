"""Serving layer against a toy paged model: paging, prefix caching, chunked prefill,
preemption, sampling and stopping, and batch invariance."""

from __future__ import annotations

import random

import pytest
import torch
from deepseek_engine import SamplingParams
from serving_toy import ToyCausalLM, toy_llm

MODEL = ToyCausalLM(seed=0)


def prompts(n: int, seed: int = 1, lo: int = 3, hi: int = 40) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(MODEL.vocab_size) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


def test_forward_logits_match_uncached_reference():
    llm = toy_llm(MODEL)
    ids = prompts(1, lo=50, hi=50)[0]
    got = llm.forward_logits(ids)
    assert got.shape == (50, MODEL.vocab_size)
    torch.testing.assert_close(got, MODEL.reference_logits(ids), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "engine_args",
    [
        {},
        {"max_num_batched_tokens": 7, "block_size": 4},  # prompts prefilled in chunks
        {"num_kv_blocks": 14, "block_size": 4, "max_model_len": 56},  # forces preemption
        {"enable_prefix_caching": False, "max_num_seqs": 3},
    ],
)
def test_greedy_matches_reference_under_engine_settings(engine_args):
    llm = toy_llm(MODEL, **engine_args)
    ps = prompts(8)
    outs = llm.generate(ps, SamplingParams(temperature=0, max_tokens=12))
    for p, o in zip(ps, outs):
        assert o.token_ids == MODEL.reference_greedy(p, 12)
        assert o.finish_reason == "length" and o.prompt_token_ids == p
    if "num_kv_blocks" in engine_args:
        assert llm.scheduler.num_preemptions > 0
    assert llm.block_manager.num_free_blocks == len(llm.block_manager.blocks)


def test_prefix_cache_hit_reuses_blocks_and_keeps_results():
    llm = toy_llm(MODEL, block_size=4)
    shared = prompts(1, seed=5, lo=21, hi=21)[0]
    first = llm.generate([shared + [1, 2]], SamplingParams(temperature=0, max_tokens=5))[0]
    assert first.num_cached_tokens == 0
    second = llm.generate([shared + [3]], SamplingParams(temperature=0, max_tokens=5))[0]
    assert second.num_cached_tokens == 20  # five full blocks of the shared 21 tokens
    assert second.token_ids == MODEL.reference_greedy(shared + [3], 5)
    # The same prompt again: everything but the last token comes from the cache.
    again = llm.generate([shared + [1, 2]], SamplingParams(temperature=0, max_tokens=5))[0]
    assert again.num_cached_tokens == 20 and again.token_ids == first.token_ids


@pytest.mark.parametrize("params", [
    SamplingParams(temperature=0, max_tokens=10, logprobs=3),
    SamplingParams(temperature=0.9, top_p=0.9, top_k=20, seed=1234, max_tokens=10, logprobs=2),
    SamplingParams(temperature=1.3, seed=7, max_tokens=10),
])
def test_output_independent_of_batch(params):
    ps = prompts(16, seed=3)
    target = ps[5]
    alone = toy_llm(MODEL).generate([target], params)[0]
    # In the batch every other request gets its own seed, and small budgets mix
    # chunked prefills with decodes.
    batch_params = [
        SamplingParams(temperature=params.temperature, top_p=params.top_p, top_k=params.top_k,
                       seed=(params.seed or 0) + 1 + i, max_tokens=10, logprobs=params.logprobs)
        for i in range(16)
    ]
    batch_params[5] = params
    batched = toy_llm(MODEL, max_num_batched_tokens=37, block_size=8).generate(ps, batch_params)[5]
    assert batched.token_ids == alone.token_ids
    if params.logprobs is not None:
        assert len(batched.logprobs) == 10
        for a, b in zip(alone.logprobs, batched.logprobs):
            assert [t for t, _ in a.top] == [t for t, _ in b.top]
            assert [v for _, v in a.top] == pytest.approx([v for _, v in b.top], abs=1e-4)
            assert a.logprob == pytest.approx(b.logprob, abs=1e-4)


def test_seeded_sampling_is_reproducible_and_seed_dependent():
    p = prompts(1, seed=9)[0]
    runs = {s: [toy_llm(MODEL).generate([p], SamplingParams(temperature=1.5, seed=s, max_tokens=20))[0].token_ids
                for _ in range(2)] for s in (1, 2)}
    assert runs[1][0] == runs[1][1] and runs[2][0] == runs[2][1]
    assert runs[1][0] != runs[2][0]


def test_logprobs_are_consistent_with_logits():
    llm = toy_llm(MODEL)
    p = prompts(1, seed=11)[0]
    out = llm.generate([p], SamplingParams(temperature=0, max_tokens=3, logprobs=4))[0]
    logp = torch.log_softmax(MODEL.reference_logits(p), dim=-1)[-1]
    first = out.logprobs[0]
    assert first.logprob == pytest.approx(float(logp.max()), abs=1e-4)
    assert [t for t, _ in first.top] == torch.topk(logp, 4).indices.tolist()
    assert first.top[0][0] == out.token_ids[0]


def test_stopping_rules():
    p = prompts(1, seed=13)[0]
    ref = MODEL.reference_greedy(p, 30)
    # EOS: pick the 4th greedy token as "EOS".
    eos = ref[3]
    cut = ref.index(eos) + 1
    out = toy_llm(MODEL, eos_token_id=eos).generate([p], SamplingParams(temperature=0, max_tokens=30))[0]
    assert out.token_ids == ref[:cut] and out.finish_reason == "stop" and out.stop_token_id == eos
    # ignore_eos runs on to max_tokens.
    out = toy_llm(MODEL, eos_token_id=eos).generate([p], SamplingParams(temperature=0, max_tokens=30, ignore_eos=True))[0]
    assert out.token_ids == ref and out.finish_reason == "length"
    # Stop token IDs.
    stop = ref[6]
    out = toy_llm(MODEL).generate([p], SamplingParams(temperature=0, max_tokens=30, stop_token_ids=[stop]))[0]
    assert out.token_ids == ref[: ref.index(stop) + 1] and out.stop_token_id == stop
    # Context length: the sequence may not grow past max_model_len.
    out = toy_llm(MODEL, max_model_len=len(p) + 5).generate([p], SamplingParams(temperature=0, max_tokens=None))[0]
    assert out.token_ids == ref[:5] and out.finish_reason == "length"


def test_top_k_one_and_tiny_top_p_are_greedy():
    p = prompts(1, seed=17)[0]
    ref = MODEL.reference_greedy(p, 8)
    for params in (SamplingParams(temperature=2.0, top_k=1, seed=3, max_tokens=8),
                   SamplingParams(temperature=1.0, top_p=1e-6, seed=3, max_tokens=8)):
        assert toy_llm(MODEL).generate([p], params)[0].token_ids == ref


def test_sampling_follows_the_distribution():
    # One-token generations from many seeds: frequencies track the filtered softmax.
    p = prompts(1, seed=19)[0]
    params = [SamplingParams(temperature=1.0, top_k=3, seed=s, max_tokens=1) for s in range(300)]
    outs = toy_llm(MODEL).generate([p] * 300, params)
    probs = torch.softmax(MODEL.reference_logits(p)[-1], dim=-1)
    top3 = torch.topk(probs, 3)
    expected = (top3.values / top3.values.sum()).tolist()
    counts = [sum(o.token_ids[0] == t for o in outs) / 300 for t in top3.indices.tolist()]
    assert sum(counts) == pytest.approx(1.0)
    for c, e in zip(counts, expected):
        assert abs(c - e) < 0.1


def test_bad_requests_raise_clear_errors():
    llm = toy_llm(MODEL, max_model_len=32)
    with pytest.raises(ValueError, match="out of range"):
        llm.generate([[1, 2, MODEL.vocab_size]])
    with pytest.raises(ValueError, match="at least one token"):
        llm.generate([[]])
    with pytest.raises(ValueError, match="context"):
        llm.generate([list(range(32))])
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)
    with pytest.raises(ValueError, match="2 sampling parameters"):
        llm.generate([[1], [2], [3]], [SamplingParams(), SamplingParams()])
    # Nothing was queued by the failed calls.
    assert not llm.has_unfinished_requests()


def test_request_ids_are_the_callers_strings_or_engine_numbers():
    llm = toy_llm(MODEL)
    p = prompts(2, seed=21)
    assert llm.add_request(p[0], SamplingParams(temperature=0, max_tokens=3), request_id="req-a") == "req-a"
    auto = llm.add_request(p[1], SamplingParams(temperature=0, max_tokens=3))
    assert isinstance(auto, int)
    with pytest.raises(ValueError, match="already in use"):
        llm.add_request(p[1], request_id="req-a")
    with pytest.raises(TypeError, match="string"):
        llm.add_request(p[1], request_id=7)
    outs = {}
    while llm.has_unfinished_requests():
        outs.update((o.request_id, o) for o in llm.step())
    assert set(outs) == {"req-a", auto}
    assert outs["req-a"].token_ids == MODEL.reference_greedy(p[0], 3)
    # A finished request's ID can be used again.
    assert llm.add_request(p[0], request_id="req-a") == "req-a"


def test_abort_request_frees_its_slot_and_blocks_and_leaves_the_others_alone():
    llm = toy_llm(MODEL, block_size=4, max_num_seqs=2)
    bm = llm.block_manager
    ps = prompts(3, seed=23, lo=20, hi=30)
    greedy = SamplingParams(temperature=0, max_tokens=12)
    for i, p in enumerate(ps):
        llm.add_request(p, greedy, request_id=f"r{i}")
    llm.step()
    llm.step()  # r0 and r1 run (two slots), r2 waits
    assert {s.request_id for s in llm.scheduler.running} == {"r0", "r1"}
    held = len(llm.scheduler.running[0].block_table)
    free = bm.num_free_blocks
    out = llm.abort_request("r0")
    assert out.finish_reason == "abort" and out.request_id == "r0" and out.stop_token_id is None
    assert out.token_ids == MODEL.reference_greedy(ps[0], 2)  # what it had generated
    assert {s.request_id for s in llm.scheduler.running} == {"r1"} and bm.num_free_blocks == free + held
    bm.check_invariants(llm.scheduler.running)
    assert llm.abort_request("r0") is None and llm.abort_request("nobody") is None
    waiting = llm.abort_request("r2")  # never admitted
    assert waiting.finish_reason == "abort" and waiting.token_ids == []
    outs = []
    while llm.has_unfinished_requests():
        outs += llm.step()
    assert [o.request_id for o in outs] == ["r1"] and outs[0].token_ids == MODEL.reference_greedy(ps[1], 12)
    assert bm.num_free_blocks == len(bm.blocks)


@pytest.mark.parametrize("engine_args", [{}, {"max_num_batched_tokens": 9}])
def test_choices_of_one_prompt_share_its_blocks_and_equal_separate_requests(engine_args):
    """``n > 1`` as a server submits it: n requests with one prompt and seeds seed + i, added together. The
    first computes the prompt; the others wait for its blocks and find them cached (also when the prompt is
    prefilled in chunks), and each choice is the request it would be on its own."""
    p = prompts(1, seed=25, lo=30, hi=30)[0]
    params = [SamplingParams(temperature=1.2, top_p=0.9, seed=100 + i, max_tokens=8, logprobs=2) for i in range(4)]
    llm = toy_llm(MODEL, block_size=4, **engine_args)
    outs = llm.generate([p] * 4, params)
    assert outs[0].num_cached_tokens == 0
    assert [o.num_cached_tokens for o in outs[1:]] == [28, 28, 28]  # seven full blocks of 30 tokens
    for sp, out in zip(params, outs):
        alone = toy_llm(MODEL, block_size=4).generate([p], sp)[0]
        assert out.token_ids == alone.token_ids
        # (log probabilities to rounding: a batch of four rows and a lone row round differently)
        for a, b in zip(out.logprobs, alone.logprobs):
            assert a.logprob == pytest.approx(b.logprob, abs=1e-5) and [t for t, _ in a.top] == [t for t, _ in b.top]
