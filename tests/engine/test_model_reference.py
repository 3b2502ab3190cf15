"""The engine reproduces float32 logits and greedy tokens recorded from transformers' DeepSeek V4."""

from __future__ import annotations

import pytest
import torch
from model_fixtures import PLAIN, QUANT, describe_token_diff, greedy, model, reference

ATOL = 1e-4
PREFIX_LENGTHS = [1, 2, 3, 4, 5, 15, 16, 17, 63, 64, 127, 128, 129, 200, 255, 256, 300]


def check_rows(got: torch.Tensor, want: torch.Tensor, label: str) -> None:
    assert got.shape == want.shape, f"{label}: shape {tuple(got.shape)} vs {tuple(want.shape)}"
    err = (got - want).abs().amax(dim=-1)
    bad = (err > ATOL).nonzero().flatten().tolist()
    assert not bad, f"{label}: positions {bad[:10]} exceed {ATOL} (max {float(err.max()):.3g})"


@pytest.mark.parametrize("length", PREFIX_LENGTHS)
def test_prefill_logits_match_reference(length):
    ref = reference("tiny_v4")
    ids = ref["prefill_0.input_ids"][:length]
    check_rows(model(PLAIN).forward_full(ids), ref["prefill_0.logits"][:length], f"prompt of {length}")


@pytest.mark.parametrize("index", [1, 2])
def test_other_prompts_match_reference(index):
    ref = reference("tiny_v4")
    ids = ref[f"prefill_{index}.input_ids"]
    check_rows(model(PLAIN).forward_full(ids), ref[f"prefill_{index}.logits"], f"prompt {index}")


@pytest.mark.parametrize("length", [1, 33, 128, 129, 300])
def test_quantized_checkpoint_prefill_matches_reference(length):
    ref = reference("tiny_v4_quant")
    ids = ref["prefill_0.input_ids"][:length]
    check_rows(model(QUANT).forward_full(ids), ref["prefill_0.logits"][:length], f"quantised prompt of {length}")


@pytest.mark.parametrize("name,index", [("tiny_v4", 0), ("tiny_v4", 1), ("tiny_v4_quant", 0)])
def test_greedy_generation_matches_reference(name, index):
    ref = reference(name)
    prompt = ref[f"generate_{index}.input_ids"]
    want = ref[f"generate_{index}.output_ids"].tolist()
    assert prompt.numel() < 128 < prompt.numel() + len(want), "fixture must cross the sliding window"
    got = greedy(model(PLAIN if name == "tiny_v4" else QUANT), prompt, len(want))
    assert got == want, describe_token_diff(got, want)


def test_quantized_checkpoint_keeps_its_projections_packed():
    """FP8 attention projections and the bf16 head of the quantised checkpoint stay in their stored format."""
    from deepseek_engine.layers.packed_linear import PackedGroupedOutput, PackedLinear
    from deepseek_kernels.weight_only import BF16, FP8

    m = model(QUANT)
    attn = m.layers[0].attn
    for name in ("wq_a", "wq_b", "wkv", "wo_a", "wo_b"):
        assert isinstance(getattr(attn, name), PackedLinear) and getattr(attn, name).packed.fmt == FP8, name
    assert isinstance(attn.wo_a, PackedGroupedOutput)
    assert isinstance(m.head, PackedLinear) and m.head.packed.fmt == BF16
    assert not [n for n, _ in m.named_parameters() if n.endswith(("wq_a.weight", "wo_b.weight", "head.weight"))]


def test_quantized_checkpoint_served_in_batches_matches_reference():
    """``LLM`` (the batched layer loop with packed projections; ``decode_stack`` does not take them) greedy-decodes
    the reference's tokens, alone and among other prompts."""
    from deepseek_engine import LLM, SamplingParams

    ref = reference("tiny_v4_quant")
    prompt = ref["generate_0.input_ids"].tolist()
    want = ref["generate_0.output_ids"].tolist()
    llm = LLM.from_model(model(QUANT), block_size=16, max_num_seqs=4)
    assert llm.runner.model.decode_plan is None
    others = [prompt[:40], prompt[7:90]]
    params = SamplingParams(temperature=0, max_tokens=len(want), ignore_eos=True)
    outs = llm.generate([others[0], prompt, others[1]], params)
    assert outs[1].token_ids == want, describe_token_diff(outs[1].token_ids, want)
