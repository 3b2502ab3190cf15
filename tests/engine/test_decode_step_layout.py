"""A decode step's ``StepLayout`` from one ``decode_layout`` call equals the general path's tensor by tensor
(window rows and visibility, entry rows, thresholds, and the windows the step closes); the closing windows
against a list written out per sequence."""

from __future__ import annotations

import random

import pytest
import torch
from deepseek_engine.models.deepseek_v4.batched_attention import StepLayout


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


@pytest.mark.parametrize("seed", range(8))
def test_closing_windows_listed_one_by_one(seed: int) -> None:
    """The windows a step closes (prefill chunks of any length, single decode tokens, mixed), written out per
    sequence and window: entry index, the window's pool rows, the previous window's rows (row 0 before the
    first window), and the pool row of the token that closes it (where the entry is stored)."""
    rng = random.Random(100 + seed)
    block_size, rates = rng.choice([4, 16]), (2, 4, 16)
    n = rng.randrange(1, 8)
    starts = [rng.randrange(0, 120) for _ in range(n)]
    counts = [rng.choice([1, rng.randrange(1, 50)]) for _ in range(n)]
    tables = [rng.sample(range(500), (s + c) // block_size + 1) for s, c in zip(starts, counts)]
    pos = torch.tensor([s + t for s, c in zip(starts, counts) for t in range(c)])
    loc = [0]
    for c in counts:
        loc.append(loc[-1] + c)
    layout = StepLayout(pos, torch.zeros_like(pos), loc, tables, block_size, 8, None, rates)

    def slot(b: int, row: int) -> int:
        return tables[b][row // block_size] * block_size + row % block_size

    for rate in rates:
        want = [(b, w) for b, (s, c) in enumerate(zip(starts, counts)) for w in range(s // rate, (s + c) // rate)]
        info = layout.rate_info(rate)
        if not want:
            assert info["w"].numel() == 0
            continue
        assert info["w"].tolist() == [w for _, w in want]
        assert info["window_slots"].tolist() == [[slot(b, w * rate + r) for r in range(rate)] for b, w in want]
        assert info["prior_slots"].tolist() == [[slot(b, max((w - 1) * rate + r, 0)) for r in range(rate)]
                                                for b, w in want]
        assert info["has_prior"].tolist() == [w > 0 for _, w in want]
        assert info["entry_out_slots"].tolist() == [slot(b, (w + 1) * rate - 1) for b, w in want]
        assert info["entry_out_slots"].is_contiguous()
