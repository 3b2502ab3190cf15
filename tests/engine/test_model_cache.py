"""Paged cache: chunked prefill, decode, block layouts and batch contexts agree with one-shot forwards."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from deepseek_engine.models.deepseek_v4.kv_cache import KVCachePool, SequenceCache
from model_fixtures import PLAIN, model, reference

ATOL = 1e-4


def run_chunks(m, ids: torch.Tensor, chunks: list[int], cache: SequenceCache) -> torch.Tensor:
    out, pos = [], 0
    for n in chunks:
        out.append(m(ids[pos:pos + n], torch.arange(pos, pos + n), cache))
        pos += n
    assert pos == ids.numel()
    return torch.cat(out)


def split(total: int, pattern: list[int]) -> list[int]:
    chunks, i = [], 0
    while sum(chunks) < total:
        chunks.append(min(pattern[i % len(pattern)], total - sum(chunks)))
        i += 1
    return chunks


@pytest.mark.parametrize(
    "pattern,block_size",
    [([7], 16), ([1, 3, 60], 16), ([129], 64), ([64], 4), ([5, 11, 128], 64)],
)
def test_chunked_prefill_matches_one_shot(pattern, block_size):
    m = model(PLAIN)
    ref = reference("tiny_v4")
    ids = ref["prefill_0.input_ids"][:260]
    one_shot = m.forward_full(ids)
    cache = m.new_cache(ids.numel(), block_size)
    got = run_chunks(m, ids, split(ids.numel(), pattern), cache)
    assert cache.num_tokens == ids.numel()
    torch.testing.assert_close(got, one_shot, atol=ATOL, rtol=0)
    torch.testing.assert_close(got, ref["prefill_0.logits"][:260], atol=ATOL, rtol=0)


def test_token_by_token_decode_matches_one_shot():
    m = model(PLAIN)
    ref = reference("tiny_v4")
    ids = ref["prefill_0.input_ids"][:150]
    cache = m.new_cache(ids.numel(), 16)
    got = run_chunks(m, ids, [20] + [1] * 130, cache)
    torch.testing.assert_close(got, ref["prefill_0.logits"][:150], atol=ATOL, rtol=0)


def test_scattered_block_tables_in_a_shared_pool():
    """Two sequences interleave their steps in one pool through non-contiguous, permuted block tables."""
    m = model(PLAIN)
    ref = reference("tiny_v4")
    a, b = ref["prefill_0.input_ids"][:180], ref["prefill_1.input_ids"]
    bs = 16
    pool = KVCachePool(m.config, num_blocks=40, block_size=bs)
    order = torch.randperm(40, generator=torch.Generator().manual_seed(3)).tolist()
    cache_a = SequenceCache(pool, order[:2])
    cache_b = SequenceCache(pool, order[20:22])
    spare_a, spare_b = order[2:20], order[22:40]
    outs = {"a": [], "b": []}
    for step in range(12):
        for key, ids, cache, spare in (("a", a, cache_a, spare_a), ("b", b, cache_b, spare_b)):
            start = cache.num_tokens
            if start >= ids.numel():
                continue
            n = min(ids.numel() - start, 1 + 17 * (step % 3))
            while cache.capacity < start + n:
                cache.append_block(spare.pop(0))
            outs[key].append(m(ids[start:start + n], torch.arange(start, start + n), cache))
    rest = a[cache_a.num_tokens:]
    while cache_a.capacity < a.numel():
        cache_a.append_block(spare_a.pop(0))
    if rest.numel():
        outs["a"].append(m(rest, torch.arange(cache_a.num_tokens, a.numel()), cache_a))
    torch.testing.assert_close(torch.cat(outs["a"]), ref["prefill_0.logits"][:180], atol=ATOL, rtol=0)
    torch.testing.assert_close(torch.cat(outs["b"]), ref["prefill_1.logits"], atol=ATOL, rtol=0)


@dataclass
class BatchContext:
    kv: KVCachePool
    block_tables: list[list[int]]
    query_start_loc: list[int]
    logits_indices: torch.Tensor | None


def test_batch_context_runs_sequences_back_to_back():
    m = model(PLAIN)
    ref = reference("tiny_v4")
    a, b = ref["prefill_0.input_ids"][:140], ref["prefill_1.input_ids"][:50]
    pool = KVCachePool(m.config, num_blocks=16, block_size=16)
    tables = [list(range(0, 9)), list(range(9, 13))]
    first = BatchContext(pool, tables, [0, 100, 130], None)
    got = m(torch.cat([a[:100], b[:30]]), torch.cat([torch.arange(100), torch.arange(30)]), first)
    torch.testing.assert_close(got[:100], ref["prefill_0.logits"][:100], atol=ATOL, rtol=0)
    torch.testing.assert_close(got[100:], ref["prefill_1.logits"][:30], atol=ATOL, rtol=0)
    second = BatchContext(pool, tables, [0, 40, 60], torch.tensor([39, 59]))
    got = m(torch.cat([a[100:], b[30:]]), torch.cat([torch.arange(100, 140), torch.arange(30, 50)]), second)
    torch.testing.assert_close(got[0], ref["prefill_0.logits"][139], atol=ATOL, rtol=0)
    torch.testing.assert_close(got[1], ref["prefill_1.logits"][49], atol=ATOL, rtol=0)


def test_resuming_from_shared_prefix_blocks():
    """A second sequence reuses the full prefix blocks of a first one (prefix caching)."""
    m = model(PLAIN)
    ref = reference("tiny_v4")
    ids = ref["prefill_0.input_ids"]
    pool = KVCachePool(m.config, num_blocks=40, block_size=16)
    first = SequenceCache(pool, range(0, 8))
    m(ids[:128], torch.arange(128), first)
    shared = list(range(0, 8))  # 128 tokens = 8 full blocks
    second = SequenceCache(pool, shared + list(range(20, 30)), num_tokens=128)
    got = m(ids[128:280], torch.arange(128, 280), second)
    torch.testing.assert_close(got, ref["prefill_0.logits"][128:280], atol=ATOL, rtol=0)


def test_bad_steps_are_rejected_with_clear_errors():
    m = model(PLAIN)
    cache = m.new_cache(32, 16)
    ids = torch.tensor([5, 6, 7])
    with pytest.raises(ValueError, match="start at"):
        m(ids, torch.tensor([1, 2, 3]), cache)
    with pytest.raises(ValueError, match="consecutive"):
        m(ids, torch.tensor([0, 2, 3]), cache)
    with pytest.raises(ValueError, match="append blocks"):
        m(torch.arange(2, 40), torch.arange(38), cache)
    with pytest.raises(ValueError, match="token ids"):
        m(torch.tensor([m.config.vocab_size]), torch.tensor([0]), cache)
    with pytest.raises(ValueError, match="outside pool"):
        SequenceCache(cache.pool, [99])
    assert cache.num_tokens == 0
