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


def select_args(rows: int, n: int, topk: int, block_size: int, mode: str, seed: int):
    """Logits full of ties (a few distinct values, exact zeros of both signs), -inf and NaN entries; ends below,
    at and past the row's length and at most ``topk``; ``mode``: plain, write (publish blocks) or read."""
    g = gen(seed)
    logits = torch.randint(-3, 4, (rows, n), generator=g).float()
    logits[torch.rand(rows, n, generator=g) < 0.1] = -0.0
    logits[torch.rand(rows, n, generator=g) < 0.15] = float("-inf")
    if seed % 3 == 0:
        logits[torch.rand(rows, n, generator=g) < 0.05] = float("nan")
    ends = torch.randint(-1, n + 3, (rows,), generator=g)
    ends[: rows // 4] = torch.randint(0, topk + 1, (rows // 4,), generator=g)
    nblocks = -(-n // block_size) if n else 1
    candidates = None
    if mode == "read":  # ids: -1 padding, in range, and past the last block
        candidates = torch.randint(-1, nblocks + 2, (rows, 3), generator=g)
    return logits, ends, topk, candidates, block_size, 2 if mode == "write" else 0


SELECT_CASES = [(rows, n, topk, bs, mode, seed)
                for seed, (rows, n, topk, bs) in enumerate([(1, 1, 1, 1), (7, 9, 4, 2), (16, 33, 8, 3), (5, 0, 2, 2),
                                                            (9, 70, 5, 4), (4, 6, 9, 5)])
                for mode in ("plain", "write", "read")]


@pytest.mark.parametrize("rows, n, topk, block_size, mode, seed", SELECT_CASES)
def test_v41_select_is_exact(rows, n, topk, block_size, mode, seed):
    args = select_args(rows, n, topk, block_size, mode, seed)
    (mask, chosen), (want_mask, want_chosen) = both(ops.v41_select, *args)
    assert mask.dtype == torch.bool and chosen.dtype == torch.long
    assert torch.equal(mask, want_mask) and torch.equal(chosen, want_chosen)


def test_v41_select_large_rows_pick_the_reference_set():
    """Long rows (a selection, not a sort, on the CPU): still the stable order's top-k."""
    g = gen(11)
    logits = torch.randint(-50, 50, (3, 4000), generator=g).float()
    ends = torch.tensor([4000, 2500, 300])
    (mask, _), (want, _) = both(ops.v41_select, logits, ends, 512, None, 64, 0)
    assert torch.equal(mask, want) and int(mask[0].sum()) == 512


def test_v41_select_errors():
    with pytest.raises(RuntimeError, match="v41_select: ends must be Long"):
        ops.v41_select(torch.zeros(2, 4), torch.zeros(2, dtype=torch.int32), 2, None, 2, 0)
    with pytest.raises(RuntimeError, match="block_size >= 1"):
        ops.v41_select(torch.zeros(2, 4), torch.zeros(2, dtype=torch.long), 2, None, 0, 0)
    with pytest.raises(RuntimeError, match="candidates must be \\[R, C\\]"):
        ops.v41_select(torch.zeros(2, 4), torch.zeros(2, dtype=torch.long), 2, torch.zeros(3, dtype=torch.long), 2, 0)


def test_v41_select_opcheck():
    torch.library.opcheck(torch.ops.deepseek_kernels.v41_select.default, select_args(5, 9, 3, 2, "read", 1),
                          test_utils=("test_schema", "test_faketensor"))
