"""``deepseek_kernels.decode_layout``: the CPU kernel gives the reference's tensors exactly (same values, shapes
and dtypes), for random decode steps, windows, block sizes and compression rates."""

from __future__ import annotations

import random

import deepseek_kernels as ops
import pytest
import torch
from deepseek_kernels.step_layout import decode_layout_reference


def random_step(rng: random.Random, seqs: int, block_size: int, with_prompts: bool):
    positions, tables, prompts = [], [], []
    for _ in range(seqs):
        p = rng.randrange(0, 300)
        blocks = p // block_size + 1 + rng.randrange(0, 2)
        positions.append(p)
        tables.append(rng.sample(range(1000), blocks))
        prompts.append(rng.randrange(1, p + 3))  # prompts ending before, at and after the new token
    width = max(map(len, tables))
    table = torch.tensor([t + [0] * (width - len(t)) for t in tables])
    return torch.tensor(positions), table, torch.tensor(prompts) if with_prompts else None


@pytest.mark.parametrize("seed", range(12))
def test_decode_layout_matches_reference(seed: int) -> None:
    rng = random.Random(seed)
    block_size, window = rng.choice([1, 4, 16]), rng.choice([1, 5, 64, 128])
    rates = rng.sample([2, 4, 16, 128], rng.randrange(0, 4))
    positions, tables, prompts = random_step(rng, rng.randrange(1, 40), block_size, seed % 2 == 0)
    got = ops.decode_layout(positions, tables, prompts, block_size, window, rates)
    want = decode_layout_reference(positions, tables, prompts, block_size, window, rates)
    assert len(got) == len(want) == 4 + 3 * len(rates)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and torch.equal(g, w)


def test_decode_layout_first_tokens_and_closing_windows() -> None:
    # Position 0 (nothing cached), and positions whose token closes a window of rate 4 (3, 7) or of no rate.
    positions = torch.tensor([0, 3, 7, 8])
    tables = torch.tensor([[5, 6, 0], [7, 0, 0], [8, 11, 0], [9, 10, 12]])
    rank_ends, key_slots, visible, slots4, valid4, thr4, closing = ops.decode_layout(positions, tables, None, 4, 3, [4])
    assert rank_ends.tolist() == [1, 4, 8, 9]
    assert key_slots.tolist() == [[20, 20, 20], [29, 30, 31], [45, 46, 47], [42, 43, 48]]
    assert visible[:, 0].tolist() == [[True, False, False]] + [[True] * 3] * 3
    assert slots4.tolist() == [[20, 20], [31, 31], [35, 47], [39, 43]] and thr4.flatten().tolist() == [0, 1, 2, 2]
    assert valid4.tolist() == [[False, False], [True, False], [True, True], [True, True]]
    assert closing.tolist() == [2]


def test_decode_layout_checks_its_arguments() -> None:
    tables = torch.tensor([[1, 2]])
    with pytest.raises(RuntimeError, match="decode_layout: every position must lie inside its block table"):
        ops.decode_layout(torch.tensor([8]), tables, None, 4, 8, [4])
    with pytest.raises(RuntimeError, match="decode_layout: tables must have one row per sequence"):
        ops.decode_layout(torch.tensor([1, 2]), tables, None, 4, 8, [4])
    with pytest.raises(RuntimeError, match="decode_layout: rates must be positive"):
        ops.decode_layout(torch.tensor([1]), tables, None, 4, 8, [0])
    with pytest.raises(RuntimeError, match="decode_layout: positions must be Long"):
        ops.decode_layout(torch.tensor([1.0]), tables, None, 4, 8, [4])
