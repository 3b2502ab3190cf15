"""Speculative decoding: V4.1 DSpark on the tiny V4.1 checkpoint, V4 MTP on the tiny V4 checkpoint.

* greedy with speculation equals greedy without it, token for token (fixed-k and adaptive);
* rejected drafts leave no trace: the target cache after a rolled-back step equals
  the cache of a run that never saw the drafts (every row below the token count);
* rejection sampling keeps the target's distribution (a chi-square test on the
  verifier itself, and on the first sampled tokens end to end);
* each step reports its accepted drafts and verify length.
"""

from __future__ import annotations

import math
import shutil
from functools import cache
from pathlib import Path

import pytest
import torch
from deepseek_engine.models.loader import load_model
from deepseek_engine.sampling_params import SamplingParams
from deepseek_engine.speculative import SpeculativeConfig, SpeculativeLLM, load_drafter
from deepseek_engine.speculative.dspark import adaptive_budget
from deepseek_engine.speculative.rejection import verify_greedy, verify_sampling
from deepseek_engine.testing.tiny_checkpoint import add_random_mtp_layer

DATA = Path(__file__).resolve().parent / "data"
TINY_V41 = DATA / "tiny_v41"
TINY_V4 = DATA / "tiny_v4"
torch.set_num_threads(1)


@cache
def v41():
    return load_model(TINY_V41)


def greedy_reference(model, prompt: list[int], steps: int) -> list[int]:
    cache = model.new_cache(len(prompt) + steps + 1, 16)
    logits = model(torch.tensor(prompt), torch.arange(len(prompt)), cache)
    out = [int(logits[-1].argmax())]
    while len(out) < steps:
        logits = model(torch.tensor([out[-1]]), torch.tensor([cache.num_tokens]), cache)
        out.append(int(logits[-1].argmax()))
    return out


def prompt(n: int, seed: int, vocab: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (n,), generator=g).tolist()


@pytest.mark.parametrize("k, adaptive", [(1, False), (3, False), (4, True)])
def test_dspark_greedy_equals_plain_greedy(k, adaptive):
    m = v41()
    spec = SpeculativeConfig("dspark", num_speculative_tokens=k, adaptive=adaptive,
                             costs=[1.0 + 0.05 * b for b in range(k + 1)])
    llm = SpeculativeLLM.from_models(m, load_drafter(TINY_V41, m, "dspark"), spec, block_size=4)
    params = SamplingParams(temperature=0.0, max_tokens=20, ignore_eos=True)
    for seed in range(3):
        p = prompt(9 + seed, seed, 1024)
        out = llm.generate([p], params)[0]
        assert out.token_ids == greedy_reference(m, p, 20)
        assert sum(a + 1 for a in out.accepted_per_step) + 1 >= len(out.token_ids)
        assert all(0 <= a <= v <= k for a, v in zip(out.accepted_per_step, out.verify_lengths))
        assert out.target_forwards == len(out.accepted_per_step) + 1


def test_rejected_drafts_leave_no_trace():
    """After speculation the target cache rows below the token count equal those of plain decoding."""
    m = v41()
    from deepseek_engine.speculative.decoding import SpeculativeDecoder

    drafter = load_drafter(TINY_V41, m, "dspark")
    dec = SpeculativeDecoder(m, drafter, SpeculativeConfig("dspark", num_speculative_tokens=4), block_size=4)
    p = prompt(11, 5, 1024)
    caches = []
    real_new_cache = m.new_cache

    def spy(*a, **kw):
        caches.append(real_new_cache(*a, **kw))
        return caches[-1]

    m.new_cache = spy
    try:
        res = dec.generate(p, SamplingParams(temperature=0.0, max_tokens=15, ignore_eos=True), torch.Generator())
    finally:
        del m.new_cache
    assert any(a < v for a, v in zip(res.accepted_per_step, res.verify_lengths)), "no draft was rejected"
    spec_cache = caches[0]
    ids = p + res.token_ids[:-1]
    plain = m.new_cache(len(ids) + 8, 4)
    m(torch.tensor(ids), torch.arange(len(ids)), plain)
    n = spec_cache.num_tokens
    assert n == len(ids)
    rows = spec_cache.slots(torch.arange(n))
    prow = plain.slots(torch.arange(n))
    assert torch.equal(spec_cache.pool.token_ids.view(-1)[rows], plain.pool.token_ids.view(-1)[prow])
    for lp, pp in zip(spec_cache.pool.layers, plain.pool.layers):
        for name in ("kv", "raw", "entries", "index_keys"):
            a, b = getattr(lp, name), getattr(pp, name)
            if a is None:
                continue
            a, b = a.view(-1, a.shape[-1])[rows], b.view(-1, b.shape[-1])[prow]
            if name in ("entries", "index_keys"):  # only closing rows hold entries
                keep = [i for i in range(n) if (i + 1) % lp.ratio == 0]
                a, b = a[keep], b[keep]
            torch.testing.assert_close(a, b, atol=3e-5, rtol=0)


def test_verify_sampling_keeps_the_target_distribution():
    g = torch.Generator().manual_seed(0)
    vocab = 6
    p = torch.softmax(torch.randn(2, vocab, generator=g) * 1.5, -1)
    q = torch.softmax(torch.randn(1, vocab, generator=g) * 1.5, -1)
    counts = torch.zeros(vocab)
    trials = 6000
    for _ in range(trials):
        d = int(torch.multinomial(q[0], 1, generator=g))
        first = verify_sampling(p, q, [d], g)[0]
        counts[first] += 1
    expected = p[0] * trials
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 20.5  # 99.9% quantile of chi-square with 5 degrees of freedom


def test_sampled_speculation_keeps_the_target_distribution():
    """First two sampled tokens over many seeds: speculative vs plain sampling agree (chi-square on token 2)."""
    m = v41()
    drafter = load_drafter(TINY_V41, m, "dspark")
    llm = SpeculativeLLM.from_models(m, drafter, SpeculativeConfig("dspark", num_speculative_tokens=2), block_size=4)
    p = prompt(6, 9, 1024)
    params = dict(temperature=1.0, top_k=3, max_tokens=2, ignore_eos=True)
    # Exact target distribution of token 2 given token 1, mixed over token 1.
    logits = m.forward_full(torch.tensor(p))[-1]
    from deepseek_engine.core.sampler import filtered_probs

    p1 = filtered_probs(logits, SamplingParams(**params))
    dist = torch.zeros(1024)
    for t1 in torch.nonzero(p1).flatten().tolist():
        l2 = m.forward_full(torch.tensor(p + [t1]))[-1]
        dist += p1[t1] * filtered_probs(l2, SamplingParams(**params))
    counts = torch.zeros(1024)
    trials = 150
    for seed in range(trials):
        out = llm.generate([p], SamplingParams(seed=seed, **params))[0]
        counts[out.token_ids[1]] += 1
    support = dist > 0
    assert counts[~support].sum() == 0
    expected = dist[support] * trials
    chi2 = float(((counts[support] - expected) ** 2 / expected).sum())
    dof = int(support.sum()) - 1
    assert chi2 < dof + 4 * math.sqrt(2 * dof) + 10


def test_adaptive_budget_maximises_expected_tokens_per_cost():
    conf = torch.tensor([0.9, 0.8, 0.1, 0.9])
    costs = [1.0, 1.1, 1.2, 1.3, 1.4]
    b = adaptive_budget(conf, costs)
    surv = [0.9, 0.72, 0.072, 0.0648]
    ratios = [(1 + sum(surv[:j])) / costs[j] for j in range(5)]
    assert b == max(range(5), key=lambda j: ratios[j]) == 2
    assert adaptive_budget(torch.tensor([0.01, 0.01]), [1.0, 2.0, 3.0]) == 0


def test_verify_greedy():
    logits = torch.eye(5)[[1, 2, 3, 4]]  # arg-maxes 1, 2, 3, 4
    assert verify_greedy(logits, [1, 2, 3]) == [1, 2, 3, 4]
    assert verify_greedy(logits, [1, 0, 3]) == [1, 2]
    assert verify_greedy(logits[:1], []) == [1]


@cache
def v4_with_mtp(folder: str) -> Path:
    """The tiny V4 checkpoint plus random ``mtp.0.*`` weights (native names)."""
    out = Path(folder)
    shutil.copytree(TINY_V4, out)
    add_random_mtp_layer(out)
    return out


def test_v4_mtp_greedy_equals_plain_greedy(tmp_path_factory):
    folder = v4_with_mtp(str(tmp_path_factory.mktemp("mtp") / "ckpt"))
    llm = SpeculativeLLM(folder, SpeculativeConfig("mtp", num_speculative_tokens=2), block_size=4)
    target = llm.model
    for seed in range(2):
        p = prompt(10, seed, target.config.vocab_size)
        out = llm.generate([p], SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True))[0]
        assert out.token_ids == greedy_reference(target, p, 16)
        assert len(out.verify_lengths) == len(out.accepted_per_step) == out.target_forwards - 1


def test_speculative_config_errors():
    with pytest.raises(ValueError, match="unknown speculative method"):
        SpeculativeConfig("eagle")
    with pytest.raises(ValueError, match="confidence head"):
        SpeculativeConfig("mtp", adaptive=True)


def test_llm_option_turns_speculation_on():
    from deepseek_engine import LLM

    p = prompt(10, 3, 1024)
    params = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
    spec = LLM(str(TINY_V41), speculative=SpeculativeConfig("dspark", num_speculative_tokens=3)).generate([p], params)[0]
    plain = LLM(str(TINY_V41)).generate([p], params)[0]
    assert spec.token_ids == plain.token_ids
    assert len(spec.spec_accepted_per_step) == len(spec.spec_verify_lengths) > 0
    assert plain.spec_accepted_per_step is None


def test_speculation_is_a_per_request_option_with_mixed_batches():
    """One generate call mixing plain, DSpark fixed-k and adaptive requests: greedy tokens equal plain decoding."""
    from deepseek_engine import LLM

    prompts = [prompt(8 + s, 20 + s, 1024) for s in range(4)]
    fixed = SpeculativeConfig("dspark", num_speculative_tokens=3)
    adapt = SpeculativeConfig("dspark", num_speculative_tokens=4, adaptive=True)
    base = dict(temperature=0.0, max_tokens=10, ignore_eos=True)
    params = [SamplingParams(**base), SamplingParams(**base, speculative=fixed),
              SamplingParams(**base, speculative=adapt), SamplingParams(**base, speculative=fixed)]
    llm = LLM(str(TINY_V41), block_size=4)
    mixed = llm.generate(prompts, params)
    plain = llm.generate(prompts, SamplingParams(**base))
    assert [o.token_ids for o in mixed] == [o.token_ids for o in plain]
    assert mixed[0].spec_accepted_per_step is None
    for out, k in zip(mixed[1:], (3, 4, 3)):
        assert len(out.spec_accepted_per_step) == len(out.spec_verify_lengths) > 0
        assert all(0 <= a <= v <= k for a, v in zip(out.spec_accepted_per_step, out.spec_verify_lengths))
        assert len(out.token_ids) <= 1 + sum(a + 1 for a in out.spec_accepted_per_step)
        assert 0.0 <= out.spec_acceptance_rate <= 1.0
    # A request can opt out of the LLM's default setting.
    llm_default = LLM(str(TINY_V41), block_size=4, speculative=fixed)
    outs = llm_default.generate(prompts[:2], [SamplingParams(**base), SamplingParams(**base, speculative=False)])
    assert [o.token_ids for o in outs] == [o.token_ids for o in plain[:2]]
    assert outs[0].spec_verify_lengths and outs[1].spec_verify_lengths is None
    assert outs[1].spec_acceptance_rate is None


def test_speculative_sampling_params_errors():
    with pytest.raises(ValueError, match="SpeculativeConfig"):
        SamplingParams(speculative="dspark")
    with pytest.raises(ValueError, match="logprobs"):
        SamplingParams(speculative=SpeculativeConfig("dspark"), logprobs=1)


def test_seeded_speculative_requests_do_not_depend_on_their_neighbours():
    """Lock-step speculation: a seeded sampled request yields the same tokens alone and among others."""
    from deepseek_engine import LLM

    spec = SpeculativeConfig("dspark", num_speculative_tokens=3)
    prompts = [prompt(7 + s, 40 + s, 1024) for s in range(3)]
    params = [SamplingParams(temperature=0.8, top_p=0.9, seed=100 + s, max_tokens=8, ignore_eos=True,
                             speculative=spec) for s in range(3)]
    llm = LLM(str(TINY_V41), block_size=4)
    together = llm.generate(prompts, params)
    alone = [llm.generate([p], sp)[0] for p, sp in zip(prompts, params)]
    assert [o.token_ids for o in together] == [o.token_ids for o in alone]
    assert [o.spec_accepted_per_step for o in together] == [o.spec_accepted_per_step for o in alone]


def test_dspark_requests_are_verified_in_one_batched_target_pass(monkeypatch):
    """Several DSpark requests of one call share a target pool and each round verifies them all in one batched
    pass (``verify_together``); greedy tokens equal plain decoding, request by request."""
    from deepseek_engine import LLM
    from deepseek_engine.speculative import decoding

    calls: list[int] = []
    together = decoding.verify_together
    monkeypatch.setattr(decoding, "verify_together", lambda group, plan=None: (calls.append(len(group)),
                                                                                together(group, plan))[1])
    prompts = [prompt(30 + s, 9 + 5 * s, 1024) for s in range(3)]
    params = SamplingParams(temperature=0.0, max_tokens=9, ignore_eos=True)
    llm = LLM(str(TINY_V41), block_size=4, speculative=SpeculativeConfig("dspark", num_speculative_tokens=3))
    spec = llm.generate(prompts, params)
    plain = LLM(str(TINY_V41), block_size=4).generate(prompts, params)
    assert [o.token_ids for o in spec] == [o.token_ids for o in plain]
    assert calls and calls[0] == 3
    for out in spec:
        assert len(out.spec_accepted_per_step) == len(out.spec_verify_lengths) > 0
