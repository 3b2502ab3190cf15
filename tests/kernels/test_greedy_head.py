"""``deepseek_kernels.GreedyHead``: the CPU arg-max kernels pick the IDs ``torch.argmax`` of the float32
logits picks, ties to the lowest ID, including rows the integer prefilter cannot decide."""

from __future__ import annotations

import os
import subprocess
import sys

import deepseek_kernels as ops
import pytest
import torch
from deepseek_kernels import GreedyHead


@pytest.mark.parametrize("rows", [1, 9, 32, 300])
def test_greedy_head_is_argmax(rows: int) -> None:
    g = torch.Generator().manual_seed(rows)
    weight = torch.randn(1003, 20, generator=g)  # vocabulary not a multiple of the block width
    x = torch.randn(rows, 20, generator=g)
    assert torch.equal(GreedyHead(weight)(x), torch.argmax(x @ weight.T, dim=-1))


def test_greedy_head_ties_and_other_inputs() -> None:
    weight = torch.zeros(40, 4)
    weight[[5, 17, 33, 39], 0] = 1.0  # equal logits: the lowest ID wins, as with torch.argmax
    head = GreedyHead(weight)
    assert head(torch.ones(3, 4)).tolist() == [5, 5, 5]
    nan_row = torch.tensor([[float("nan"), 0, 0, 0]])
    assert torch.equal(head(nan_row), torch.argmax(nan_row @ weight.T, dim=-1))  # NaN: the reference decides
    assert head(torch.ones(2, 4, dtype=torch.float64)).tolist() == [5, 5]
    weight[:] = 0
    weight[39, 1] = 2.0  # the winner sits in the tail after the last full block
    assert head(torch.ones(1, 4)).tolist() == [39]


def test_non_finite_rows_next_to_finite_ones() -> None:
    # The integer pass leaves rows with NaN or an infinity undecided; they (and only they) take the reference.
    g = torch.Generator().manual_seed(7)
    weight = torch.randn(4099, 32, generator=g)
    x = torch.randn(40, 32, generator=g)
    x[3, 5] = float("nan")
    x[17, 0] = float("inf")
    x[30, 31] = -float("inf")
    assert torch.equal(GreedyHead(weight)(x), torch.argmax(x @ weight.T, dim=-1))


@pytest.mark.parametrize("dim", [8, 20, 32, 40])
@pytest.mark.parametrize("rows", [1, 9, 70])
def test_integer_prefilter_matches_float_kernel(rows: int, dim: int) -> None:
    g = torch.Generator().manual_seed(rows * 100 + dim)
    weight = torch.randn(2003, dim, generator=g) / dim**0.5
    head, plain = GreedyHead(weight), GreedyHead(weight, quantized=False)
    for scale in (1e-3, 1.0, 30.0):
        x = torch.randn(rows, dim, generator=g) * scale
        picks = head(x)
        assert head._q8 is not None
        assert torch.equal(picks, plain(x))
        assert torch.equal(picks, torch.argmax(x @ weight.T, dim=-1))


def test_integer_prefilter_near_ties() -> None:
    g = torch.Generator().manual_seed(7)
    weight = torch.randn(4000, 32, generator=g) * 0.1
    x = torch.randn(5, 32, generator=g)
    top = x[0] / x[0].norm() * 3
    weight[[700, 90, 3999]] = top  # identical logits: the lowest ID wins
    weight[1500] = top * (1 - 2e-7)
    weight[2500] = top * (1 + 1e-7)
    weight[4] = torch.nextafter(top, torch.full_like(top, -10.0))
    head, plain = GreedyHead(weight), GreedyHead(weight, quantized=False)
    assert torch.equal(head(x), plain(x))
    x[1] = 0  # all logits zero: the row goes to the float kernel, ID 0
    x[2, :] = 0
    x[2, 5] = 1e-30
    picks = head(x)
    assert torch.equal(picks, plain(x))
    assert picks[1] == 0


def test_integer_prefilter_overflow_goes_to_float_kernel(monkeypatch) -> None:
    weight = torch.zeros(3000, 32)
    weight[:, 0] = 1.0
    weight[2000:, 0] = 0.5
    weight[2999, 1] = 1.0  # the last lane of the last block
    head = GreedyHead(weight)
    monkeypatch.setattr(GreedyHead, "CANDIDATES", 16)
    x = torch.tensor([[1.0] + [0.0] * 31, [0.0, 1.0] + [0.0] * 30, [1.0, 0.6] + [0.0] * 30])
    assert head(x).tolist() == torch.argmax(x @ weight.T, dim=-1).tolist() == [0, 2999, 2999]


def test_reference_mode_uses_the_product() -> None:
    g = torch.Generator().manual_seed(3)
    weight, x = torch.randn(100, 12, generator=g), torch.randn(4, 12, generator=g)
    with ops.using("reference"):
        assert torch.equal(GreedyHead(weight)(x), torch.argmax(x @ weight.T, dim=-1))


_SCAN_CHECK = """
import torch
from deepseek_kernels import GreedyHead
g = torch.Generator().manual_seed(11)
for vocab, dim, rows in ((20000, 32, 40), (2003, 20, 9), (4099, 32, 70)):
    weight = torch.randn(vocab, dim, generator=g) / dim**0.5
    head = GreedyHead(weight)
    for scale in (1e-3, 1.0, 30.0):
        x = torch.randn(rows, dim, generator=g) * scale
        assert torch.equal(head(x), torch.argmax(x @ weight.T, dim=-1)), (vocab, dim, rows, scale)
    assert head._q8 is not None
print("ok")
"""


def test_integer_scan_without_amx_matches_argmax() -> None:
    """The VNNI / AVX2 loops (what CPUs without AMX run) on the paired layout, on any machine: a process started
    with ``DEEPSEEK_KERNELS_NO_AMX`` keeps the tiles off."""
    env = dict(os.environ, DEEPSEEK_KERNELS_NO_AMX="1")
    out = subprocess.run([sys.executable, "-c", _SCAN_CHECK], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_integer_scan_rejects_other_layouts() -> None:
    """Rows of 32 columns come in pairs of blocks, wider rows in single blocks; narrower than 32 is refused."""
    q8 = torch.ops.deepseek_kernels.head_argmax_q8
    h, w, rowsum = torch.randn(2, 32), torch.randn(160, 32), torch.zeros(160, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="K4 = 32 takes blocks in pairs"):
        q8(h, torch.zeros(20, 8, 8, 4, dtype=torch.int8), rowsum, 1.0, 1.0, 1.0, 1.0, w, 64)
    with pytest.raises(RuntimeError, match="K4 must cover K, be at least 32"):
        q8(h[:, :8], torch.zeros(20, 2, 8, 4, dtype=torch.int8), rowsum, 1.0, 1.0, 1.0, 1.0, w[:, :8], 64)
    out, _ = q8(h, torch.zeros(10, 8, 16, 4, dtype=torch.int8), rowsum, 1.0, 1.0, 1.0, 1.0, w, 64)
    assert out.shape == (2,)
