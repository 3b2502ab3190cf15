"""``sink_attention_paged`` keeps the exact float arithmetic of attention written out one query at a time.

The CPU kernel blocks its work (heads in pairs, eight rows per dot block, sixteen-lane exps, several heads'
value sums in registers, visible rows picked by mask); none of that may change a bit. Two oracles, compared
with ``torch.equal``:

* ``written_out``: the arithmetic spelled out in float32 tensor operations, one operation per step in the
  kernel's order (eight-lane partial sums over blocks of eight columns added in lane order, or one running sum
  when D is not a multiple of 8; times scale; max from the sink; ``exp_lanes``; the denominator from the sink's
  term in key order; the normalised weights times the keys added in key order);
* the gathered kernel ``sink_attention`` (a plain per-query loop) over the keys the pools hold.

Shapes cover what the benchmark does not: random visibility (not bands), visible counts off the blocks of 8 and
16, head widths not multiples of 32 or 8, odd head counts and one head, several queries with ragged visibility,
entries by mask and by threshold, no window, rows that see nothing, pools in other dtypes.
"""

from __future__ import annotations

import deepseek_kernels as ops
import pytest
import torch
from deepseek_kernels.attention.reference import gather_paged_keys
from hypothesis import given, settings
from hypothesis import strategies as st


def written_out(q, keys, visible, sink, scale):
    """Attention with the sink, in float32 tensor operations in the CPU kernels' order (finite inputs)."""
    b, tq, h, d = q.shape
    k = keys.shape[1]
    prod = q[:, :, :, None, :] * keys[:, None, None, :, :]  # [B, Tq, H, K, D]
    if d % 8 == 0:
        blocks = prod.reshape(b, tq, h, k, d // 8, 8)
        lanes = torch.zeros(b, tq, h, k, 8)
        for i in range(d // 8):
            lanes = lanes + blocks[..., i, :]
        dots = torch.zeros(b, tq, h, k)
        for lane in range(8):
            dots = dots + lanes[..., lane]
    else:
        dots = torch.zeros(b, tq, h, k)
        for i in range(d):
            dots = dots + prod[..., i]
    dots = dots * scale
    vis = visible[:, :, None, :].expand(b, tq, h, k)
    mx = sink.view(1, 1, h).expand(b, tq, h)
    for i in range(k):
        mx = torch.where(vis[..., i] & (dots[..., i] > mx), dots[..., i], mx)
    exps = torch.ops.deepseek_kernels.exp_lanes(dots - mx[..., None])
    den = torch.ops.deepseek_kernels.exp_lanes(sink.view(1, 1, h) - mx)
    for i in range(k):
        den = torch.where(vis[..., i], den + exps[..., i], den)
    weights = exps * (1.0 / den)[..., None]
    out = torch.zeros(b, tq, h, d)
    for i in range(k):
        out = torch.where(vis[..., i, None], out + weights[..., i, None] * keys[:, None, None, i, :], out)
    return out


def paged_case(seed, b, tq, h, d, kw, n, entries, p_visible, pool_dtype=torch.float32):
    """Random pools, slots and visibility (each key visible with probability p_visible)."""
    g = torch.Generator().manual_seed(seed)
    kv_pool = torch.randn(12, 8, d, generator=g).to(pool_dtype)
    entry_pool = torch.randn(7, 4, d, generator=g).to(pool_dtype)
    key_slots = torch.randint(0, 96, (b, kw), generator=g)
    entry_slots = torch.randint(0, 28, (b, n), generator=g)
    q, sink = torch.randn(b, tq, h, d, generator=g), torch.randn(h, generator=g)
    win = torch.rand(b, tq, kw, generator=g) < p_visible
    kwargs = {}
    if entries == "mask":
        kwargs = dict(entry_pool=entry_pool, entry_slots=entry_slots,
                      entry_visible=torch.rand(b, tq, n, generator=g) < p_visible)
    elif entries == "threshold":
        kwargs = dict(entry_pool=entry_pool, entry_slots=entry_slots,
                      threshold=torch.randint(-1, n + 2, (b, tq), generator=g))
    return q, kv_pool, key_slots, win, sink, kwargs


def assert_old_bits(q, kv_pool, key_slots, win, sink, scale, kwargs, reference=True):
    out = ops.sink_attention_paged(q, kv_pool, key_slots, win, sink, scale, **kwargs)
    keys, visible = gather_paged_keys(kv_pool, key_slots, win, **{k: v for k, v in kwargs.items()})
    keys = keys.float()
    assert torch.equal(out, ops.sink_attention(q.float(), keys, visible, sink, scale).to(out.dtype))
    if reference:
        assert torch.equal(out, written_out(q.float(), keys, visible, sink.float(), scale).to(out.dtype))
    return out


@pytest.mark.parametrize("d", [8, 12, 24, 32, 40, 48, 64])
@pytest.mark.parametrize("h", [1, 3, 4, 5])
def test_random_visibility_any_width_and_head_count(d, h) -> None:
    for entries in ("none", "mask", "threshold"):
        case = paged_case(1000 * d + h, 2, 3, h, d, 37, 13, entries, 0.55)
        q, kv_pool, key_slots, win, sink, kwargs = case
        win[0, 1] = False  # a query with no window key
        assert_old_bits(q, kv_pool, key_slots, win, sink, 0.3, kwargs)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), h=st.integers(1, 6), d=st.sampled_from([8, 16, 20, 32, 56]),
       kw=st.integers(0, 40), n=st.integers(0, 20), tq=st.integers(1, 4),
       entries=st.sampled_from(["none", "mask", "threshold"]), p_visible=st.sampled_from([0.0, 0.2, 0.7, 1.0]))
def test_visible_counts_on_and_off_the_blocks(seed, h, d, kw, n, tq, entries, p_visible) -> None:
    """Every visible count from 0 to 60 with any head count: blocks of 8 dots and 16 exps with their tails."""
    case = paged_case(seed, 2, tq, h, d, kw, n, entries, p_visible)
    q, kv_pool, key_slots, win, sink, kwargs = case
    assert_old_bits(q, kv_pool, key_slots, win, sink, 0.25, kwargs)


@pytest.mark.parametrize("pool_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("entries", ["mask", "threshold"])
def test_pools_in_other_dtypes_gather_their_rows(pool_dtype, entries) -> None:
    q, kv_pool, key_slots, win, sink, kwargs = paged_case(77, 3, 2, 4, 32, 29, 9, entries, 0.6, pool_dtype)
    assert_old_bits(q, kv_pool, key_slots, win, sink, 0.2, kwargs)
    # bfloat16 queries: the float32 result rounded once
    out = ops.sink_attention_paged(q.bfloat16(), kv_pool, key_slots, win, sink, 0.2, **kwargs)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, ops.sink_attention_paged(q.bfloat16().float(), kv_pool, key_slots, win, sink, 0.2,
                                                     **kwargs).bfloat16())


def test_strided_queries_give_the_contiguous_bits() -> None:
    q, kv_pool, key_slots, win, sink, kwargs = paged_case(5, 2, 3, 4, 32, 20, 6, "mask", 0.5)
    view = q.transpose(1, 2).contiguous().transpose(1, 2)
    assert not view.is_contiguous()
    assert torch.equal(ops.sink_attention_paged(view, kv_pool, key_slots, win, sink, 0.3, **kwargs),
                       ops.sink_attention_paged(q, kv_pool, key_slots, win, sink, 0.3, **kwargs))


def test_ties_zeros_and_extreme_logits() -> None:
    """Zero queries (every dot a signed zero, max ties with the sink), huge logits (exps that underflow to 0 and
    saturate) and a sink far above every logit."""
    q, kv_pool, key_slots, win, sink, kwargs = paged_case(9, 2, 4, 5, 24, 33, 10, "threshold", 0.7)
    q[0, 0] = 0.0
    q[0, 1] = -0.0
    q[1, 0] *= 40.0
    sink[1] = 0.0
    sink[2] = 200.0
    kv_pool[0, 0] = -0.0
    assert_old_bits(q, kv_pool, key_slots, win, sink, 1.0, kwargs)
    assert_old_bits(q, kv_pool, key_slots, win, sink, 50.0, kwargs)


def test_rows_nobody_sees_do_not_matter() -> None:
    """Pool rows that are named but not visible (here NaN and inf) never reach the output."""
    q, kv_pool, key_slots, win, sink, kwargs = paged_case(21, 2, 3, 4, 32, 24, 12, "mask", 0.5)
    clean = ops.sink_attention_paged(q, kv_pool, key_slots, win, sink, 0.3, **kwargs)
    seen_rows = key_slots[win.any(1)]
    hidden_rows = key_slots[~torch.isin(key_slots, seen_rows)]
    seen_entries = kwargs["entry_slots"][kwargs["entry_visible"].any(1)]
    hidden_entries = kwargs["entry_slots"][~torch.isin(kwargs["entry_slots"], seen_entries)]
    if hidden_rows.numel() + hidden_entries.numel() == 0:
        pytest.fail("the seed hides no row")
    kv = kv_pool.clone().view(-1, 32)
    kv[hidden_rows] = float("nan")
    ent = kwargs["entry_pool"].clone().view(-1, 32)
    ent[hidden_entries] = float("inf")
    kwargs = dict(kwargs, entry_pool=ent.view_as(kwargs["entry_pool"]))
    dirty = assert_old_bits(q, kv.view_as(kv_pool), key_slots, win, sink, 0.3, kwargs, reference=False)
    assert torch.equal(dirty, clean)
