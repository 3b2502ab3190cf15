"""Every op's CPU kernel (``deepseek_kernels``, compiled C++) against its PyTorch reference.

Each case runs the op twice, once through the dispatcher (the CPU kernel) and once in reference mode, on
seeded random inputs with edge shapes (one token, widths that are not multiples of the eight-lane groups,
masked rows, empty entry sets) and on float32 and bfloat16 inputs where the op takes both.
"""

from __future__ import annotations

import deepseek_kernels as ops
import pytest
import torch
from deepseek_kernels.attention.reference import gather_paged_keys
from deepseek_kernels.moe.reference import clamped_swiglu


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def both(fn, *args, **kwargs):
    """``fn`` through the kernels, then through the references."""
    fast = fn(*args, **kwargs)
    with ops.using("reference"):
        slow = fn(*args, **kwargs)
    return fast, slow


def close(a, b, atol=1e-5, rtol=1e-5):
    if isinstance(a, (tuple, list)):
        for x, y in zip(a, b):
            close(x, y, atol, rtol)
        return
    assert a.dtype == b.dtype and a.shape == b.shape
    torch.testing.assert_close(a, b, atol=atol, rtol=rtol)


def test_every_op_is_registered_with_a_cpu_kernel() -> None:
    names = ["rms_norm", "rope", "hc_mix", "hc_merge", "hc_step", "hc_head", "sink_attention", "sink_attention_paged", "moe_route",
             "indexer_scores", "indexer_select", "moe_dense_experts", "attn_front", "attn_back", "head_argmax", "head_argmax_q8",
             "compress_pool", "dequantize_fp8_blocks", "dequantize_mxfp4", "fp8_gemm", "mxfp4_gemm", "sample_tokens",
             "apply_token_bitmask_", "exp_lanes", "mhc_pre_delayed", "v41_compress_pool", "engram_hash"]
    for name in names:
        handle = getattr(torch.ops.deepseek_kernels, name)
        assert torch._C._dispatch_has_kernel_for_dispatch_key(handle.default.name(), "CPU"), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("width", [7, 16, 40, 1024])
def test_rms_norm(dtype, width) -> None:
    g = gen(width)
    x = (torch.randn(5, width, generator=g) * 3).to(dtype)
    w = (torch.rand(width, generator=g) + 0.5).to(dtype)
    for weight in (w, None):
        close(*both(ops.rms_norm, x, weight, 1e-6), atol=1e-6 if dtype == torch.float32 else 1e-2)
    wide = torch.randn(6, 2 * width, generator=g)
    close(*both(ops.rms_norm, wide[:, 3:3 + width], None, 1e-6), atol=1e-6)  # a strided column slice


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_is_exact(dtype) -> None:
    g = gen(1)
    x = torch.randn(5, 3, 32, generator=g).to(dtype)
    c, s = torch.randn(5, 8, generator=g), torch.randn(5, 8, generator=g)
    fast, slow = both(ops.rope, x, c, s)
    assert torch.equal(fast, slow)
    fast, slow = both(ops.rope, x[:, 0], c, s)
    assert torch.equal(fast, slow)


@pytest.mark.parametrize("tokens", [1, 7, 32])
def test_hc_mix_and_merge(tokens) -> None:
    g = gen(tokens)
    hc, dim = 4, 24
    streams = torch.randn(tokens, hc, dim, generator=g)
    mixes = torch.randn(tokens, (2 + hc) * hc, generator=g)
    base = torch.randn((2 + hc) * hc, generator=g) * 0.5
    scale = torch.rand(3, generator=g) + 0.5
    close(*both(ops.hc_mix, mixes, base, scale, hc, 20, 1e-6, streams), atol=1e-6)
    block, post = torch.randn(tokens, dim, generator=g), torch.rand(tokens, hc, generator=g) * 2
    comb = torch.rand(tokens, hc, hc, generator=g)
    close(*both(ops.hc_merge, streams, block, post, comb), atol=1e-5)
    close(*both(ops.hc_merge, streams.bfloat16(), block.bfloat16(), post, comb), atol=0.05, rtol=0.02)


def hc_step_inputs(g, tokens, hc, dim):
    """Random hyper-connection step inputs: streams, block, post, comb, fn, base, scale, weight."""
    streams = torch.randn(tokens, hc, dim, generator=g)
    block, post = torch.randn(tokens, dim, generator=g), torch.rand(tokens, hc, generator=g) * 2
    comb = torch.rand(tokens, hc, hc, generator=g)
    fn = torch.randn((2 + hc) * hc, hc * dim, generator=g) * 0.2
    base, scale = torch.randn((2 + hc) * hc, generator=g) * 0.5, torch.rand(3, generator=g) + 0.5
    weight = 1 + 0.1 * torch.randn(dim, generator=g)
    return streams, block, post, comb, fn, base, scale, weight


@pytest.mark.parametrize("tokens", [1, 13])
@pytest.mark.parametrize("merge", [False, True])
def test_hc_step(tokens, merge) -> None:
    g = gen(200 + tokens)
    hc, dim = 4, 24
    streams, block, post, comb, fn, base, scale, weight = hc_step_inputs(g, tokens, hc, dim)
    args = (block, post, comb) if merge else (None, None, None)
    fast, slow = both(ops.hc_step, streams, *args, fn, base, scale, hc, 20, 1e-6, 1e-6, weight, 1e-5)
    close(fast, slow, atol=1e-5)
    if not merge:
        assert fast[0].data_ptr() != streams.data_ptr()  # a fresh tensor, never an alias of the input


@pytest.mark.parametrize("merge", [False, True])
def test_hc_step_inputs_converted_like_contiguous_float32(merge) -> None:
    """The kernels take float32 contiguous arguments as they are and convert the others first: strided views and
    float64 copies of the same values give the bits of the contiguous float32 call (the float64 call's results
    come back as float64)."""
    g = gen(210)
    tokens, hc, dim = 5, 4, 24
    streams, block, post, comb, fn, base, scale, weight = hc_step_inputs(g, tokens, hc, dim)

    def call(s, bl, p, c, f):
        args = (bl, p, c) if merge else (None, None, None)
        return ops.hc_step(s, *args, f, base, scale, hc, 20, 1e-6, 1e-6, weight, 1e-5)

    want = call(streams, block, post, comb, fn)
    strided = call(streams.transpose(0, 1).contiguous().transpose(0, 1), block.t().contiguous().t(),
                   post.t().contiguous().t(), comb.transpose(1, 2).contiguous().transpose(1, 2), fn.t().contiguous().t())
    assert not fn.t().contiguous().t().is_contiguous()
    for got in strided:
        assert got.dtype == torch.float32
    assert all(torch.equal(a, b) for a, b in zip(want, strided))
    wide = call(streams.double(), block.double(), post.double(), comb.double(), fn.double())
    assert wide[0].dtype == wide[3].dtype == torch.float64
    assert all(torch.equal(a, b.float()) for a, b in zip(want, wide))


def test_rms_norm_strided_input_gives_the_contiguous_bits() -> None:
    x = torch.randn(7, 40, generator=gen(211))
    weight = 1 + 0.1 * torch.randn(40, generator=gen(212))
    view = x.t().contiguous().t()
    assert not view.is_contiguous()
    assert torch.equal(ops.rms_norm(view, weight, 1e-6), ops.rms_norm(x, weight, 1e-6))


def _attention_inputs(seed, dtype=torch.float32):
    g = gen(seed)
    b, tq, h, k, d = 3, 2, 4, 9, 8
    q, keys = torch.randn(b, tq, h, d, generator=g).to(dtype), torch.randn(b, k, d, generator=g).to(dtype)
    visible = torch.rand(b, tq, k, generator=g) > 0.4
    visible[0, 0] = False  # a row that sees nothing but the sink
    return q, keys, visible, torch.randn(h, generator=g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sink_attention(dtype) -> None:
    fast, slow = both(ops.sink_attention, *_attention_inputs(11, dtype), 0.3)
    close(fast, slow, atol=1e-5 if dtype == torch.float32 else 2e-2, rtol=1e-5 if dtype == torch.float32 else 2e-2)


@pytest.mark.parametrize("entries", ["none", "mask", "threshold"])
@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.bfloat16])
def test_sink_attention_paged(entries, pool_dtype) -> None:
    g = gen(12)
    b, tq, h, kw, n, d = 3, 2, 4, 21, 6, 16  # groups of eight visible keys and a remainder
    kv_pool = torch.randn(40, 4, d, generator=g).to(pool_dtype)
    entry_pool = torch.randn(40, 4, d, generator=g).to(pool_dtype)
    key_slots, entry_slots = torch.randint(0, 160, (b, kw), generator=g), torch.randint(0, 160, (b, n), generator=g)
    q, sink = torch.randn(b, tq, h, d, generator=g), torch.randn(h, generator=g)
    win = torch.rand(b, tq, kw, generator=g) > 0.3
    win[1, 1] = False
    kwargs = {}
    if entries == "mask":
        kwargs = dict(entry_pool=entry_pool, entry_slots=entry_slots, entry_visible=torch.rand(b, tq, n, generator=g) > 0.5)
    elif entries == "threshold":
        kwargs = dict(entry_pool=entry_pool, entry_slots=entry_slots, threshold=torch.randint(0, n + 1, (b, tq), generator=g))
    fast, slow = both(ops.sink_attention_paged, q, kv_pool, key_slots, win, sink, 0.25, **kwargs)
    close(fast, slow, atol=1e-5)
    # The paged kernel and the gathered kernel do the same arithmetic: identical bits.
    keys, visible = gather_paged_keys(kv_pool, key_slots, win, **kwargs)
    assert torch.equal(fast, ops.sink_attention(q, keys.float(), visible, sink, 0.25))


@pytest.mark.parametrize("d", [32, 40, 64])
@pytest.mark.parametrize("h", [1, 3, 4, 6])
def test_sink_attention_paged_wide_heads_are_the_gathered_bits(d, h) -> None:
    """Head widths with 32-column blocks (heads in pairs and one alone) and head counts with and without the
    four-head sums: identical bits to the gathered kernel, and close to the reference."""
    g = gen(500 + d + h)
    b, tq, kw, n = 3, 2, 27, 11
    kv_pool = torch.randn(40, 4, d, generator=g)
    entry_pool = torch.randn(40, 4, d, generator=g)
    key_slots, entry_slots = torch.randint(0, 160, (b, kw), generator=g), torch.randint(0, 160, (b, n), generator=g)
    q, sink = torch.randn(b, tq, h, d, generator=g), torch.randn(h, generator=g)
    win = torch.rand(b, tq, kw, generator=g) > 0.2
    win[1, 1] = False
    kwargs = dict(entry_pool=entry_pool, entry_slots=entry_slots, threshold=torch.randint(0, n + 1, (b, tq), generator=g))
    fast, slow = both(ops.sink_attention_paged, q, kv_pool, key_slots, win, sink, 0.2, **kwargs)
    close(fast, slow, atol=1e-5)
    keys, visible = gather_paged_keys(kv_pool, key_slots, win, **kwargs)
    assert torch.equal(fast, ops.sink_attention(q, keys.float(), visible, sink, 0.2))


def test_bad_arguments_name_the_op() -> None:
    q, keys, visible, sink = _attention_inputs(3)
    with pytest.raises(RuntimeError, match="deepseek_kernels::sink_attention: visible must be Bool"):
        ops.sink_attention(q, keys, visible.float(), sink, 0.3)
    with pytest.raises(RuntimeError, match="deepseek_kernels::rope: one table row per token"):
        ops.rope(torch.randn(3, 8), torch.randn(2, 4), torch.randn(2, 4))
    with pytest.raises(RuntimeError, match="deepseek_kernels::hc_mix: hc must lie in"):
        ops.hc_mix(torch.randn(2, 120), torch.randn(120), torch.randn(3), 10, 1, 1e-6, torch.randn(2, 10, 4))


@pytest.mark.parametrize("n", [0, 5, 37])
def test_indexer_scores_and_top_entries(n) -> None:
    g = gen(40 + n)
    b, tq, hi, di = 2, 3, 4, 16
    pool = torch.randn(64, di, generator=g)
    slots = torch.randint(0, 64, (b, n), generator=g)
    q, w = torch.randn(b, tq, hi, di, generator=g), torch.randn(b, tq, hi, generator=g)
    threshold = torch.randint(0, n + 1, (b, tq), generator=g)
    fast, slow = both(ops.indexer_scores, q, w, pool, slots, threshold, di**-0.5, hi**-0.5)
    close(fast, slow, atol=1e-5)
    close(*both(ops.indexer_scores, q, w, pool.bfloat16(), slots, threshold, 0.25, 0.5), atol=1e-5)
    if n:
        picks = ops.top_entries(fast, 4, [n, n - 1])
        assert picks.shape == (b, tq, min(4, n))


def sequential_indexer_scores(q, w, pool, slots, threshold, qscale: float, wscale: float) -> torch.Tensor:
    """The kernel's arithmetic in float32 tensor operations (no fused multiply-add): each dot one running sum over
    the columns in order, relu, then the heads' terms added in order; ``-inf`` from the threshold on."""
    b, tq, hi, di = q.shape
    n = slots.shape[1]
    keys = pool[slots.flatten()].view(b, 1, 1, n, di)
    qs, ws = torch.tensor(qscale, dtype=torch.float32), torch.tensor(wscale, dtype=torch.float32)
    dot = torch.zeros(b, tq, hi, n)
    for d in range(di):
        dot = dot + q[:, :, :, None, d] * keys[..., d]
    term = (torch.where(dot > 0, dot, torch.zeros(())) * qs) * (w * ws)[..., None]
    s = term[:, :, 0]
    for h in range(1, hi):
        s = s + term[:, :, h]
    return s.masked_fill(torch.arange(n) >= threshold[..., None], float("-inf"))


@pytest.mark.parametrize("n", [1, 8, 13, 37])
@pytest.mark.parametrize("di", [16, 20])
def test_indexer_scores_are_the_sequential_sums(n, di) -> None:
    """Eight entries per pass (one per lane) and the one-entry loop (the rest of a row, and entries from the
    threshold on) give the same bits: those of the sequential sums, with exact zeros and negative dots."""
    g = gen(300 + n + di)
    b, tq, hi = 3, 4, 4
    pool = torch.randn(50, di, generator=g)
    pool[:6] = 0.0
    slots = torch.randint(0, 50, (b, n), generator=g)
    q, w = torch.randn(b, tq, hi, di, generator=g), torch.randn(b, tq, hi, generator=g)
    threshold = torch.randint(0, n + 1, (b, tq), generator=g)
    threshold[0] = n  # whole rows through the lanes
    for qscale, wscale in ((di**-0.5, hi**-0.5), (0.3, 1.7)):
        fast = ops.indexer_scores(q, w, pool, slots, threshold, qscale, wscale)
        assert torch.equal(fast, sequential_indexer_scores(q, w, pool, slots, threshold, qscale, wscale))
        # each entry alone (the one-entry loop) gives the same score as within its block of eight
        for j in range(n):
            alone = ops.indexer_scores(q, w, pool, slots[:, j:j + 1], (threshold > j).long(), qscale, wscale)
            assert torch.equal(alone[..., 0], fast[..., j])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("tokens", [0, 1, 7, 32])
@pytest.mark.parametrize("hc", [1, 4])
def test_hc_head(dtype, tokens, hc) -> None:
    """The last site and the final norm as one call: its reference, and the engine's former composition
    (``hyper_head`` then the weighted ``rms_norm``)."""
    from deepseek_engine.layers.hyper_connection import hyper_head

    g = gen(90 + tokens + hc)
    dim = 24
    streams = (torch.randn(tokens, hc, dim, generator=g) * 2).to(dtype)
    fn = torch.randn(hc, hc * dim, generator=g) / dim
    base, scale = torch.randn(hc, generator=g) * 0.5, torch.rand(1, generator=g) + 0.5
    weight = torch.rand(dim, generator=g) + 0.5
    fast, slow = both(ops.hc_head, streams, fn, base, scale, 1e-6, 1e-6, weight, 1e-5)
    assert fast.dtype == dtype and fast.shape == (tokens, dim)
    close(fast, slow, atol=1e-5 if dtype == torch.float32 else 2e-2)
    if dtype == torch.float32 and tokens:
        composed = ops.rms_norm(hyper_head(streams, fn, base, scale, 1e-6, 1e-6), weight, 1e-5)
        close(fast, composed, atol=1e-5)
    with pytest.raises(RuntimeError, match="deepseek_kernels::hc_head: fn must be"):
        ops.hc_head(streams, fn[:, 1:], base, scale, 1e-6, 1e-6, weight, 1e-5)


@pytest.mark.parametrize("n", [0, 1, 5, 37])
@pytest.mark.parametrize("tq", [1, 3])
def test_indexer_select(n, tq) -> None:
    """Scores, top-k and threshold in one call: the reference's mask, and exactly the mask the kernel scores give
    through ``top_entries`` (rows as long as the reference's, shorter or longer than N) and the threshold."""
    g = gen(70 + n + tq)
    b, hi, di, topk = 3, 4, 16, 4
    pool = torch.randn(64, di, generator=g)
    slots = torch.randint(0, 64, (b, n), generator=g)
    q, w = torch.randn(b, tq, hi, di, generator=g), torch.randn(b, tq, hi, generator=g)
    q[0, 0, :, :] = -q[0, 0].abs()  # every head's dot can turn negative: ReLU ties at zero
    pool[:8] = pool[:8].abs()
    threshold = torch.randint(0, n + 1, (b, tq), generator=g)
    for totals in ([n] * b, [n, max(n - 1, 0), n + 3], [0, n, 2]):
        fast, slow = both(ops.indexer_select, q, w, pool, slots, threshold, di**-0.5, hi**-0.5, topk, totals)
        assert fast.dtype == torch.bool and fast.shape == (b, tq, n)
        assert torch.equal(fast, slow)
        if n:
            scores = ops.indexer_scores(q, w, pool, slots, threshold, di**-0.5, hi**-0.5)
            picked = ops.top_entries(scores, topk, totals)
            picked = torch.where(picked < threshold[..., None], picked, torch.full_like(picked, n))
            composed = torch.zeros(b, tq, n + 1, dtype=torch.bool).scatter_(2, picked, True)[..., :n]
            assert torch.equal(fast, composed)
    with pytest.raises(RuntimeError, match="deepseek_kernels::indexer_select: totals must hold one row length"):
        ops.indexer_select(q, w, pool, slots, threshold, 0.25, 0.5, topk, [n])


@pytest.mark.parametrize("score_func", ["sqrtsoftplus", "softmax", "sigmoid"])
@pytest.mark.parametrize("hashed", [False, True])
@pytest.mark.parametrize("tokens", [1, 33])
def test_moe_dense_experts(score_func, hashed, tokens) -> None:
    g = gen(tokens)
    e, inter, hidden, topk, vocab = 6, 12, 20, 2, 50
    y = torch.randn(tokens, e + 2 * (e + 1) * inter, generator=g) * 2
    down = torch.randn(e + 1, inter, hidden, generator=g) * 0.3
    ids = torch.randint(0, vocab, (tokens,), generator=g)
    tid2eid = torch.stack([torch.randperm(e, generator=g)[:topk] for _ in range(vocab)])
    bias = torch.randn(e, generator=g) * 0.1
    args = (tid2eid, ids, None) if hashed else (None, None, bias)
    close(*both(ops.moe_dense_experts, y, e, inter, topk, score_func, *args, 1.5, 7.0, down), atol=1e-5)


@pytest.mark.parametrize("score_func", ["sqrtsoftplus", "softmax", "sigmoid"])
@pytest.mark.parametrize("hashed", [False, True])
@pytest.mark.parametrize("experts", [8, 64, 256])
def test_moe_route(score_func, hashed, experts) -> None:
    g = gen(experts)
    t, topk, vocab = 17, 6, 40
    logits = torch.randn(t, experts, generator=g) * 2
    ids = torch.randint(0, vocab, (t,), generator=g)
    tid2eid = torch.stack([torch.randperm(experts, generator=g)[:topk] for _ in range(vocab)])
    kw = dict(tid2eid=tid2eid, input_ids=ids) if hashed else dict(bias=torch.randn(experts, generator=g) * 0.1)
    (e1, w1), (e2, w2) = both(ops.route, logits, topk, score_func, scale=2.5, **kw)
    # The same experts with the same weights; the slot order within a row may differ (torch.topk's is unspecified).
    o1, o2 = e1.argsort(dim=-1), e2.argsort(dim=-1)
    assert torch.equal(e1.gather(-1, o1), e2.gather(-1, o2))
    close(w1.gather(-1, o1), w2.gather(-1, o2), atol=1e-6)


def test_moe_routing_reference_matches_stacked_experts() -> None:
    """The dense few-expert kernel equals routing each token to its experts one by one."""
    g = gen(5)
    e, inter, hidden, topk, t = 4, 8, 12, 2, 9
    x = torch.randn(t, hidden, generator=g)
    router = torch.randn(e, hidden, generator=g)
    w1, w3 = torch.randn(e + 1, inter, hidden, generator=g) * 0.3, torch.randn(e + 1, inter, hidden, generator=g) * 0.3
    w2 = torch.randn(e + 1, hidden, inter, generator=g) * 0.3
    y = torch.cat([x @ router.T, x @ w1.flatten(0, 1).T, x @ w3.flatten(0, 1).T], dim=1)
    got = ops.moe_dense_experts(y, e, inter, topk, "sqrtsoftplus", None, None, None, 1.0, 10.0, w2.transpose(1, 2))
    experts, weights = ops.route(x @ router.T, topk, "sqrtsoftplus")
    want = torch.zeros(t, hidden)
    for i in range(t):
        for j in range(e + 1):
            chosen = experts[i] == j
            wt = 1.0 if j == e else float(weights[i][chosen].sum()) if chosen.any() else 0.0
            if wt:
                act = clamped_swiglu(w1[j] @ x[i], w3[j] @ x[i], 10.0)
                want[i] += wt * (w2[j] @ act)
    close(got, want, atol=1e-4)


@pytest.mark.parametrize("tokens", [1, 19])
@pytest.mark.parametrize("with_indexer", [False, True])
@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.bfloat16])
def test_attn_front(tokens, with_indexer, pool_dtype) -> None:
    g = gen(300 + tokens)
    qa, h, d, r, hi, di, extra = 24, 4, 16, 8, 2, 16, 10
    width = qa + d + 2 * extra
    proj = torch.randn(tokens, width, generator=g)
    qn, wq_b, kvn = torch.rand(qa, generator=g) + 0.5, torch.randn(h * d, qa, generator=g) * 0.2, torch.rand(d, generator=g) + 0.5
    angles = torch.rand(tokens, r // 2, generator=g) * 6
    c = angles.cos().repeat_interleave(2, -1)
    s = torch.stack((-angles.sin(), angles.sin()), -1).flatten(-2)
    slots = torch.randperm(32, generator=g)[:tokens]
    idx_w = torch.randn(hi * di, qa, generator=g) * 0.2 if with_indexer else None

    def run():
        pools = [torch.zeros(32, d, dtype=pool_dtype), torch.zeros(32, extra, dtype=pool_dtype),
                 torch.zeros(32, extra, dtype=pool_dtype)]
        out = ops.attn_front(proj, qn, 1e-6, wq_b, h, d, 1e-6, kvn, 1e-6, c, s, slots, pools[0],
                             [qa + d, qa + d + extra], pools[1:], idx_w, hi if with_indexer else 0,
                             di if with_indexer else 0)
        return out, pools

    fast = run()
    with ops.using("reference"):
        slow = run()
    close(fast[0], slow[0], atol=1e-5)
    close(fast[1], slow[1], atol=1e-5)


@pytest.mark.parametrize("tokens", [1, 19])
def test_attn_back(tokens) -> None:
    g = gen(300 + tokens)
    h, d, groups, rank, hidden, r = 4, 32, 2, 16, 24, 8
    x = torch.randn(tokens, h, d, generator=g)
    c, s = torch.randn(tokens, r, generator=g), torch.randn(tokens, r, generator=g)
    wo_a = torch.randn(groups * rank, h * d // groups, generator=g) * 0.2
    wo_b = torch.randn(hidden, groups * rank, generator=g) * 0.2
    close(*both(ops.attn_back, x, c, s, wo_a, groups, wo_b), atol=1e-5)


@pytest.mark.parametrize("window", [4, 8, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compress_pool(window, dtype) -> None:
    g = gen(window)
    kv, gate = torch.randn(5, window, 12, generator=g).to(dtype), torch.randn(5, window, 12, generator=g).to(dtype)
    gate[0, : window // 2] = float("-inf")  # a missing prior window
    close(*both(ops.compress_pool, kv, gate), atol=1e-6 if dtype == torch.float32 else 2e-2)


def test_dequantisation_is_exact() -> None:
    g = gen(9)
    w = (torch.randn(70, 300, generator=g) * 4).to(torch.float8_e4m3fn)
    w.view(torch.uint8)[0, :2] = torch.tensor([0x7F, 0x01], dtype=torch.uint8)  # NaN and the smallest subnormal
    scale = torch.rand(3, 3, generator=g) + 0.1
    fast, slow = both(ops.dequantize_fp8_blocks, w, scale, 32, 128)
    assert torch.equal(fast.isnan(), slow.isnan()) and torch.equal(fast.nan_to_num(), slow.nan_to_num())
    packed = torch.randint(0, 256, (6, 64), dtype=torch.uint8, generator=g)
    exps = torch.randint(110, 140, (6, 4), dtype=torch.uint8, generator=g)
    fast, slow = both(ops.dequantize_mxfp4, packed, exps)
    assert torch.equal(fast, slow)


def test_dequantisation_matches_the_engine_loader() -> None:
    from deepseek_engine.models import quantization

    g = gen(10)
    w = (torch.randn(64, 256, generator=g) * 4).to(torch.float8_e4m3fn)
    scale = torch.rand(1, 2, generator=g) + 0.1
    assert torch.equal(ops.dequantize_fp8_blocks(w, scale, 128, 128), quantization.dequantize_fp8(w, scale))
    packed = torch.randint(0, 256, (6, 64), dtype=torch.uint8, generator=g)
    exps = torch.randint(110, 140, (6, 4), dtype=torch.uint8, generator=g)
    assert torch.equal(ops.dequantize_mxfp4(packed, exps), quantization.dequantize_mxfp4(packed, exps))


def test_block_scaled_gemms() -> None:
    g = gen(11)
    m, n, k = 5, 130, 256
    a = (torch.randn(m, k, generator=g) * 3).to(torch.float8_e4m3fn)
    a_scale = torch.rand(m, k // 128, generator=g) + 0.1
    b = (torch.randn(n, k, generator=g) * 3).to(torch.float8_e4m3fn)
    b_scale = torch.rand(2, 2, generator=g) + 0.1
    close(*both(ops.fp8_gemm, a, a_scale, b, b_scale), atol=1e-4, rtol=1e-5)
    a_exp = torch.randint(120, 130, (m, k // 32), dtype=torch.uint8, generator=g)
    packed = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=g)
    b_exp = torch.randint(120, 130, (n, k // 32), dtype=torch.uint8, generator=g)
    close(*both(ops.mxfp4_gemm, a, a_exp, packed, b_exp), atol=1e-4, rtol=1e-5)


def test_sample_tokens() -> None:
    g = gen(12)
    probs = torch.softmax(torch.randn(7, 1003, generator=g), -1)
    noise = torch.empty(7, 1003).exponential_(generator=g)
    fast, slow = both(ops.sample_tokens, probs, noise)
    assert torch.equal(fast, slow)
    tie = torch.zeros(1, 16)
    tie[0, [3, 9]] = 0.5
    assert ops.sample_tokens(tie, torch.ones(1, 16)).tolist() == [3]  # ties go to the lowest ID


@pytest.mark.parametrize("vocab, words", [(1003, 32), (1003, 20), (64, 2), (129280, 4040)])
def test_apply_token_bitmask(vocab, words) -> None:
    """Random words, all-ones and all-zero words; a bitmask narrower than the logits (the tokens beyond it are
    disallowed) and wider (its extra bits are ignored); allowed logits keep their exact values."""
    g = gen(vocab + words)
    logits = torch.randn(4, vocab, generator=g)
    mask = torch.randint(-2**31, 2**31 - 1, (4, words), dtype=torch.int32, generator=g)
    mask[1] = -1
    mask[2, ::2] = 0
    mask[3] = 0
    mask[3, 0] = 1 << 5
    fast, slow = logits.clone(), logits.clone()
    ops.apply_token_bitmask_(fast, mask)
    with ops.using("reference"):
        ops.apply_token_bitmask_(slow, mask)
    assert torch.equal(fast, slow)
    allowed = fast > float("-inf")
    assert torch.equal(fast[allowed], logits[allowed])
    assert allowed[1, : min(vocab, 32 * words)].all() and not allowed[1, 32 * words:].any()
    assert allowed[3].nonzero().flatten().tolist() == [5]
    with pytest.raises(RuntimeError, match="apply_token_bitmask_: bitmask must be Int"):
        ops.apply_token_bitmask_(logits, mask.long())


def test_vector_exp_is_within_two_ulps() -> None:
    x = torch.cat([torch.linspace(-87.3, 88.3, 200003), torch.tensor([0.0, -0.0, 1e-8, -1e-8, -90.0, -1e4]),
                   torch.randn(1001) * 10])
    out = torch.ops.deepseek_kernels.exp_lanes(x)
    exact = torch.exp(x.double())
    ulp = torch.nextafter(exact.float(), torch.tensor(float("inf"))).double() - exact.float().double()
    keep = exact > 1.2e-38  # normal range; below it the kernel returns 0
    err = ((out.double() - exact).abs() / ulp)[keep]
    assert float(err.max()) <= 2.0
    assert torch.all(out[~keep] == 0)
    assert out[x == 0].eq(1).all()


@pytest.mark.parametrize("n", [3, 16, 19, 40])
@pytest.mark.parametrize("topk", [1, 4, 8])
def test_indexer_select_ties_keep_the_topk_choice(n, topk) -> None:
    """Scores that tie often (small integer queries and entries, zero and negative head weights) around the k-th
    best, with rows as long as N, shorter and longer: the mask is the one at::topk's choice gives, whether the
    tie decides nothing (plain from the scores) or the row has to be ranked as at::topk ranks it."""
    g = gen(500 + n * 10 + topk)
    b, tq, hi, di = 4, 6, 3, 4
    pool = torch.randint(-1, 2, (64, di), generator=g).float()
    slots = torch.randint(0, 64, (b, n), generator=g)
    q = torch.randint(-1, 2, (b, tq, hi, di), generator=g).float()
    w = torch.randint(-1, 2, (b, tq, hi), generator=g).float()
    w[0, :2, 0] = float("nan")  # NaN scores rank above everything
    threshold = torch.randint(0, n + 1, (b, tq), generator=g)
    threshold[1] = n
    for totals in ([n] * b, [n, max(n - 2, 0), n + 5, 1]):
        fast, slow = both(ops.indexer_select, q, w, pool, slots, threshold, 0.5, 1.0, topk, totals)
        assert torch.equal(fast, slow)


@pytest.mark.parametrize("bad", [10**9, -1, 160])
def test_slots_outside_the_pools_are_errors_not_reads(bad: int) -> None:
    # The kernels read the pools at the given slots in place; a slot past either end is refused (found by a
    # fuzz of decode_stack's arguments: a huge block size turned the step's slots into reads far outside).
    q, pool = torch.randn(2, 1, 4, 32), torch.randn(10, 16, 32)
    good = torch.tensor([[0, 1, 2], [3, 4, 159]])
    visible = torch.ones(2, 1, 3, dtype=torch.bool)
    slots = good.clone()
    slots[1, 2] = bad
    with pytest.raises(RuntimeError, match="key_slots must be rows of the pool"):
        ops.sink_attention_paged(q, pool, slots, visible, torch.zeros(4), 0.1)
    with pytest.raises(RuntimeError, match="entry_slots must be rows of the pool"):
        ops.sink_attention_paged(q, pool, good, visible, torch.zeros(4), 0.1, pool, slots, None,
                                 torch.tensor([[3], [3]]))
    with pytest.raises(RuntimeError, match="entry_slots must be rows of the pool"):
        ops.indexer_select(torch.randn(2, 1, 4, 32), torch.randn(2, 1, 4), pool.view(-1, 32), slots,
                           torch.tensor([[3], [3]]), 0.25, 0.5, 2, [3, 3])
    ops.sink_attention_paged(q, pool, good, visible, torch.zeros(4), 0.1)  # the last row (159) is fine
