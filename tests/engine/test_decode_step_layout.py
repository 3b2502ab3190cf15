"""A decode step's ``StepLayout`` from one ``decode_layout`` call equals the general path's tensor by tensor
(window rows and visibility, entry rows, thresholds, and the windows the step closes)."""

from __future__ import annotations

import random

import pytest
import torch
from deepseek_engine.batched_attention import StepLayout


@pytest.mark.parametrize("seed", range(8))
def test_decode_layout_equals_the_general_path(seed: int) -> None:
    rng = random.Random(seed)
    block_size, window, rates = rng.choice([4, 16]), rng.choice([8, 64]), (4, 16)
    n = rng.randrange(1, 20)
    positions = [rng.randrange(0, 200) for _ in range(n)]
    if seed % 2:
        positions = [p - p % 4 + 3 for p in positions]  # every token closes a rate-4 window
    tables = [rng.sample(range(500), p // block_size + 1) for p in positions]
    prompts = [rng.randrange(1, p + 3) for p in positions] if seed % 3 else None
    pos = torch.tensor(positions)
    slots = torch.tensor([t[p // block_size] * block_size + p % block_size for t, p in zip(tables, positions)])
    args = (pos, slots, list(range(n + 1)), tables, block_size, window, prompts, rates)
    fast, general = StepLayout(*args), StepLayout(*args, one_call=False)
    for name in ("rank_ends", "key_slots", "window_visible", "q_pos", "tables"):
        assert torch.equal(getattr(fast, name), getattr(general, name)), name
    assert (fast.num_seqs, fast.t_max, fast.uniform) == (general.num_seqs, general.t_max, general.uniform)
    for rate in rates:
        got, want = fast.rate_info(rate), general.rate_info(rate)
        assert got.keys() == want.keys()
        for key in want:
            assert torch.equal(got[key], want[key]), (rate, key)
        assert fast.rank_ends_list(rate) == (general.rank_ends // rate).tolist()
