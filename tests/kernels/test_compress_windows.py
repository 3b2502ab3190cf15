"""``deepseek_kernels.compress_windows``: the CPU kernel stores the entries its reference stores (within float32
rounding; bit for bit when the reference's pooling, norm and rotation are the ``compress_pool``, ``rms_norm`` and
``rope`` kernels, which is what the engine computed before the fused op), for CSA windows with and without a
previous window, HCA windows, several rates and widths; it touches no other row and checks its arguments."""

from __future__ import annotations

import deepseek_kernels as ops
import deepseek_kernels.compressor.reference as ref
import pytest
import torch
from deepseek_kernels.compressor import compress_windows_reference


def case(seed: int, overlap: bool, rate: int, d: int, rot: int, n: int):
    g = torch.Generator().manual_seed(seed)
    width = 2 * d if overlap else d
    blocks, bs = 12, 8
    kv_pool = torch.randn(blocks, bs, width, generator=g)
    gate_pool = torch.randn(blocks, bs, width, generator=g) * 3
    entry_pool = torch.randn(blocks, bs, d, generator=g)
    rows = blocks * bs
    window_slots = torch.randint(0, rows, (n, rate), generator=g)
    prior_slots = torch.randint(0, rows, (n, rate), generator=g)
    has_prior = torch.rand(n, generator=g) > 0.3
    out_slots = torch.randperm(rows, generator=g)[:n]
    angles = torch.rand(n, rot // 2, generator=g) * 6
    c = torch.cos(angles).repeat_interleave(2, dim=-1)
    s = torch.stack((-torch.sin(angles), torch.sin(angles)), dim=-1).flatten(-2)
    args = (kv_pool, gate_pool, torch.randn(rate, width, generator=g), window_slots, prior_slots, has_prior, overlap,
            torch.rand(d, generator=g) + 0.5, 1e-6, c, s, out_slots)
    return entry_pool, args


@pytest.mark.parametrize("overlap,rate,d,rot,n", [(True, 4, 32, 8, 32), (True, 4, 16, 16, 5), (False, 16, 32, 8, 3),
                                                   (False, 2, 24, 4, 7), (True, 1, 8, 8, 1), (True, 4, 32, 8, 0)])
def test_compress_windows_matches_reference(overlap: bool, rate: int, d: int, rot: int, n: int, monkeypatch) -> None:
    entry_pool, args = case(rate * 100 + d + n, overlap, rate, d, rot, n)
    got, want, composed = entry_pool.clone(), entry_pool.clone(), entry_pool.clone()
    ops.compress_windows(got, *args)
    compress_windows_reference(want, *args)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for name, kernel in (("compress_pool_reference", ops.compress_pool), ("rms_norm_reference", ops.rms_norm),
                         ("rope_reference", ops.rope)):
        monkeypatch.setattr(ref, name, kernel)
    compress_windows_reference(composed, *args)
    assert torch.equal(got, composed)
    touched = torch.zeros(entry_pool.numel() // d, dtype=torch.bool)
    touched[args[-1]] = True
    assert torch.equal(got.view(-1, d)[~touched], entry_pool.view(-1, d)[~touched])  # no other row changes
    if n:
        assert not torch.equal(got.view(-1, d)[touched], entry_pool.view(-1, d)[touched])


def test_compress_windows_first_window_ignores_prior_rows() -> None:
    # Without a previous window the prior rows get zero weight: changing them changes nothing.
    entry_pool, args = case(5, True, 4, 16, 8, 6)
    args = list(args)
    args[3], args[4] = args[3] % 48, args[4] % 48 + 48  # window rows and prior rows apart
    args[5] = torch.zeros(6, dtype=torch.bool)
    first = entry_pool.clone()
    ops.compress_windows(first, *args)
    args[0] = args[0].clone()
    args[0].view(-1, 32)[args[4].flatten()] = 1e3
    second = entry_pool.clone()
    ops.compress_windows(second, *args)
    assert torch.equal(first, second)


def test_compress_windows_checks_its_arguments() -> None:
    entry_pool, args = case(1, True, 4, 16, 8, 3)
    bad = list(args)
    bad[3] = torch.full((3, 4), 10_000)
    with pytest.raises(RuntimeError, match="compress_windows: window rows must lie inside the pools"):
        ops.compress_windows(entry_pool, *bad)
    bad = list(args)
    bad[6] = False  # HCA width expected: the pools are twice the entry width
    with pytest.raises(RuntimeError, match="compress_windows: kv and gate pools must be"):
        ops.compress_windows(entry_pool, *bad)
    with pytest.raises(RuntimeError, match="compress_windows: the pools must be contiguous float32"):
        ops.compress_windows(entry_pool.double(), *args)


def composed_bits(entry_pool: torch.Tensor, args, monkeypatch) -> torch.Tensor:
    """The entries of the three single ops (compress_pool with the scalar expf, rms_norm, rope) composed."""
    for name, kernel in (("compress_pool_reference", ops.compress_pool), ("rms_norm_reference", ops.rms_norm),
                         ("rope_reference", ops.rope)):
        monkeypatch.setattr(ref, name, kernel)
    out = entry_pool.clone()
    compress_windows_reference(out, *args)
    return out


@pytest.mark.parametrize("overlap,rate,d,rot", [(True, 4, 40, 8), (False, 16, 48, 16), (True, 16, 8, 8),
                                                (False, 3, 17, 6), (True, 1, 64, 8)])
def test_compress_windows_exponentials_are_expf_bits(overlap: bool, rate: int, d: int, rot: int, monkeypatch) -> None:
    # Gates spread over many scales, so that exp(gate - max) runs from 1 down past the underflow (|x| >= 88, the
    # special lanes), with +-inf and NaN gates too: the sixteen-lane exponential must give expf's bits throughout.
    entry_pool, args = case(rate + d, overlap, rate, d, rot, 40)
    g = torch.Generator().manual_seed(d)
    args = list(args)
    gate = args[1]
    scale = torch.exp(torch.rand(gate.shape, generator=g) * 7 - 2)  # about 0.14 .. 150
    gate = gate * scale
    flat = gate.view(-1)
    picks = torch.randint(0, flat.numel(), (12,), generator=g)
    flat[picks[:4]] = float("-inf")
    flat[picks[4:6]] = float("inf")
    flat[picks[6:8]] = float("nan")
    flat[picks[8:]] = torch.tensor([1e4, -1e4, 95.0, -104.0])
    args[1] = gate
    got = entry_pool.clone()
    ops.compress_windows(got, *args)
    want = composed_bits(entry_pool, args, monkeypatch)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    finite = ~torch.isnan(want)
    assert torch.equal(got[finite].view(torch.int32), want[finite].view(torch.int32))


def test_other_pool_dtypes_take_the_composition_in_the_entry_point() -> None:
    # (the engine used to pick the reference itself for a bfloat16 cache; the op's entry point does now)
    entry_pool, args = case(1, True, 4, 16, 8, 3)
    pools = [entry_pool.bfloat16(), args[0].bfloat16(), args[1].bfloat16()]
    want = pools[0].clone()
    compress_windows_reference(want, *pools[1:], *args[2:])
    got = pools[0].clone()
    ops.compress_windows(got, *pools[1:], *args[2:])
    assert torch.equal(got, want) and not torch.equal(got, pools[0])
