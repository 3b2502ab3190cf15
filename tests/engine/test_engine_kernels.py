"""The engine with the compiled kernels against the engine in reference mode (``deepseek_kernels`` running
its PyTorch definitions), on the tiny V4 checkpoint."""

from __future__ import annotations

import deepseek_kernels as ops
import torch


def test_kernel_step_equals_reference_step() -> None:
    """The whole batched step (hc_step boundaries, attention front, paged attention, compressors, indexer,
    experts, greedy head): logits within float32 rounding, identical greedy tokens."""
    from deepseek_engine import LLM, SamplingParams
    from model_fixtures import PLAIN, model, reference

    ref = reference("tiny_v4")
    prompts = [ref[f"generate_{i}.input_ids"].tolist() for i in (0, 1)]
    ids = ref["prefill_0.input_ids"].tolist()
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)

    def run():
        # A 37-token budget mixes prefill chunks of different lengths with decodes in one step.
        llm = LLM.from_model(model(PLAIN), max_model_len=512, max_num_batched_tokens=37, block_size=8)
        return llm.forward_logits(ids), [o.token_ids for o in llm.generate(prompts * 2, params)]

    fast = run()
    with ops.using("reference"):
        slow = run()
    torch.testing.assert_close(fast[0], slow[0], rtol=0, atol=1e-5)
    assert fast[1] == slow[1]


def test_step_rotary_tables_match_direct_evaluation(monkeypatch) -> None:
    from deepseek_engine.layers.rotary_embedding import rotary_tables
    from deepseek_engine.models.deepseek_v4 import batched_attention
    from model_fixtures import PLAIN, model

    rope = model(PLAIN).compress_rope
    for positions in (torch.tensor([0, 5, 77, 3000]), torch.arange(1500, 1530)):
        for limit in (1 << 16, 100):  # whole-position tables, and per-step evaluation past the limit
            monkeypatch.setattr(batched_attention, "MAX_TABLE_POSITIONS", limit)
            layout = batched_attention.StepLayout(positions, positions, [0, positions.numel()],
                                                  [list(range(200))], 16, 64)
            cos, sin = rope(positions, torch.float32)
            c, s = rotary_tables(cos, sin)
            got_c, got_s = layout.rope_tables(rope, torch.float32)
            torch.testing.assert_close(got_c, c, rtol=0, atol=1e-6)
            torch.testing.assert_close(got_s, s, rtol=0, atol=1e-6)
            torch.testing.assert_close(layout.rope_tables(rope, torch.float32, inverse=True)[1], -s, rtol=0, atol=1e-6)


def test_step_rotary_rows_of_both_directions_are_the_table_rows() -> None:
    """One gather serves both directions of a step: whichever is asked first, the rows are those of the whole-position
    tables (``c``, ``s``, ``-s``) bit for bit, and the inverse shares the forward's ``c``."""
    from deepseek_engine.layers.rotary_embedding import rotary_tables
    from deepseek_engine.models.deepseek_v4 import batched_attention
    from model_fixtures import PLAIN, model

    rope = model(PLAIN).compress_rope
    positions = torch.tensor([7, 0, 130, 64, 7, 1023])
    cos, sin = rope(torch.arange(2048), torch.float32)
    c_all, s_all = rotary_tables(cos, sin)
    for inverse_first in (False, True):
        layout = batched_attention.StepLayout(positions, positions, [0, positions.numel()], [list(range(200))], 16, 64)
        first = layout.rope_tables(rope, torch.float32, inverse=inverse_first)
        second = layout.rope_tables(rope, torch.float32, inverse=not inverse_first)
        (c, s), (ci, si) = (second, first) if inverse_first else (first, second)
        assert torch.equal(c, c_all[positions]) and torch.equal(s, s_all[positions])
        assert torch.equal(ci, c) and torch.equal(si, -s_all[positions])
        assert all(t.is_contiguous() for t in (c, s, ci, si))
        assert layout.rope_tables(rope, torch.float32) is (second if inverse_first else first)  # kept for the step
