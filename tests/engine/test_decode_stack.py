"""Decode steps through ``ops.decode_stack`` (the whole decoder stack in one native call) against the Python
layer loop it replaces, and the op against its reference composition."""

from __future__ import annotations

import random

import deepseek_kernels as ops
import pytest
import torch
from deepseek_engine import LLM, SamplingParams
from deepseek_engine.models.deepseek_v4.decode_plan import DecodeStackPlan
from deepseek_engine.models.loader import load_model
from deepseek_kernels.decode_stack import reference as stack
from model_fixtures import PLAIN, greedy, model

POOLS_ARG, WEIGHTS_ARG = 12, 9  # positions of ``pools`` and ``weights`` among the op's arguments


def _engine(use_stack: bool, m=None, **kw) -> LLM:
    kw.setdefault("max_model_len", 512)
    llm = LLM.from_model(m if m is not None else model(PLAIN), **kw)
    llm.runner.model.use_decode_stack = use_stack
    return llm


def _prompts(seed: int, n: int) -> list[list[int]]:
    rng = random.Random(seed)
    # lengths around the compression rates (4 and 16) and the sliding window (64)
    return [[rng.randrange(2, 128) for _ in range(rng.choice([1, 3, 4, 15, 16, 17, 63, 64, 65, 100]))]
            for _ in range(n)]


@pytest.mark.parametrize("params", [
    SamplingParams(temperature=0, max_tokens=24, ignore_eos=True),  # the greedy head path
    SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, logprobs=3),  # the full logits path
])
def test_decode_steps_match_the_layer_loop_bit_for_bit(params):
    prompts = _prompts(0, 10)
    loop = _engine(False, block_size=8).generate(prompts, params)
    native_llm = _engine(True, block_size=8)
    native = native_llm.generate(prompts, params)
    assert native_llm.runner.model.decode_plan is not None  # the tiny model takes the native path
    for a, b in zip(loop, native):
        assert a.token_ids == b.token_ids
        if params.logprobs is not None:
            for x, y in zip(a.logprobs, b.logprobs):
                assert x.logprob == y.logprob and x.top == y.top


def _captured_call(prompts, steps: int):
    """Run ``steps`` decode steps after the prefill of ``prompts`` and return the arguments of the last
    ``decode_stack`` call, cloned before it ran, plus its result."""
    llm = _engine(True)
    params = SamplingParams(temperature=0, max_tokens=steps + 1, ignore_eos=True)
    calls = []
    real = ops.decode_stack

    def spy(*args):
        cloned = [a.clone() if isinstance(a, torch.Tensor) else
                  [t.clone() if isinstance(t, torch.Tensor) else t for t in a] if isinstance(a, list) else a
                  for a in args]
        out = real(*args)
        calls.append((cloned, out, [t.clone() if isinstance(t, torch.Tensor) else t for t in args[POOLS_ARG]]))
        return out

    ops.decode_stack = spy
    try:
        llm.generate(prompts, params)
    finally:
        ops.decode_stack = real
    assert len(calls) == steps
    return calls


def test_the_op_is_its_reference_composition_bit_for_bit():
    # Steps that close windows (every fourth: rate 4; every sixteenth: rate 16) and steps that do not.
    calls = _captured_call(_prompts(1, 6), 17)
    closing = 0
    for args, out, pools_after in calls:
        closing += any((p + 1) % 4 == 0 for p in args[2].tolist())
        again = [a if not isinstance(a, list) else [t.clone() if isinstance(t, torch.Tensor) else t for t in a]
                 for a in args]
        composed = stack.decode_stack_reference(*again)  # the other ops' CPU kernels, called from Python
        assert torch.equal(composed, out)
        for got, want in zip(again[POOLS_ARG], pools_after):
            assert (got is None and want is None) or torch.equal(got, want)
    assert 0 < closing < len(calls)


def test_the_op_in_reference_mode_is_close_to_the_kernels():
    (args, out, _), = _captured_call(_prompts(2, 4), 1)
    with ops.using("reference"), torch.inference_mode():  # (the captured pools are inference tensors)
        ref = ops.decode_stack(*args)
    torch.testing.assert_close(ref, out, rtol=1e-5, atol=1e-5)


def test_a_layer_the_op_does_not_cover_keeps_the_layer_loop():
    m = load_model(PLAIN)
    m.layers[2].ffn.gate.top_k = 1  # 4 experts > 2 * top_k: routed experts, not the dense product
    llm = _engine(True, m)
    prompt = _prompts(3, 1)[0]
    out = llm.generate([prompt], SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))[0]
    assert llm.runner.model.decode_plan is None
    assert out.token_ids == greedy(m, torch.tensor(prompt), 8)


def test_plan_declines_non_float32_parameters():
    m = load_model(PLAIN)
    layers = list(m.layers)
    adapter = _engine(True, m).runner.model
    sites, plans = adapter.plans
    assert DecodeStackPlan.build(layers, sites, plans, 64) is not None
    m.layers[0].attn.attn_sink.data = m.layers[0].attn.attn_sink.data.double()
    assert DecodeStackPlan.build(layers, sites, plans, 64) is None


def test_malformed_arguments_are_clear_errors():
    (args, _, _), = _captured_call(_prompts(4, 2), 1)
    short = list(args)
    short[WEIGHTS_ARG] = args[WEIGHTS_ARG][:-1]  # one weight missing from the flat list
    with pytest.raises(RuntimeError, match="one fixed-size record per layer"), torch.inference_mode():
        torch.ops.deepseek_kernels.decode_stack(*short)
    missing = list(args)
    missing[WEIGHTS_ARG] = list(args[WEIGHTS_ARG])
    missing[WEIGHTS_ARG][stack.Weight.SINK] = None
    with pytest.raises(RuntimeError, match="sink"), torch.inference_mode():
        torch.ops.deepseek_kernels.decode_stack(*missing)


def test_schema_and_fake_implementation():
    (args, _, _), = _captured_call(_prompts(5, 3), 1)

    def plain(a):  # the captured tensors are inference tensors; opcheck needs ordinary ones
        if isinstance(a, torch.Tensor):
            return a.clone()
        return [plain(t) for t in a] if isinstance(a, list) else a

    with torch.inference_mode(False):
        torch.library.opcheck(torch.ops.deepseek_kernels.decode_stack.default, tuple(plain(a) for a in args),
                              test_utils=("test_schema", "test_faketensor"))


def test_a_hash_table_replaced_is_followed_after_reload_weights():
    # Formerly followed through process-global module registration hooks; the contract is now explicit: the
    # prepared arguments keep the table they were built with until the engine is told (``reload_weights``).
    # A buffer put straight into ``_buffers`` (as ``Module.to`` / ``_apply`` do) is the hardest case.
    m = load_model(PLAIN)
    llm = _engine(True, m)
    prompt = _prompts(7, 1)[0]
    params = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
    before = llm.generate([prompt], params)[0].token_ids
    gate = next(layer.ffn.gate for layer in m.layers if layer.ffn.gate.hash_routed)
    gate._buffers["tid2eid"] = (gate.tid2eid + 1) % m.layers[0].ffn.experts.w1.shape[0]
    assert llm.generate([prompt], params)[0].token_ids == before  # not told: the prepared table
    llm.reload_weights()  # (also drops the prefix cache, whose blocks hold the old routing's rows)
    after = llm.generate([prompt], params)[0].token_ids
    assert llm.runner.model.decode_plan is not None
    assert after == greedy(m, torch.tensor(prompt), 10)
    assert after != before
