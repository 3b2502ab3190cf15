"""Bounded sliding-window replay after a prefix-cache hit (V4.1, as vLLM's ``swa_bounded_replay``).

The hit's blocks give the compressed state; the window KV is not taken from them but
rebuilt by replaying the last ``window`` hit tokens into a private ring. The bound:
the replay never reads window KV below ``replay_start = h - window`` (checked by
poisoning everything it must not read with NaN), and the result equals a full forward
exactly when ``h <= window``; beyond that it differs (only the model's training makes
the truncated context harmless), which the test shows too.

Through ``LLM``'s prefix cache (``swa_replay``): ``"exact"`` replays ``num_layers *
(window - 1)`` tokens per hit and gives the same tokens and log probabilities as a run
without prefix caching; ``"window"`` replays exactly ``window`` tokens; each output
reports ``num_replayed_tokens``, which the tests pin to those bounds.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import torch
from deepseek_engine.models.deepseek_v4.kv_cache import SequenceCache
from deepseek_engine.models.deepseek_v41.kv_cache import V41CachePool, WindowRing
from deepseek_engine.models.loader import load_model

TINY = Path(__file__).resolve().parent / "data" / "tiny_v41"
torch.set_num_threads(1)


@cache
def tiny():
    return load_model(TINY)


def ids(n: int, seed: int) -> torch.Tensor:
    return torch.randint(3, 1024, (n,), generator=torch.Generator().manual_seed(seed))


def hit(m, prefix: torch.Tensor, suffix: torch.Tensor, poison: bool):
    """Compute ``prefix`` in sequence A, then run ``suffix`` as sequence B sharing A's prefix blocks."""
    bs = 4
    pool = V41CachePool(m.config, 32, bs)
    n_shared = prefix.numel() // bs
    a = SequenceCache(pool, range(0, n_shared + 2))
    m(torch.cat([prefix, ids(5, 99)]), torch.arange(prefix.numel() + 5), a)
    b = SequenceCache(pool, list(range(n_shared)) + list(range(16, 24)), num_tokens=prefix.numel())
    ring = WindowRing(m.config, max_step=8)
    if poison:  # nothing below replay_start may be read: neither the ring nor the pool's window KV
        for t in ring.layers:
            t.fill_(float("nan"))
        for lp in pool.layers:
            lp.kv.view(-1, lp.kv.shape[-1])[: n_shared * bs] = float("nan")
    r0 = m.replay_prefix(prefix, b, ring)
    logits = torch.cat([m(suffix[i:i + 4], torch.arange(prefix.numel() + i, prefix.numel() + min(i + 4, suffix.numel())), b)
                        for i in range(0, suffix.numel(), 4)])
    return logits, r0, ring, b


def test_replay_within_window_equals_full_forward():
    m = tiny()
    prefix, suffix = ids(8, 1), ids(6, 2)  # hit of 8 tokens = window: the replay recomputes everything
    logits, r0, _, _ = hit(m, prefix, suffix, poison=True)
    assert r0 == 0
    full = m.forward_full(torch.cat([prefix, suffix]), block_size=4)[8:]
    torch.testing.assert_close(logits, full, atol=2e-5, rtol=0)


def test_replay_beyond_window_reads_nothing_below_replay_start():
    m = tiny()
    prefix, suffix = ids(20, 3), ids(6, 4)
    logits, r0, ring, b = hit(m, prefix, suffix, poison=True)
    assert r0 == 20 - m.config.sliding_window
    assert torch.isfinite(logits).all()
    # Layer 0's window KV depends on the token alone: the replayed rows equal the full forward's.
    full_cache = m.new_cache(26, 4)
    full = m(torch.cat([prefix, suffix]), torch.arange(26), full_cache)[20:]
    pos = torch.arange(r0, 26)
    kv0 = full_cache.pool.layers[0].kv.view(-1, m.config.head_dim)[full_cache.slots(pos)]
    torch.testing.assert_close(ring.layers[0].view(-1, m.config.head_dim)[ring.rows(pos)], kv0, atol=1e-6, rtol=0)
    # Deeper layers saw a truncated window, so the suffix differs from a full forward.
    assert not torch.allclose(logits, full, atol=1e-3)


def test_ring_memory_is_bounded():
    m = tiny()
    ring = WindowRing(m.config, max_step=8)
    per_token = sum(lp.kv[0, 0].numel() * lp.kv.element_size() for lp in V41CachePool(m.config, 1, 4).layers)
    assert ring.nbytes() == per_token * (m.config.sliding_window + 8)


# -- wired into LLM's prefix cache ------------------------------------------------------------------

def _llm_runs(swa_replay, prompts, **kw):
    from deepseek_engine import LLM, SamplingParams

    llm = LLM(str(TINY), block_size=4, max_num_seqs=kw.pop("max_num_seqs", 1), swa_replay=swa_replay, **kw)
    outs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=4, logprobs=2))
    return llm, outs


def _shared_prefix_prompts(n_shared: int = 48):
    shared = ids(n_shared, 31).tolist()
    return [shared + ids(3, 32 + s).tolist() for s in range(3)]


def test_llm_exact_replay_hit_equals_miss_and_is_bounded():
    prompts = _shared_prefix_prompts()
    llm, outs = _llm_runs("exact", prompts)
    _, plain = _llm_runs(None, prompts, enable_prefix_caching=False)
    cfg = llm.model.config
    depth = cfg.num_hidden_layers * (cfg.sliding_window - 1)
    assert [o.num_cached_tokens for o in outs] == [0, 48, 48]
    # Each hit replays a fixed number of tokens: set by the window and the depth, not by the 48-token hit.
    assert [o.num_replayed_tokens for o in outs] == [0, depth, depth] and depth < 48
    assert [o.token_ids for o in outs] == [o.token_ids for o in plain]
    for a, b in zip(outs, plain):
        for x, y in zip(a.logprobs, b.logprobs):
            assert abs(x.logprob - y.logprob) < 1e-5
            assert [t for t, _ in x.top] == [t for t, _ in y.top]
    # The shared pool holds no window KV at all: only the sequences' rings do.
    assert all(lp.kv is None for lp in llm.runner.kv.layers)


def test_ring_gives_back_prefill_rows_for_decode():
    """A ring sized for a long prefill chunk shrinks once decode steps of one token follow; tokens unchanged."""
    from deepseek_engine import LLM, SamplingParams

    prompts = [ids(120, 50).tolist()]
    params = SamplingParams(temperature=0.0, max_tokens=6)
    llm = LLM(str(TINY), block_size=4, max_num_seqs=1)
    seq_rings = []
    real_rings = llm.model._rings

    def spy(positions, ctx):
        rings = real_rings(positions, ctx)
        seq_rings.append([r.max_step for r in rings])
        return rings

    llm.model._rings = spy
    out = llm.generate(prompts, params)[0]
    assert seq_rings[0] == [120] and seq_rings[-1] == [16]
    plain = LLM(str(TINY), block_size=4, enable_prefix_caching=False, swa_replay=None).generate(prompts, params)[0]
    assert out.token_ids == plain.token_ids


def test_llm_window_replay_replays_exactly_the_window():
    prompts = _shared_prefix_prompts()
    llm, outs = _llm_runs("window", prompts)
    window = llm.model.config.sliding_window
    assert [o.num_cached_tokens for o in outs] == [0, 48, 48]
    assert [o.num_replayed_tokens for o in outs] == [0, window, window]


def test_llm_replay_after_preemption_keeps_greedy_tokens():
    """Preempted sequences come back through the prefix cache and rebuild their window by replay."""
    from deepseek_engine import LLM, SamplingParams

    prompts = [ids(30, 40 + s).tolist() for s in range(4)]
    params = SamplingParams(temperature=0.0, max_tokens=12)
    tight = LLM(str(TINY), block_size=4, num_kv_blocks=24, max_num_seqs=4, max_model_len=64)
    outs = tight.generate(prompts, params)
    assert tight.scheduler.num_preemptions > 0
    plain = LLM(str(TINY), block_size=4, enable_prefix_caching=False, max_num_seqs=1, swa_replay=None)
    assert [o.token_ids for o in outs] == [o.token_ids for o in plain.generate(prompts, params)]


def test_ring_resize_keeps_only_the_window_before_the_step():
    m = tiny()
    ring = WindowRing(m.config, max_step=100)
    w = m.config.sliding_window
    for t in ring.layers:
        t[0, :, 0] = torch.arange(ring.size, dtype=t.dtype)  # row r holds position r (positions 0..107)
    ring.end = 100
    assert ring.holds_window_of(100) and ring.holds_window_of(95)  # a rollback of 5 positions is servable
    ring.fit(1, 100)  # decode steps now: give back the prefill rows
    assert ring.max_step == 16 and ring.size == w + 16
    assert ring.holds_window_of(100) and not ring.holds_window_of(95)  # rows below the kept window are gone
    kept = torch.arange(100 - w + 1, 100)
    assert torch.equal(ring.layers[0][0, ring.rows(kept), 0], kept.float())
