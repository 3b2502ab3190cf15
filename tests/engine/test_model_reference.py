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
