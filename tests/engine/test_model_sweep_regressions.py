"""Regressions found by ``sweep_reference.py`` (random configs against transformers' DeepSeek V4).

The ``tiny_v4_ties`` fixture (see ``make_reference.tiny_config_ties``) covers:

* YaRN ropes with ``truncate: false`` in the nested ``{"main", "compress"}`` layout:
  the reference always rounds the YaRN correction range, whatever the flag says;
* a lightning indexer whose scores often tie exactly (zero after the ReLU): which
  entries ``torch.topk`` keeps then depends on the length of the score row, so each
  query must be ranked over a row as long as the reference's: its own sequence's
  compressed entries when sequences of different lengths are prefilled or decoded
  in one batch, and the whole prompt's entries when a prompt is prefilled in chunks.
"""

from __future__ import annotations

from functools import cache

import pytest
import torch
from deepseek_engine import LLM, SamplingParams
from model_fixtures import DATA, describe_token_diff, greedy, model, reference

TIES = DATA / "tiny_v4_ties"
ATOL = 1e-4
PREFILLS = range(4)  # prompts of 300, 150, 37 and 1 tokens, each with its own reference logits
GENERATIONS = range(3)  # prompts of 1, 37 and 150 tokens, 40 greedy tokens each


@cache
def engine() -> LLM:
    return LLM(TIES)


def check_rows(got: torch.Tensor, want: torch.Tensor, label: str) -> None:
    assert got.shape == want.shape, f"{label}: shape {tuple(got.shape)} vs {tuple(want.shape)}"
    err = (got - want).abs().amax(dim=-1)
    bad = (err > ATOL).nonzero().flatten().tolist()
    assert not bad, f"{label}: positions {bad[:10]} exceed {ATOL} (max {float(err.max()):.3g})"


@pytest.mark.parametrize("index", PREFILLS)
def test_untruncated_yarn_prefill_matches_reference(index):
    ref = reference("tiny_v4_ties")
    ids = ref[f"prefill_{index}.input_ids"]
    check_rows(model(TIES).forward_full(ids), ref[f"prefill_{index}.logits"], f"prompt of {ids.numel()}")


def test_engine_forward_logits_match_reference():
    ref = reference("tiny_v4_ties")
    for index in PREFILLS:
        ids = ref[f"prefill_{index}.input_ids"]
        check_rows(engine().forward_logits(ids.tolist()), ref[f"prefill_{index}.logits"],
                   f"forward_logits, prompt of {ids.numel()}")


def test_batched_greedy_generation_with_tied_indexer_scores():
    ref = reference("tiny_v4_ties")
    prompts = [ref[f"generate_{i}.input_ids"].tolist() for i in GENERATIONS]
    outs = engine().generate(prompts, SamplingParams(temperature=0.0, max_tokens=40, ignore_eos=True))
    for i, out in zip(GENERATIONS, outs):
        want = ref[f"generate_{i}.output_ids"].tolist()
        assert out.token_ids == want, f"prompt of {len(prompts[i])}: " + describe_token_diff(out.token_ids, want)


@pytest.mark.parametrize("budget", [16, 48])
def test_chunked_prefill_with_tied_indexer_scores(budget):
    """A prompt prefilled in chunks ranks each chunk's queries over the whole prompt's entries."""
    ref = reference("tiny_v4_ties")
    llm = LLM(TIES, max_num_batched_tokens=budget, enable_prefix_caching=False)
    prompts = [ref[f"generate_{i}.input_ids"].tolist() for i in GENERATIONS]
    outs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=40, ignore_eos=True))
    for i, out in zip(GENERATIONS, outs):
        want = ref[f"generate_{i}.output_ids"].tolist()
        assert out.token_ids == want, f"prompt of {len(prompts[i])}: " + describe_token_diff(out.token_ids, want)


@pytest.mark.parametrize("index", GENERATIONS)
def test_single_sequence_greedy_with_tied_indexer_scores(index):
    ref = reference("tiny_v4_ties")
    prompt = ref[f"generate_{index}.input_ids"]
    want = ref[f"generate_{index}.output_ids"].tolist()
    got = greedy(model(TIES), prompt, len(want))
    assert got == want, describe_token_diff(got, want)


def test_narrow_indexer_heads_are_fine_without_compressed_sparse_layers():
    """Only CSA layers build an indexer; transformers accepts a rope wider than ``index_head_dim`` otherwise."""
    from deepseek_engine.models.deepseek_v4.config import DeepseekV4ModelConfig
    from deepseek_engine.models.deepseek_v4.model import DeepseekV4ForCausalLM

    raw = dict(num_hidden_layers=2, hidden_size=16, head_dim=64, partial_rotary_factor=0.5, index_head_dim=8,
               layer_types=["sliding_attention", "heavily_compressed_attention"], mlp_layer_types=["moe", "moe"])
    config = DeepseekV4ModelConfig.from_dict(raw)
    assert config.qk_rope_head_dim == 32
    with torch.device("meta"):
        DeepseekV4ForCausalLM(config)
    with pytest.raises(ValueError, match="rope dim 32"):
        DeepseekV4ModelConfig.from_dict({**raw, "layer_types": ["sliding_attention", "compressed_sparse_attention"]})
