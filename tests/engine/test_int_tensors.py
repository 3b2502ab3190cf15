"""int64 tensors built through the buffer protocol equal ``torch.tensor``'s."""

from __future__ import annotations

import gc

import torch
from deepseek_engine.core.int_tensors import long_tensor, padded_rows


def test_long_tensor_equals_torch_tensor():
    values = [0, 1, -5, 2**62, -(2**63), 129279]
    got = long_tensor(values)
    assert got.dtype == torch.long and torch.equal(got, torch.tensor(values, dtype=torch.long))
    assert long_tensor([]).shape == (0,) and long_tensor([]).dtype == torch.long


def test_the_tensor_outlives_its_list():
    t = long_tensor(list(range(1000)))
    gc.collect()
    _ = [list(range(1000, 2000)) for _ in range(50)]
    assert int(t.sum()) == sum(range(1000))


def test_padded_rows():
    rows = [[3, 4], [5], [6, 7, 8], []]
    want = torch.tensor([[3, 4, 0], [5, 0, 0], [6, 7, 8], [0, 0, 0]])
    assert torch.equal(padded_rows(rows), want)
    assert padded_rows([]).shape == (0, 0)
