"""The serving layer on the real DeepSeek V4 model (tiny checkpoint and references from
``tests/engine/data``): logits, greedy generations, prefix caching, chunking,
preemption and batch invariance."""

from __future__ import annotations

import random
from functools import cache

import pytest
import torch
from deepseek_engine import LLM, SamplingParams
from deepseek_engine.models.loader import load_model
from model_fixtures import PLAIN, greedy, model, reference
from row_coupling import coupling_ops

REF = reference("tiny_v4")
GREEDY = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)


def engine(**kw) -> LLM:
    kw.setdefault("max_model_len", 512)
    return LLM.from_model(model(PLAIN), **kw)


def ref_prompt(i: int) -> list[int]:
    return REF[f"generate_{i}.input_ids"].tolist()


def ref_output(i: int) -> list[int]:
    return REF[f"generate_{i}.output_ids"].tolist()


def test_llm_loads_a_checkpoint_folder():
    llm = LLM(PLAIN, dtype="float32", max_model_len=256)
    assert llm.vocab_size == 128 and llm.max_model_len == 256
    with pytest.raises(ValueError, match="unknown dtype"):
        LLM(PLAIN, dtype="float8")


@pytest.mark.parametrize("i", [0, 1, 2])
def test_forward_logits_match_the_reference(i):
    ids = REF[f"prefill_{i}.input_ids"].tolist()
    got = engine().forward_logits(ids)
    torch.testing.assert_close(got, REF[f"prefill_{i}.logits"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("engine_args", [
    {},
    {"max_num_batched_tokens": 37, "block_size": 8},  # chunked prefill next to decodes
    {"num_kv_blocks": 20, "block_size": 16, "max_model_len": 320},  # preemption and recompute
])
def test_greedy_generation_matches_transformers(engine_args):
    llm = engine(**engine_args)
    outs = llm.generate([ref_prompt(0), ref_prompt(1)] * 3, GREEDY)
    for k, out in enumerate(outs):
        assert out.token_ids == ref_output(k % 2), k
    if "num_kv_blocks" in engine_args:
        assert llm.scheduler.num_preemptions > 0


def test_prefix_cache_hits_give_the_same_tokens():
    llm = engine(block_size=16)
    prompt = ref_prompt(0)  # 100 tokens: six full blocks
    first = llm.generate([prompt], GREEDY)[0]
    again = llm.generate([prompt], GREEDY)[0]
    assert first.num_cached_tokens == 0 and again.num_cached_tokens == 96
    assert again.token_ids == first.token_ids == ref_output(0)
    # A different continuation of the shared prefix reuses its blocks as well.
    other = prompt[:64] + ref_prompt(1)[:20]
    fresh = engine(enable_prefix_caching=False).generate([other], GREEDY)[0]
    shared = llm.generate([other], GREEDY)[0]
    assert shared.num_cached_tokens == 64 and shared.token_ids == fresh.token_ids


@pytest.mark.parametrize("params", [
    SamplingParams(temperature=0, max_tokens=12, logprobs=2),
    SamplingParams(temperature=0.8, top_p=0.9, top_k=50, seed=42, max_tokens=12),
])
def test_request_output_does_not_depend_on_the_batch(params):
    rng = random.Random(0)
    prompts = [[rng.randrange(2, 128) for _ in range(rng.randint(5, 70))] for _ in range(16)]
    alone = engine().generate([prompts[7]], params)[0]
    others = [SamplingParams(temperature=1.0, seed=100 + i, max_tokens=rng.randint(3, 15)) for i in range(16)]
    others[7] = params
    batched = engine(max_num_batched_tokens=96, block_size=8).generate(prompts, others)[7]
    assert batched.token_ids == alone.token_ids
    # Every product over the step's rows is row_linear (the layer loop of mixed prefill + decode steps, the
    # decode stack and the head): a row's floats never depend on the other rows, so they compare equal.
    assert batched.logprobs == alone.logprobs


@cache
def real_vocab_model(folder, dtype: torch.dtype):
    return load_model(folder, dtype=dtype)


@pytest.mark.parametrize("sampled, dtype", [(False, torch.float32), (True, torch.float32), (True, torch.bfloat16)])
def test_real_vocabulary_alone_and_in_a_batch_of_16_give_identical_tokens_and_logprobs(tiny_v4_checkpoint, sampled,
                                                                                       dtype):
    """The tiny V4 checkpoint with the real vocabulary (its head is 129280 rows; float32, and loaded in bfloat16:
    bf16 weights and head through ``row_linear``'s bf16 path): alone and among 15 others, with prefill chunks next
    to decodes and decode-stack steps, the same tokens and the same log probability floats."""
    m = real_vocab_model(tiny_v4_checkpoint, dtype)
    rng = random.Random(4)
    target = [rng.randrange(3, 129000) for _ in range(23)]
    others = [[rng.randrange(3, 129000) for _ in range(4 + 3 * i)] for i in range(15)]
    params = SamplingParams(temperature=0.8 if sampled else 0, seed=5, max_tokens=8, ignore_eos=True, logprobs=3)
    alone = LLM.from_model(m, block_size=8, max_model_len=128).generate([target], params)[0]
    llm = LLM.from_model(m, block_size=8, max_model_len=128, max_num_batched_tokens=40)
    batch = llm.generate(others[:7] + [target] + others[7:], params)[7]
    assert alone.token_ids == batch.token_ids
    assert alone.logprobs == batch.logprobs  # every float equal


def test_eos_stops_generation():
    assert engine().scheduler.eos_token_ids == {1}  # from the checkpoint config
    # The reference continuation never produces token 1, so declare one of its tokens EOS.
    ref = ref_output(0)
    eos = ref[5]
    out = engine(eos_token_id=eos).generate([ref_prompt(0)], SamplingParams(temperature=0, max_tokens=40))[0]
    assert out.token_ids == ref[: ref.index(eos) + 1]
    assert out.finish_reason == "stop" and out.stop_token_id == eos


def test_batched_decode_logprobs_match_full_forward():
    # Decode steps run all sequences through one batched attention call; their
    # log probabilities must equal a plain one-shot forward over the same tokens.
    rng = random.Random(1)
    prompts = [[rng.randrange(2, 128) for _ in range(n)] for n in (130, 47, 3, 15)]
    outs = engine(block_size=8).generate(prompts, SamplingParams(temperature=0, max_tokens=20, logprobs=0,
                                                                 ignore_eos=True))
    m = model(PLAIN)
    for prompt, out in zip(prompts, outs):
        full = torch.log_softmax(m.forward_full(torch.tensor(prompt + out.token_ids)), dim=-1)
        for k, (token, lp) in enumerate(zip(out.token_ids, out.logprobs)):
            assert lp.logprob == pytest.approx(float(full[len(prompt) - 1 + k, token]), abs=1e-4), (len(prompt), k)


def _edit_weights_between_generates(edit):
    """Generate 12 greedy tokens, apply `edit(model)` (under no_grad), tell the engine (`reload_weights`),
    generate again. Checks the first run against the reference and the second against the per-sequence path
    (prepared by the same call), and that the edit changed the output (so the prefix cache, on here, was dropped
    too). Returns (model, llm, prompt, params, second output)."""
    m = load_model(PLAIN)
    llm = LLM.from_model(m, max_model_len=512)
    prompt = ref_prompt(0)
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    before = llm.generate([prompt], params)[0].token_ids
    assert before == ref_output(0)[:12]
    with torch.no_grad():
        edit(m)
    llm.reload_weights()
    after = llm.generate([prompt], params)[0].token_ids
    assert after == greedy(m, torch.tensor(prompt), 12)
    assert after != before
    return m, llm, prompt, params, after


# These two tests formerly checked that edits were followed without telling the engine (through version keys
# and process-global module registration hooks); the contract is now explicit: derived weights are prepared
# once, and a weight change is announced with ``LLM.reload_weights``.
def test_weights_changed_in_place_are_used_after_reload_weights():
    def edit(m):
        for layer in m.layers:
            layer.attn.wo_b.weight.mul_(-1.5)
            layer.ffn.experts.w2.mul_(2.0)
            layer.hc_ffn_base.add_(0.3)

    _edit_weights_between_generates(edit)


def test_weights_replaced_by_new_objects_are_used_after_reload_weights():
    # Parameters and submodules assigned anew: the plans, stacked MoE weights, fused input projections and the
    # greedy head are built again from them.
    def edit(m):
        for layer in m.layers:
            layer.attn.wo_b.weight = torch.nn.Parameter(layer.attn.wo_b.weight * -1.5)
            layer.ffn.experts.w2 = torch.nn.Parameter(layer.ffn.experts.w2 * 2.0)
            layer.hc_ffn_base = torch.nn.Parameter(layer.hc_ffn_base + 0.3)
            wq_a = torch.nn.Linear(*reversed(layer.attn.wq_a.weight.shape), bias=False)
            wq_a.weight.copy_(layer.attn.wq_a.weight * 0.5)
            layer.attn.wq_a = wq_a

    m, llm, prompt, params, after = _edit_weights_between_generates(edit)
    with torch.no_grad():
        m.head.weight = torch.nn.Parameter(-m.head.weight)
    llm.reload_weights()
    flipped = llm.generate([prompt], params)[0].token_ids
    assert flipped == greedy(m, torch.tensor(prompt), 12)
    assert flipped != after


def test_reload_weights_copies_named_weights_after_checking_them_all():
    m = load_model(PLAIN)
    llm = LLM.from_model(m, max_model_len=512)
    prompt = ref_prompt(0)
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    new = {n: p * 2.0 for n, p in m.named_parameters() if n.endswith("ffn.experts.w2")}
    untouched = {n: p.detach().clone() for n, p in m.named_parameters()}
    for bad in ({**new, "no.such.weight": torch.zeros(1)}, {**new, "head.weight": torch.zeros(3, 3)}):
        with pytest.raises(ValueError):
            llm.reload_weights(bad)
        assert all(torch.equal(p, untouched[n]) for n, p in m.named_parameters())  # nothing copied
    llm.reload_weights(new)
    assert all(torch.equal(dict(m.named_parameters())[n], v) for n, v in new.items())
    assert llm.generate([prompt], params)[0].token_ids == greedy(m, torch.tensor(prompt), 12)


def test_reload_weights_waits_for_requests_and_drops_the_prefix_cache():
    llm = LLM.from_model(load_model(PLAIN), max_model_len=512, block_size=8)
    llm.generate([ref_prompt(0)], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))
    assert llm.block_manager.hash_to_block  # the prompt's full blocks are cached
    llm.add_request(ref_prompt(1), SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))
    with pytest.raises(RuntimeError, match="finished"):
        llm.reload_weights()
    while llm.has_unfinished_requests():
        llm.step()
    llm.reload_weights()
    assert not llm.block_manager.hash_to_block
    assert all(b.hash is None for b in llm.block_manager.blocks)


def test_steps_build_no_derived_weights(monkeypatch):
    """Derived tensors are made in the prepare step only: generating (prefill, decode through the native stack and
    through the layer loop) builds none, and the prepared objects stay the same; ``reload_weights`` builds each
    once per layer."""
    import deepseek_kernels as ops
    from deepseek_engine.layers import moe
    from deepseek_engine.models.deepseek_v4 import batched_attention, decode_plan

    llm = LLM.from_model(load_model(PLAIN), max_model_len=512)
    served = llm.runner.model
    built: list[str] = []
    for owner, name in ((moe, "PreparedMoE"), (batched_attention, "FusedLinears"), (batched_attention, "AttentionPlan"),
                        (decode_plan, "DecodeStackPlan"), (ops, "GreedyHead")):
        cls = getattr(owner, name)
        monkeypatch.setattr(cls, "__init__", (lambda init, name: lambda self, *a, **k: (built.append(name),
                                                                                       init(self, *a, **k))[1])(
            cls.__init__, name))
    kept = (served.plans, served.decode_plan, served.greedy_head, [layer.ffn.prepared for layer in served.model.layers])
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    for use_stack in (True, False):
        served.use_decode_stack = use_stack
        llm.generate([ref_prompt(0), ref_prompt(1)], params)
        llm.generate([ref_prompt(1)[:5]], SamplingParams(temperature=0, max_tokens=3, logprobs=2, ignore_eos=True))
    assert built == []
    assert (served.plans, served.decode_plan, served.greedy_head,
            [layer.ffn.prepared for layer in served.model.layers]) == kept
    llm.reload_weights()
    n = len(served.model.layers)
    assert sorted(built) == sorted(["PreparedMoE"] * n + ["FusedLinears"] * n + ["AttentionPlan"] * n
                                   + ["DecodeStackPlan", "GreedyHead"])


def test_v41_steps_build_no_derived_weights_and_follow_reload_weights(monkeypatch):
    """The same contract on V4.1: its MoE layers are prepared when wrapped, steps prepare nothing, and after an
    edit ``reload_weights`` gives what a freshly wrapped engine of the edited model gives."""
    from deepseek_engine.layers import moe
    from deepseek_engine.models.deepseek_v41 import step_plan
    from model_fixtures import DATA

    m = load_model(DATA / "tiny_v41")
    llm = LLM.from_model(m, max_model_len=256)
    layers = [mod for mod in m.modules() if isinstance(mod, moe.DeepseekV4MoE)]
    assert layers and all(mod.prepared is not None for mod in layers)
    built: list[int] = []
    init = moe.PreparedMoE.__init__
    monkeypatch.setattr(moe.PreparedMoE, "__init__", lambda self, *a: (built.append(1), init(self, *a))[1])
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    prompt = [3 + (7 * i) % 1000 for i in range(37)]
    before = llm.generate([prompt], params)[0].token_ids
    assert built == []
    with torch.no_grad():
        for mod in layers:
            mod.experts.w2.mul_(-3.0)
            mod.shared_experts.w2.weight.mul_(-3.0)
        for layer in m.layers:  # weights the step plan holds in fused copies (step_plan.FusedProducts)
            layer.attn.wq_a.weight.mul_(0.5)
            if layer.attn.compressor is not None:
                layer.attn.compressor.wkv.weight.mul_(-2.0)
    plans: list[int] = []
    plan_init = step_plan.V41StepPlan.__init__
    monkeypatch.setattr(step_plan.V41StepPlan, "__init__", lambda self, *a: (plans.append(1), plan_init(self, *a))[1])
    llm.reload_weights()
    assert len(built) == len(layers) and plans == [1]
    after = llm.generate([prompt], params)[0].token_ids
    assert plans == [1]  # steps build no plan
    assert after == LLM.from_model(m, max_model_len=256).generate([prompt], params)[0].token_ids
    assert after != before


@pytest.mark.parametrize("decode_stack", [True, False])
def test_no_operation_couples_the_rows_of_a_served_step(decode_stack):
    """Structurally, on any CPU: the served V4 model's steps (prefill chunks next to decodes, decode steps in the
    layer loop or in ``decode_stack``, the head) make no BLAS product, no float reduction and no transcendental
    elementwise call on a tensor that is not whole vectors; every product goes through ``row_linear`` (or a
    kernel op with a fixed order per row). (This machine's BLAS may well give the same bits for a row alone and
    in a batch; another CPU's need not, which is what this test rules out.)"""
    llm = engine(max_num_batched_tokens=37, block_size=8)
    served = llm.runner.model
    served.use_decode_stack = decode_stack
    found: list[str] = []

    def recorded(fn):
        def call(*args):
            out = []
            found.extend(coupling_ops(lambda: out.append(fn(*args))))
            return out[0]
        return call

    served.forward, served.greedy_tokens = recorded(served.forward), recorded(served.greedy_tokens)
    rng = random.Random(2)
    prompts = [[rng.randrange(2, 128) for _ in range(rng.randint(5, 40))] for _ in range(5)]
    sampled = SamplingParams(temperature=0.8, seed=3, max_tokens=6, logprobs=2)
    llm.generate(prompts, [sampled, GREEDY, sampled, GREEDY, sampled])
    assert found == []
