"""V4.1's kernel-layer ops (delayed mHC pre-mix, ratio-1/2 compressor pooling, engram hashing): each CPU kernel
against its PyTorch reference, on seeded inputs with edge shapes, plus their schemas and fake implementations."""

from __future__ import annotations

import deepseek_kernels as ops
import pytest
import torch
from deepseek_kernels.engram_hash.reference import engram_hash_reference


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def both(fn, *args):
    fast = fn(*args)
    with ops.using("reference"):
        slow = fn(*args)
    return fast, slow


def mhc_args(t: int, hc: int, d: int, with_pre: bool, dtype=torch.float32, seed: int = 0):
    g = gen(seed)
    mix = (2 + hc) * hc
    pre_mix = torch.rand(t, hc, generator=g) + 0.1 if with_pre else None
    return (torch.randn(t, mix, generator=g) * 2, torch.randn(mix, generator=g), torch.rand(3, generator=g) + 0.5, hc,
            20, 1e-6, torch.randn(t, hc, d, generator=g).to(dtype), pre_mix)


@pytest.mark.parametrize("t, hc, d", [(1, 4, 32), (9, 4, 7), (3, 1, 16), (17, 8, 5)])
@pytest.mark.parametrize("with_pre", [True, False])
def test_mhc_pre_delayed(t, hc, d, with_pre):
    fast, slow = both(ops.mhc_pre_delayed, *mhc_args(t, hc, d, with_pre, seed=t * hc))
    for a, b in zip(fast, slow):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, atol=2e-6, rtol=2e-6)


def test_mhc_pre_delayed_bf16_streams():
    fast, slow = both(ops.mhc_pre_delayed, *mhc_args(5, 4, 24, True, torch.bfloat16, seed=3))
    assert fast[3].dtype == torch.bfloat16
    torch.testing.assert_close(fast[3], slow[3], atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("ratio", [1, 2])
@pytest.mark.parametrize("groups, head_dim", [(0, 8), (1, 32), (7, 13), (16, 64)])
def test_v41_compress_pool(ratio, groups, head_dim):
    g = gen(groups * head_dim + ratio)
    rows = torch.randn(groups * ratio, ratio * head_dim, generator=g) * 3
    w = torch.rand(head_dim, generator=g) + 0.5
    fast, slow = both(ops.v41_compress_pool, rows, ratio, w, 1e-6)
    assert fast.shape == (groups, head_dim)
    torch.testing.assert_close(fast, slow, atol=2e-6, rtol=2e-6)


def test_v41_compress_pool_errors():
    with pytest.raises(RuntimeError, match="v41_compress_pool: ratio must be 1 or 2"):
        ops.v41_compress_pool(torch.zeros(4, 16), 3, torch.ones(4), 1e-6)
    with pytest.raises(RuntimeError, match="whole groups"):
        ops.v41_compress_pool(torch.zeros(3, 16), 2, torch.ones(8), 1e-6)


def engram_args(t: int, start: int, seed: int, layers: int = 2, max_ngram: int = 4, heads: int = 3):
    g = gen(seed)
    lookback = max_ngram - 1
    compressed = torch.randint(0, 50, (t + lookback,), generator=g)
    compressed[torch.rand(t + lookback, generator=g) < 0.1] = -1  # image tokens (dead id)
    positions = torch.arange(start, start + t)
    # Multipliers as large as the engine's (products wrap modulo 2^64) and small ones.
    big = torch.randint(1, 2**62, (layers, max_ngram), generator=g) * 2 + 1
    primes = torch.tensor([[p for p in (101, 103, 107, 109, 113, 127, 131, 137, 139)][: lookback * heads]] * layers)
    offsets = torch.cumsum(primes, dim=1) - primes
    return compressed, positions, big, primes, offsets, heads, 7, -1


@pytest.mark.parametrize("t, start", [(1, 0), (5, 0), (6, 2), (33, 100)])
def test_engram_hash_is_exact(t, start):
    args = engram_args(t, start, seed=t + start)
    fast, slow = both(ops.engram_hash, *args)
    assert fast.dtype == torch.int64 and torch.equal(fast, slow)
    assert torch.equal(fast, engram_hash_reference(*args))


def test_engram_hash_errors():
    c, p, m, pr, off, heads, pad, dead = engram_args(4, 0, 1)
    with pytest.raises(RuntimeError, match="engram_hash: compressed must hold max_ngram - 1 lookback ids"):
        ops.engram_hash(c[1:], p, m, pr, off, heads, pad, dead)
    with pytest.raises(RuntimeError, match="engram_hash: inputs must be Long"):
        ops.engram_hash(c.int(), p, m, pr, off, heads, pad, dead)


@pytest.mark.parametrize("name, args", [
    ("mhc_pre_delayed", mhc_args(3, 4, 8, True)),
    ("mhc_pre_delayed", mhc_args(3, 4, 8, False)),
    ("v41_compress_pool", (torch.randn(6, 16, generator=gen(2)), 2, torch.rand(8, generator=gen(3)), 1e-6)),
    ("engram_hash", engram_args(5, 1, 4)),
])
def test_opcheck(name, args):
    torch.library.opcheck(getattr(torch.ops.deepseek_kernels, name).default, args,
                          test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("t, hc, d", [(1, 4, 32), (9, 4, 7), (33, 1, 16), (5, 8, 40)])
def test_engram_gate(t, hc, d):
    """``engram_gate`` vs its reference, masked tokens untouched, every token the same bits alone."""
    g = gen(t * hc + d)
    streams = torch.randn(t, hc, d, generator=g)
    kv = torch.randn(t, (hc + 1) * d, generator=g)
    qw, kw = torch.rand(hc, d, generator=g) + 0.5, torch.rand(hc, d, generator=g) + 0.5
    keep = torch.rand(t, generator=g) > 0.3
    fast, slow = both(ops.engram_gate, streams, kv, qw, kw, keep, 1e-6)
    torch.testing.assert_close(fast, slow, atol=2e-6, rtol=2e-6)
    assert torch.equal(fast[~keep], streams[~keep])
    for i in range(t):
        assert torch.equal(ops.engram_gate(streams[i:i + 1], kv[i:i + 1], qw, kw, keep[i:i + 1], 1e-6)[0], fast[i])
    bf = ops.engram_gate(streams.bfloat16(), kv.bfloat16(), qw, kw, keep, 1e-6)
    assert bf.dtype == torch.bfloat16
    with pytest.raises(RuntimeError, match="engram_gate"):
        ops.engram_gate(streams, kv[:, :-1], qw, kw, keep, 1e-6)
