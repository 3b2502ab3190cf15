"""Constrained decoding in the engine (``SamplingParams(constraint=...)``), on the tiny random V4.1 and V4
checkpoints, whose free output is garbage: a token-level DFA (``deepseek_engine.testing.token_dfa``) forces it
into a language, in continuous batches mixed with unconstrained rows that stay bitwise identical to running
alone, under preemption, on prefix-cache hits, greedy and sampled."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import torch
from deepseek_engine import LLM, SamplingParams
from deepseek_engine.testing.token_dfa import TokenDFA

DATA = Path(__file__).resolve().parent / "data"
TINY_V41 = DATA / "tiny_v41"  # vocabulary 1024, EOS 1
TINY_V4 = DATA / "tiny_v4"    # vocabulary 128, EOS 1
EOS = 1
torch.set_num_threads(1)


@cache
def llm_v41(**engine_args) -> LLM:
    return LLM(str(TINY_V41), block_size=4, **engine_args)


def prompt(n: int, seed: int, vocab: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (n,), generator=g).tolist()


def language(vocab: int, loop: bool = True) -> TokenDFA:
    """Three tokens of three small sets (EOS listed where the output may not end yet: the engine must hide it),
    then any number of tokens of a fourth set; the output may end after the third token."""
    steps = [{10, 11, 12, EOS}, set(range(40, 60)), {7}]
    return TokenDFA.chain(vocab, steps, loop=range(90, 100) if loop else ())


def follows(dfa: TokenDFA, out) -> bool:
    """The output is in the language: a prefix of a word (cut by max_tokens), a whole word ended by EOS, or a
    whole word at a terminal state."""
    if out.stop_token_id is not None:
        return out.token_ids[-1] == EOS and dfa.accepts(out.token_ids[:-1])
    if out.finish_reason == "stop":
        return dfa.accepts(out.token_ids)
    return dfa.is_prefix(out.token_ids)


GREEDY = dict(temperature=0.0, max_tokens=12)
SAMPLED = dict(temperature=0.9, top_p=0.95, max_tokens=12)


def test_greedy_output_is_forced_into_the_language_and_free_rows_are_untouched():
    llm = llm_v41()
    dfa = language(1024)
    prompts = [prompt(6 + i, 10 + i, 1024) for i in range(4)]
    free = llm.generate(prompts, SamplingParams(**GREEDY))
    assert not any(dfa.is_prefix(o.token_ids) for o in free)  # the random model ignores the language
    params = [SamplingParams(**GREEDY, constraint=dfa if i % 2 == 0 else None) for i in range(4)]
    mixed = llm.generate(prompts, params)
    for i, out in enumerate(mixed):
        if i % 2 == 0:
            assert follows(dfa, out), out.token_ids
        else:
            assert out.token_ids == free[i].token_ids  # bitwise the same tokens as without constrained neighbours


def test_sampled_rows_follow_the_language_and_seeded_free_rows_match_running_alone():
    llm = llm_v41()
    dfa = language(1024)
    prompts = [prompt(7, 30 + i, 1024) for i in range(4)]
    params = [SamplingParams(**SAMPLED, seed=100 + i, constraint=dfa if i < 2 else None, logprobs=2)
              for i in range(4)]
    together = llm.generate(prompts, params)
    alone = [llm.generate([p], SamplingParams(**SAMPLED, seed=100 + i, logprobs=2))[0]
             for i, p in enumerate(prompts)]
    for i in range(4):
        if i < 2:
            assert follows(dfa, together[i]), together[i].token_ids
            # Log probabilities stay the model's raw ones: the first step's top tokens are the free run's.
            assert together[i].logprobs[0].top == alone[i].logprobs[0].top
        else:
            assert together[i].token_ids == alone[i].token_ids
            assert [lp.logprob for lp in together[i].logprobs] == [lp.logprob for lp in alone[i].logprobs]


def test_eos_only_where_the_grammar_accepts_and_a_terminal_state_ends_the_request():
    llm = llm_v41()
    # Accepting after two tokens, and then only EOS is left: the request ends on EOS.
    only_eos = TokenDFA(1024, {0: {EOS: 1, 20: 1}, 1: {21: 2}, 2: {EOS: 3}}, accepting={2, 3})
    out = llm.generate([prompt(5, 1, 1024)], SamplingParams(**GREEDY, constraint=only_eos))[0]
    assert out.token_ids == [20, 21, EOS] and out.finish_reason == "stop" and out.stop_token_id == EOS
    # A terminal state (no token allowed after it) ends the request there, without EOS.
    terminal = language(1024, loop=False)
    out = llm.generate([prompt(5, 2, 1024)], SamplingParams(**GREEDY, constraint=terminal))[0]
    assert terminal.accepts(out.token_ids) and len(out.token_ids) == 3
    assert out.finish_reason == "stop" and out.stop_token_id is None
    # ignore_eos: EOS is then an ordinary token, allowed only where the grammar lists it.
    out = llm.generate([prompt(5, 1, 1024)], SamplingParams(**GREEDY, ignore_eos=True, constraint=only_eos))[0]
    assert only_eos.accepts(out.token_ids) and out.stop_token_id is None


def test_each_request_of_a_shared_grammar_gets_its_own_matcher_and_a_bare_matcher_serves_one():
    llm = llm_v41()
    dfa = language(1024)
    prompts = [prompt(6, 50 + i, 1024) for i in range(3)]
    outs = llm.generate(prompts, SamplingParams(**SAMPLED, seed=5, constraint=dfa))
    assert all(follows(dfa, o) for o in outs)
    with pytest.raises(ValueError, match="constrains one request only"):
        llm.generate(prompts[:2], SamplingParams(**GREEDY, constraint=dfa.matcher()))
    assert not llm.has_unfinished_requests()  # refused before any work
    matcher = dfa.matcher()
    llm.add_request(prompts[0], SamplingParams(**GREEDY, constraint=matcher))
    with pytest.raises(ValueError, match="constrains one request only"):
        llm.add_request(prompts[1], SamplingParams(**GREEDY, constraint=matcher))
    while llm.has_unfinished_requests():
        llm.step()
    assert matcher.accepted >= 3 and matcher.calls["fill_bitmask"] >= 3
    with pytest.raises(ValueError, match="constraint must be a token matcher"):
        SamplingParams(constraint="json")


def test_preemption_and_prefix_cache_hits_keep_the_constrained_output():
    dfa = language(1024)
    prompts = [prompt(18, 70 + i, 1024) for i in range(5)]
    params = [SamplingParams(**GREEDY, constraint=dfa if i % 2 else None) for i in range(5)]
    roomy = LLM(str(TINY_V41), block_size=4, enable_prefix_caching=False).generate(prompts, params)
    tight = LLM(str(TINY_V41), block_size=4, num_kv_blocks=16, max_model_len=64)
    squeezed = tight.generate(prompts, params)
    assert tight.scheduler.num_preemptions > 0
    assert [o.token_ids for o in squeezed] == [o.token_ids for o in roomy]
    # The same prompts again: their full blocks come from the prefix cache, the matcher starts afresh.
    cached = LLM(str(TINY_V41), block_size=4)
    first = cached.generate(prompts[:2], params[:2])
    again = cached.generate(prompts[:2], params[:2])
    assert all(o.num_cached_tokens > 0 for o in again)
    assert [o.token_ids for o in again] == [o.token_ids for o in first] == [o.token_ids for o in roomy[:2]]
    assert follows(dfa, again[1])


def test_v4_checkpoint_and_unconstrained_steps_pay_nothing(monkeypatch):
    llm = LLM(str(TINY_V4), block_size=4)
    dfa = TokenDFA.chain(128, [{5, 6}, {9}], loop=range(30, 40))
    prompts = [prompt(8, 90 + i, 128) for i in range(3)]
    free = llm.generate(prompts, SamplingParams(**GREEDY))
    outs = llm.generate(prompts, [SamplingParams(**GREEDY, constraint=dfa), SamplingParams(**GREEDY),
                                  SamplingParams(**SAMPLED, seed=3, constraint=dfa)])
    assert follows(dfa, outs[0]) and follows(dfa, outs[2])
    assert outs[1].token_ids == free[1].token_ids
    # An all-greedy step takes the greedy head's arg-maxes and computes logits only for the rows whose arg-max
    # the grammar forbids (``greedy_step``): the same tokens as masking full logits (the sampled neighbour
    # above forced that path).
    calls = []
    step = llm.runner.model.greedy_step
    monkeypatch.setattr(llm.runner.model, "greedy_step", lambda *a: calls.append(1) or step(*a))
    greedy = llm.generate(prompts[:2], [SamplingParams(**GREEDY, constraint=dfa), SamplingParams(**GREEDY)])
    assert calls and [o.token_ids for o in greedy] == [o.token_ids for o in outs[:2]]
    # Without constrained requests no step is marked constrained and no bitmask is ever filled.
    calls = []
    monkeypatch.setattr(llm.runner.masks, "apply", lambda *a: calls.append(a))
    llm.generate(prompts, SamplingParams(**SAMPLED, seed=1))
    assert calls == [] and llm.scheduler.num_constrained == 0


def matcher_follows_output(matcher, out) -> bool:
    """The matcher's state is that of the output tokens (an ending token is not fed to it)."""
    tokens = out.token_ids[:-1] if out.stop_token_id is not None else out.token_ids
    return matcher.accepted == len(tokens) and matcher.state == matcher.dfa.run(tokens)


@pytest.mark.parametrize("spec", [dict(num_speculative_tokens=3), dict(num_speculative_tokens=4, adaptive=True)])
def test_dspark_drafts_obey_the_grammar_and_greedy_equals_plain_constrained(spec):
    from deepseek_engine.speculative import SpeculativeConfig

    llm = llm_v41()
    config = SpeculativeConfig("dspark", **spec)
    dfa = language(1024)
    prompts = [prompt(9, 110 + i, 1024) for i in range(3)]
    plain = llm.generate(prompts, [SamplingParams(**GREEDY, constraint=dfa if i < 2 else None) for i in range(3)])
    matchers = [dfa.matcher(), dfa.matcher()]
    params = [SamplingParams(**GREEDY, constraint=matchers[i] if i < 2 else None, speculative=config)
              for i in range(3)]
    spec_out = llm.generate(prompts, params)
    assert [o.token_ids for o in spec_out] == [o.token_ids for o in plain]
    for m, out in zip(matchers, spec_out):
        assert follows(dfa, out) and matcher_follows_output(m, out)
    if not config.adaptive:  # drafts were accepted (drafting under the grammar's mask helps)
        assert sum(spec_out[0].spec_accepted_per_step) > 0
    # Sampled: every draft the verifier keeps is one the grammar allowed, and rejected ones are rolled back.
    matchers = [dfa.matcher() for _ in range(3)]
    sampled = llm.generate(prompts, [SamplingParams(**SAMPLED, seed=7 + i, constraint=matchers[i], speculative=config)
                                     for i in range(3)])
    for m, out in zip(matchers, sampled):
        assert follows(dfa, out) and matcher_follows_output(m, out)
    assert any(m.calls.get("rollback", 0) for m in matchers)


def test_v4_mtp_constrained_greedy_equals_plain_constrained(tmp_path_factory):
    from deepseek_engine.speculative import SpeculativeConfig
    from test_speculative import v4_with_mtp

    folder = v4_with_mtp(str(tmp_path_factory.mktemp("mtp") / "ckpt"))
    llm = LLM(str(folder), block_size=4)
    dfa = TokenDFA.chain(128, [{5, 6, EOS}, {9}], loop=range(30, 40))
    prompts = [prompt(10, 130 + i, 128) for i in range(2)]
    plain = llm.generate(prompts, SamplingParams(**GREEDY, constraint=dfa))
    matchers = [dfa.matcher() for _ in prompts]
    spec = SpeculativeConfig("mtp", num_speculative_tokens=2)
    outs = llm.generate(prompts, [SamplingParams(**GREEDY, constraint=m, speculative=spec) for m in matchers])
    assert [o.token_ids for o in outs] == [o.token_ids for o in plain]
    assert all(follows(dfa, o) and matcher_follows_output(m, o) for m, o in zip(matchers, outs))


def test_the_plain_engine_keeps_the_matcher_at_the_output():
    llm = LLM(str(TINY_V41), block_size=4, num_kv_blocks=16, max_model_len=64)
    dfa = language(1024)
    prompts = [prompt(18, 150 + i, 1024) for i in range(4)]
    matchers = [dfa.matcher() for _ in prompts]
    outs = llm.generate(prompts, [SamplingParams(**SAMPLED, seed=i, constraint=m) for i, m in enumerate(matchers)])
    assert llm.scheduler.num_preemptions > 0
    assert all(follows(dfa, o) and matcher_follows_output(m, o) for m, o in zip(matchers, outs))


def test_speculative_llm_takes_the_constraint_too():
    from deepseek_engine.models.loader import load_model
    from deepseek_engine.speculative import SpeculativeConfig, SpeculativeLLM, load_drafter

    m = load_model(TINY_V41)
    llm = SpeculativeLLM.from_models(m, load_drafter(TINY_V41, m, "dspark"), SpeculativeConfig("dspark"),
                                     block_size=4)
    dfa = language(1024)
    prompts = [prompt(8, 170 + i, 1024) for i in range(2)]
    outs = llm.generate(prompts, SamplingParams(**GREEDY, constraint=dfa))
    plain = llm_v41().generate(prompts, SamplingParams(**GREEDY, constraint=dfa))
    assert [o.token_ids for o in outs] == [o.token_ids for o in plain]
    with pytest.raises(ValueError, match="constrains one request only"):
        llm.generate(prompts, SamplingParams(**GREEDY, constraint=dfa.matcher()))


def test_a_failing_matcher_ends_its_own_request_not_the_engine():
    from deepseek_engine.testing.token_dfa import DFAMatcher

    class Failing(DFAMatcher):
        def accept_token(self, token):
            if self.accepted == 2:
                raise RuntimeError("grammar bug")
            return super().accept_token(token)

    llm = llm_v41()
    dfa = language(1024)
    prompts = [prompt(6, 190 + i, 1024) for i in range(2)]
    outs = llm.generate(prompts, [SamplingParams(**GREEDY, constraint=Failing(dfa)), SamplingParams(**GREEDY)])
    assert len(outs[0].token_ids) == 3 and outs[0].finish_reason == "stop"
    assert outs[1].token_ids == llm.generate(prompts[1:], SamplingParams(**GREEDY))[0].token_ids


def test_a_matcher_that_cannot_roll_back_is_replayed_from_its_grammar():
    """llguidance refuses to roll back some grammars (a token budget): speculation then rebuilds the matcher
    from its grammar and replays the output; with a bare matcher (no grammar to rebuild from) the request
    ends instead of the engine."""
    from deepseek_engine.speculative import SpeculativeConfig
    from deepseek_engine.testing.token_dfa import DFAMatcher

    class NoRollback(DFAMatcher):
        def rollback(self, n):
            if n:
                raise RuntimeError("rollback not supported")

    class Grammar(TokenDFA):
        def matcher(self):
            return NoRollback(self)

    dfa = language(1024)
    grammar = Grammar(dfa.vocab_size, dfa.transitions, dfa.accepting)
    llm = llm_v41()
    prompts = [prompt(9, 110 + i, 1024) for i in range(2)]
    spec = SpeculativeConfig("dspark", num_speculative_tokens=3)
    plain = llm.generate(prompts, SamplingParams(**GREEDY, constraint=dfa))
    outs = llm.generate(prompts, SamplingParams(**GREEDY, constraint=grammar, speculative=spec))
    assert [o.token_ids for o in outs] == [o.token_ids for o in plain]
    assert sum(sum(o.spec_verify_lengths) - sum(o.spec_accepted_per_step) for o in outs) > 0  # drafts were rejected
    bare = llm.generate(prompts[:1], SamplingParams(**GREEDY, constraint=NoRollback(dfa), speculative=spec))[0]
    assert bare.finish_reason == "stop" and plain[0].token_ids[:len(bare.token_ids)] == bare.token_ids
