"""Every Triton kernel under the Triton interpreter (CPU tensors) against the op's PyTorch reference.

Shapes are small and chosen to hit edge tiles (widths past a block, head counts below the tile, several key
tiles), masks (invisible keys, rows that see only the sink, entries past the threshold) and both float32 and
bfloat16 inputs (bf16 dots run on upcast tiles: the interpreter has no bf16 ``tl.dot``).
"""

from __future__ import annotations

import pytest
import torch
from deepseek_kernels.attention.reference import (
    sink_attention_paged_reference,
    sink_attention_reference,
)
from deepseek_kernels.attention.triton import sink_attention_kernel, sink_attention_triton
from deepseek_kernels.compressor.reference import compress_pool_reference
from deepseek_kernels.compressor.triton import compress_pool_triton
from deepseek_kernels.engram_gate.reference import engram_gate_reference
from deepseek_kernels.engram_gate.triton import engram_gate_triton
from deepseek_kernels.engram_hash.reference import engram_hash_reference
from deepseek_kernels.engram_hash.triton import engram_hash_triton
from deepseek_kernels.hyper_connection.reference import hc_merge_reference, hc_mix_reference
from deepseek_kernels.hyper_connection.triton import hc_merge_triton, hc_mix_triton
from deepseek_kernels.indexer.reference import indexer_scores_reference
from deepseek_kernels.indexer.triton import indexer_scores_triton
from deepseek_kernels.mhc_delayed.reference import mhc_pre_delayed_reference
from deepseek_kernels.mhc_delayed.triton import mhc_pre_delayed_triton
from deepseek_kernels.mhc_mixes.reference import mhc_mixes_reference
from deepseek_kernels.mhc_mixes.triton import mhc_mixes_triton
from deepseek_kernels.rms_norm.reference import rms_norm_reference
from deepseek_kernels.rms_norm.triton import rms_norm_triton
from deepseek_kernels.rope.reference import rope_reference
from deepseek_kernels.rope.triton import rope_triton
from deepseek_kernels.row_linear.reference import row_linear_reference
from deepseek_kernels.row_linear.triton import row_linear_triton
from deepseek_kernels.sampling.reference import sample_tokens_reference
from deepseek_kernels.sampling.triton import sample_tokens_triton
from deepseek_kernels.v41_compress.reference import v41_compress_pool_reference
from deepseek_kernels.v41_compress.triton import v41_compress_pool_triton
from deepseek_kernels.v41_select.reference import v41_select_reference
from deepseek_kernels.v41_select.triton import v41_select_triton
from triton.runtime.interpreter import InterpretedFunction

DTYPES = [torch.float32, torch.bfloat16]


def tol(dtype):
    return dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=3e-2, rtol=3e-2)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def test_kernels_are_interpreted() -> None:
    assert isinstance(sink_attention_kernel, InterpretedFunction)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [7, 40, 100])
@pytest.mark.parametrize("weighted", [True, False])
def test_rms_norm(dtype, width, weighted) -> None:
    g = gen(width)
    x = (torch.randn(3, 2, width, generator=g) * 3).to(dtype)
    w = (torch.rand(width, generator=g) + 0.5).to(dtype) if weighted else None
    torch.testing.assert_close(rms_norm_triton(x, w, 1e-6), rms_norm_reference(x, w, 1e-6), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t,hc,d", [(1, 4, 32), (5, 4, 7), (3, 1, 16), (4, 8, 40)])
@pytest.mark.parametrize("with_pre", [True, False])
def test_mhc_pre_delayed(dtype, t, hc, d, with_pre) -> None:
    g = gen(t * hc + d)
    mix = (2 + hc) * hc
    args = (torch.randn(t, mix, generator=g) * 2, torch.randn(mix, generator=g), torch.rand(3, generator=g) + 0.5, hc,
            20, 1e-6, torch.randn(t, hc, d, generator=g).to(dtype),
            torch.rand(t, hc, generator=g) + 0.1 if with_pre else None)
    for got, want in zip(mhc_pre_delayed_triton(*args), mhc_pre_delayed_reference(*args)):
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, **(tol(dtype) if got.dtype == dtype else tol(torch.float32)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t,hc,d,m", [(1, 4, 32, 24), (5, 4, 70, 24), (3, 1, 16, 3)])
def test_mhc_mixes(dtype, t, hc, d, m) -> None:
    g = gen(t + hc + d)
    streams, fn = torch.randn(t, hc, d, generator=g).to(dtype), torch.randn(m, hc * d, generator=g)
    out = mhc_mixes_triton(streams, fn, 1e-6)
    torch.testing.assert_close(out, mhc_mixes_reference(streams, fn, 1e-6), **tol(torch.float32))
    assert torch.equal(mhc_mixes_triton(streams[-1:], fn, 1e-6), out[-1:])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t,hc,d", [(1, 4, 32), (5, 4, 7), (3, 1, 40)])
def test_engram_gate(dtype, t, hc, d) -> None:
    g = gen(t + hc + d)
    streams, kv = torch.randn(t, hc, d, generator=g).to(dtype), torch.randn(t, (hc + 1) * d, generator=g).to(dtype)
    qw, kw = torch.rand(hc, d, generator=g) + 0.5, torch.rand(hc, d, generator=g) + 0.5
    keep = torch.tensor([True, False, True, True, True][:t])
    out = engram_gate_triton(streams, kv, qw, kw, keep, 1e-6)
    torch.testing.assert_close(out, engram_gate_reference(streams, kv, qw, kw, keep, 1e-6), **tol(dtype))


@pytest.mark.parametrize("t,layers,max_ngram,heads", [(1, 1, 2, 1), (9, 2, 4, 2), (17, 3, 3, 4)])
def test_engram_hash_is_exact(t, layers, max_ngram, heads) -> None:
    g = gen(t * layers)
    lb = max_ngram - 1
    compressed = torch.randint(0, 500, (t + lb,), generator=g)
    compressed[torch.rand(t + lb, generator=g) < 0.15] = -1  # image tokens
    positions = torch.arange(t) + int(torch.randint(0, 3, (1,), generator=g))  # chunks at and after the start
    # multipliers near 2^62: products wrap modulo 2^64; negative hashes take the floor modulo
    mult = torch.randint(1, 2**62, (layers, max_ngram), generator=g) * 2 + 1
    primes = torch.tensor([[101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151, 157][:lb * heads]] * layers)
    offsets = torch.cumsum(primes, dim=1) - primes
    args = (compressed, positions, mult, primes, offsets, heads, 7, -1)
    assert torch.equal(engram_hash_triton(*args), engram_hash_reference(*args))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,n,m", [(1, 7, 5), (5, 40, 33), (3, 200, 64)])
def test_row_linear(dtype, rows, n, m) -> None:
    g = gen(n + m)
    x, w = torch.randn(rows, n, generator=g).to(dtype), torch.randn(m, n, generator=g).to(dtype)
    out = row_linear_triton(x, w)
    torch.testing.assert_close(out, row_linear_reference(x, w), **tol(dtype))
    # a row alone gives the bits it has among the others (the blocking depends on the widths only)
    assert torch.equal(row_linear_triton(x[-1:], w), out[-1:])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,r", [((5, 3, 32), 8), ((4, 20), 20), ((2, 2, 2, 24), 16)])
def test_rope(dtype, shape, r) -> None:
    g = gen(r)
    x = torch.randn(*shape, generator=g).to(dtype)
    c, s = torch.randn(shape[0], r, generator=g), torch.randn(shape[0], r, generator=g)
    torch.testing.assert_close(rope_triton(x, c, s), rope_reference(x, c, s), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,dim", [(1, 24), (5, 1030)])
def test_hyper_connection(dtype, tokens, dim) -> None:
    g = gen(tokens)
    hc = 4
    streams = torch.randn(tokens, hc, dim, generator=g).to(dtype)
    block, post = torch.randn(tokens, dim, generator=g).to(dtype), torch.rand(tokens, hc, generator=g) * 2
    comb = torch.rand(tokens, hc, hc, generator=g)
    torch.testing.assert_close(hc_merge_triton(streams, block, post, comb),
                               hc_merge_reference(streams, block, post, comb), **tol(dtype))
    mixes = torch.randn(tokens, (2 + hc) * hc, generator=g)
    base, scale = torch.randn((2 + hc) * hc, generator=g) * 0.5, torch.rand(3, generator=g) + 0.5
    got = hc_mix_triton(mixes, base, scale, hc, 20, 1e-6, streams)
    want = hc_mix_reference(mixes, base, scale, hc, 20, 1e-6, streams)
    for a, b in zip(got[:3], want[:3]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[3], want[3], **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads,keys,dim", [(4, 9, 16), (20, 40, 24), (1, 70, 8)])
def test_sink_attention(dtype, heads, keys, dim) -> None:
    g = gen(heads * keys)
    b, tq = 2, 3
    q = torch.randn(b, tq, heads, dim, generator=g).to(dtype)
    k = torch.randn(b, keys, dim, generator=g).to(dtype)
    visible = torch.rand(b, tq, keys, generator=g) > 0.4
    visible[0, 0] = False  # only the sink
    sink = torch.randn(heads, generator=g)
    got = sink_attention_triton(q, k, visible, sink, dim**-0.5)
    torch.testing.assert_close(got, sink_attention_reference(q, k, visible, sink, dim**-0.5), **tol(dtype))


@pytest.mark.parametrize("entries", ["none", "mask", "threshold"])
def test_sink_attention_paged(entries) -> None:
    from deepseek_kernels.attention import _paged_accelerator

    g = gen(12)
    b, tq, h, kw, n, d = 3, 2, 4, 21, 6, 16
    kv_pool, entry_pool = torch.randn(160, d, generator=g), torch.randn(160, d, generator=g)
    key_slots, entry_slots = torch.randint(0, 160, (b, kw), generator=g), torch.randint(0, 160, (b, n), generator=g)
    q, sink = torch.randn(b, tq, h, d, generator=g), torch.randn(h, generator=g)
    win = torch.rand(b, tq, kw, generator=g) > 0.3
    kwargs = {}
    if entries == "mask":
        kwargs = dict(entry_pool=entry_pool, entry_slots=entry_slots, entry_visible=torch.rand(b, tq, n, generator=g) > 0.5)
    elif entries == "threshold":
        kwargs = dict(entry_pool=entry_pool, entry_slots=entry_slots, threshold=torch.randint(0, n + 1, (b, tq), generator=g))
    got = _paged_accelerator(q, kv_pool, key_slots, win, sink, 0.25, **kwargs)
    want = sink_attention_paged_reference(q, kv_pool, key_slots, win, sink, 0.25, **kwargs)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [5, 40])
def test_indexer_scores(dtype, n) -> None:
    g = gen(n)
    b, tq, hi, di = 2, 3, 4, 16
    pool = torch.randn(64, di, generator=g).to(dtype)
    slots = torch.randint(0, 64, (b, n), generator=g)
    q, w = torch.randn(b, tq, hi, di, generator=g).to(dtype), torch.randn(b, tq, hi, generator=g)
    thr = torch.randint(0, n + 1, (b, tq), generator=g)
    got = indexer_scores_triton(q, w, pool, slots, thr, di**-0.5, hi**-0.5)
    want = indexer_scores_reference(q, w, pool, slots, thr, di**-0.5, hi**-0.5)
    torch.testing.assert_close(got, want, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("window,channels", [(4, 12), (8, 130)])
def test_compress_pool(dtype, window, channels) -> None:
    g = gen(window)
    kv, gate = torch.randn(5, window, channels, generator=g).to(dtype), torch.randn(5, window, channels, generator=g).to(dtype)
    gate[0, : window // 2] = float("-inf")
    torch.testing.assert_close(compress_pool_triton(kv, gate), compress_pool_reference(kv, gate), **tol(dtype))


@pytest.mark.parametrize("vocab", [1003, 2500])
def test_sample_tokens(vocab) -> None:
    g = gen(vocab)
    probs = torch.softmax(torch.randn(4, vocab, generator=g), -1)
    noise = torch.empty(4, vocab).exponential_(generator=g)
    assert torch.equal(sample_tokens_triton(probs, noise), sample_tokens_reference(probs, noise))


@pytest.mark.parametrize("ratio", [1, 2])
@pytest.mark.parametrize("groups, head_dim", [(1, 32), (5, 13), (3, 100)])
def test_v41_compress_pool(ratio, groups, head_dim) -> None:
    g = gen(groups * head_dim + ratio)
    rows = torch.randn(groups * ratio, ratio * head_dim, generator=g) * 3
    w = torch.rand(head_dim, generator=g) + 0.5
    torch.testing.assert_close(v41_compress_pool_triton(rows, ratio, w, 1e-6),
                               v41_compress_pool_reference(rows, ratio, w, 1e-6), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("rows,n,topk,bs", [(1, 1, 1, 1), (7, 9, 4, 2), (5, 0, 2, 2), (6, 70, 5, 3), (4, 6, 9, 5)])
@pytest.mark.parametrize("mode", ["plain", "write", "read"])
def test_v41_select_is_exact(rows, n, topk, bs, mode) -> None:
    """Ties everywhere (few distinct values, zeros of both signs), -inf, NaN; ends below, at and past the row."""
    g = gen(rows * 100 + n)
    logits = torch.randint(-3, 4, (rows, n), generator=g).float()
    logits[torch.rand(rows, n, generator=g) < 0.1] = -0.0
    logits[torch.rand(rows, n, generator=g) < 0.15] = float("-inf")
    logits[torch.rand(rows, n, generator=g) < 0.05] = float("nan")
    ends = torch.randint(-1, n + 3, (rows,), generator=g)
    nblocks = max(1, -(-n // bs))
    cand = torch.randint(-1, nblocks + 2, (rows, 3), generator=g) if mode == "read" else None
    args = (logits, ends, topk, cand, bs, 2 if mode == "write" else 0)
    mask, chosen = v41_select_triton(*args)
    want_mask, want_chosen = v41_select_reference(*args)
    assert torch.equal(mask, want_mask) and torch.equal(chosen, want_chosen)
