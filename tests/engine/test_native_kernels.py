"""The optional C kernels (``deepseek_engine.native``) against their PyTorch definitions."""

from __future__ import annotations

import pytest
import torch

from deepseek_engine import native
from deepseek_engine.layers import hyper_connection

pytestmark = pytest.mark.skipif(native.library() is None, reason="no C compiler for the native kernels")


def _torch_only(monkeypatch) -> None:
    monkeypatch.setattr(native, "_lib", None)


@pytest.mark.parametrize("tokens", [1, 7, 32])
def test_hyper_weights_match_torch(monkeypatch, tokens: int) -> None:
    g = torch.Generator().manual_seed(tokens)
    hc, dim = 4, 24
    streams = torch.randn(tokens, hc, dim, generator=g)
    fn = torch.randn((2 + hc) * hc, hc * dim, generator=g) * 0.2
    base = torch.randn((2 + hc) * hc, generator=g) * 0.5
    scale = torch.rand(3, generator=g) + 0.5
    fast = hyper_connection.hyper_weights(streams, fn, base, scale, hc, 20, 1e-6, 1e-6)
    _torch_only(monkeypatch)
    slow = hyper_connection.hyper_weights(streams, fn, base, scale, hc, 20, 1e-6, 1e-6)
    for a, b in zip(fast, slow):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


@pytest.mark.parametrize("tokens", [1, 9, 40])
def test_hyper_merge_matches_torch(monkeypatch, tokens: int) -> None:
    g = torch.Generator().manual_seed(100 + tokens)
    streams = torch.randn(tokens, 4, 24, generator=g)
    block = torch.randn(tokens, 24, generator=g)
    post = torch.rand(tokens, 4, generator=g) * 2
    comb = torch.rand(tokens, 4, 4, generator=g)
    fast = hyper_connection.hyper_merge(streams, block, post, comb)
    _torch_only(monkeypatch)
    slow = hyper_connection.hyper_merge(streams, block, post, comb)
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 9, 32, 300])
def test_greedy_head_is_argmax(rows: int) -> None:
    g = torch.Generator().manual_seed(rows)
    weight = torch.randn(1003, 20, generator=g)  # vocabulary not a multiple of the block width
    x = torch.randn(rows, 20, generator=g)
    picks = native.GreedyHead(weight)(x)
    assert picks is not None
    assert torch.equal(picks, torch.argmax(x @ weight.T, dim=-1))


def test_greedy_head_ties_and_fallbacks() -> None:
    weight = torch.zeros(40, 4)
    weight[[5, 17, 33, 39], 0] = 1.0  # equal logits: the lowest ID wins, as with torch.argmax
    head = native.GreedyHead(weight)
    assert head(torch.ones(3, 4)).tolist() == [5, 5, 5]
    assert head(torch.tensor([[float("nan"), 0, 0, 0]])) is None  # NaN is left to torch
    assert head(torch.ones(2, 4, dtype=torch.float64)) is None
    weight[:] = 0
    weight[39, 1] = 2.0  # the winner sits in the tail after the last full block
    assert head(torch.ones(1, 4)).tolist() == [39]


@pytest.mark.parametrize("dim", [8, 20, 32, 40])
@pytest.mark.parametrize("rows", [1, 9, 70])
def test_greedy_head_integer_filter_matches_float_kernel(rows: int, dim: int) -> None:
    g = torch.Generator().manual_seed(rows * 100 + dim)
    weight = torch.randn(2003, dim, generator=g) / dim**0.5  # not a multiple of the block width
    head, plain = native.GreedyHead(weight), native.GreedyHead(weight, quantized=False)
    for scale in (1e-3, 1.0, 30.0):
        x = torch.randn(rows, dim, generator=g) * scale
        picks = head(x)
        assert head._q8 is not None and picks is not None
        assert torch.equal(picks, plain(x))
        assert torch.equal(picks, torch.argmax(x @ weight.T, dim=-1))


def test_greedy_head_integer_filter_near_ties() -> None:
    g = torch.Generator().manual_seed(7)
    weight = torch.randn(4000, 32, generator=g) * 0.1
    x = torch.randn(5, 32, generator=g)
    top = x[0] / x[0].norm() * 3
    weight[[700, 90, 3999]] = top  # identical logits: the lowest ID wins
    weight[1500] = top * (1 - 2e-7)  # a hair below the maximum
    weight[2500] = top * (1 + 1e-7)  # a hair above (may round to the same float32 logits)
    weight[4] = torch.nextafter(top, torch.full_like(top, -10.0))
    head, plain = native.GreedyHead(weight), native.GreedyHead(weight, quantized=False)
    assert torch.equal(head(x), plain(x))
    x[1] = 0  # all logits zero: the row goes to the float kernel, ID 0
    x[2, :] = 0
    x[2, 5] = 1e-30
    picks = head(x)
    assert torch.equal(picks, plain(x))
    assert picks[1] == 0


def test_greedy_head_integer_filter_overflow_falls_back(monkeypatch) -> None:
    weight = torch.zeros(3000, 32)
    weight[:, 0] = 1.0
    weight[2000:, 0] = 0.5
    weight[2999, 1] = 1.0  # the last lane of the last block
    head = native.GreedyHead(weight)
    monkeypatch.setattr(native.GreedyHead, "CANDIDATES", 16)
    x = torch.tensor([[1.0] + [0.0] * 31, [0.0, 1.0] + [0.0] * 30, [1.0, 0.6] + [0.0] * 30])
    assert head(x).tolist() == torch.argmax(x @ weight.T, dim=-1).tolist() == [0, 2999, 2999]


def test_rotary_matches_torch_exactly(monkeypatch) -> None:
    from deepseek_engine.layers.rotary_embedding import apply_rotary

    g = torch.Generator().manual_seed(7)
    x = torch.randn(5, 3, 32, generator=g)
    cos, sin = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    fast = apply_rotary(x, cos, sin), apply_rotary(x[:, 0], cos, -sin)
    _torch_only(monkeypatch)
    slow = apply_rotary(x, cos, sin), apply_rotary(x[:, 0], cos, -sin)
    for a, b in zip(fast, slow):
        assert torch.equal(a, b)


def test_rms_norms_match_torch(monkeypatch) -> None:
    from deepseek_engine.layers.norm import RMSNorm, unweighted_rms_norm

    g = torch.Generator().manual_seed(3)
    norm = RMSNorm(16, 1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(16, generator=g) + 0.5)
    wide = torch.randn(6, 40, generator=g)
    inputs = [torch.randn(5, 16, generator=g), wide[:, 8:24], torch.randn(2, 3, 16, generator=g)]
    fast = [norm(x) for x in inputs] + [unweighted_rms_norm(x, 1e-6) for x in inputs]
    _torch_only(monkeypatch)
    slow = [norm(x) for x in inputs] + [unweighted_rms_norm(x, 1e-6) for x in inputs]
    for a, b in zip(fast, slow):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_sink_attention_matches_torch() -> None:
    g = torch.Generator().manual_seed(11)
    b, tq, h, k, d = 3, 2, 4, 9, 8
    q, keys = torch.randn(b, tq, h, d, generator=g), torch.randn(b, k, d, generator=g)
    visible = torch.rand(b, tq, k, generator=g) > 0.4
    visible[0, 0] = False  # a row that sees nothing but the sink
    sink = torch.randn(h, generator=g)
    out = native.sink_attention(q, keys, visible, sink, 0.3)
    logits = torch.einsum("bthd,bkd->bthk", q, keys) * 0.3
    logits = torch.where(visible[:, :, None], logits, float("-inf"))
    logits = torch.cat([logits, sink.view(1, 1, h, 1).expand(b, tq, h, 1)], dim=-1)
    probs = logits.softmax(dim=-1)[..., :-1]
    torch.testing.assert_close(out, torch.einsum("bthk,bkd->bthd", probs, keys), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("entries", ["none", "mask", "threshold"])
def test_paged_sink_attention_equals_gathered(entries: str) -> None:
    g = torch.Generator().manual_seed(12)
    b, tq, h, kw, n, d = 3, 2, 4, 21, 6, 16  # groups of eight visible keys and a remainder
    kv_pool, entry_pool = torch.randn(40, 4, d, generator=g), torch.randn(40, 4, d, generator=g)
    key_slots, entry_slots = torch.randint(0, 160, (b, kw), generator=g), torch.randint(0, 160, (b, n), generator=g)
    q, sink = torch.randn(b, tq, h, d, generator=g), torch.randn(h, generator=g)
    win = torch.rand(b, tq, kw, generator=g) > 0.3
    win[1, 1] = False
    keys = kv_pool.view(-1, d)[key_slots]
    visible = win
    kwargs = {}
    if entries != "none":
        keys = torch.cat([keys, entry_pool.view(-1, d)[entry_slots]], dim=1)
        threshold = torch.randint(0, n + 1, (b, tq), generator=g)
        if entries == "mask":
            allowed = torch.rand(b, tq, n, generator=g) > 0.5
            kwargs = dict(entry_visible=allowed)
        else:
            allowed = torch.arange(n)[None, None, :] < threshold[..., None]
            kwargs = dict(threshold=threshold)
        visible = torch.cat([win, allowed], dim=2)
        kwargs.update(entry_pool=entry_pool, entry_slots=entry_slots)
    paged = native.sink_attention_paged(q, kv_pool, key_slots, win, sink, 0.25, **kwargs)
    assert torch.equal(paged, native.sink_attention(q, keys, visible, sink, 0.25))


@pytest.mark.parametrize("score_func", ["sqrtsoftplus", "softmax", "sigmoid"])
@pytest.mark.parametrize("tokens", [1, 33])
def test_moe_experts_match_torch(monkeypatch, score_func: str, tokens: int) -> None:
    from model_fixtures import PLAIN, model

    m = model(PLAIN)
    g = torch.Generator().manual_seed(tokens)
    vocab, hidden = m.config.vocab_size, m.config.hidden_size
    x = torch.randn(tokens, hidden, generator=g) * 2
    ids = torch.randint(0, vocab, (tokens,), generator=g)
    kinds = set()
    for layer in m.layers:
        moe = layer.ffn
        kinds.add(moe.gate.hash_routed)
        monkeypatch.setattr(moe.gate, "score_func", score_func)
        fast = moe._all_experts(x, ids)
        with monkeypatch.context() as patch:
            _torch_only(patch)
            slow = moe._all_experts(x, ids)
        experts, weights = moe.gate(x, ids)
        routed = moe.experts(x, experts, weights) + moe.shared_experts(x)
        torch.testing.assert_close(fast, slow, rtol=0, atol=1e-5)
        torch.testing.assert_close(fast, routed, rtol=0, atol=1e-5)
    assert kinds == {True, False}  # hash-routed and learned layers both covered


@pytest.mark.parametrize("tokens", [1, 13])
def test_hc_step_matches_separate_calls(monkeypatch, tokens: int) -> None:
    from deepseek_engine.layers.norm import RMSNorm

    g = torch.Generator().manual_seed(200 + tokens)
    hc, dim = 4, 24
    streams = torch.randn(tokens, hc, dim, generator=g)
    block = torch.randn(tokens, dim, generator=g)
    post = torch.rand(tokens, hc, generator=g) * 2
    comb = torch.rand(tokens, hc, hc, generator=g)
    fn = torch.randn((2 + hc) * hc, hc * dim, generator=g) * 0.2
    base = torch.randn((2 + hc) * hc, generator=g) * 0.5
    scale = torch.rand(3, generator=g) + 0.5
    norm = RMSNorm(dim, 1e-6)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.1 * torch.randn(dim, generator=g))
    for merge in (False, True):
        args = (block, post, comb) if merge else (None, None, None)
        fast = native.hc_step(streams, *args, fn, base, scale, hc, 20, 1e-6, 1e-6, norm.weight.detach())
        assert fast is not None
        with monkeypatch.context() as patch:
            _torch_only(patch)
            merged = hyper_connection.hyper_merge(streams, block, post, comb) if merge else streams
            p, c, x = hyper_connection.hyper_weights(merged, fn, base, scale, hc, 20, 1e-6, 1e-6)
            want = (merged, p, c, norm(x))
        for a, b in zip(fast, want):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_engine_native_step_equals_pytorch_step(monkeypatch) -> None:
    """The whole batched step (fused boundaries, attention front, paged attention, indexer, experts, head)
    against the PyTorch code paths: logits within float32 rounding, identical greedy tokens."""
    from deepseek_engine import LLM, SamplingParams
    from model_fixtures import PLAIN, model, reference

    ref = reference("tiny_v4")
    prompts = [ref[f"generate_{i}.input_ids"].tolist() for i in (0, 1)]
    ids = ref["prefill_0.input_ids"].tolist()
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)

    def run():
        # A 37-token budget mixes prefill chunks of different lengths with decodes in one step.
        llm = LLM.from_model(model(PLAIN), max_model_len=512, max_num_batched_tokens=37, block_size=8)
        return llm.forward_logits(ids), [o.token_ids for o in llm.generate(prompts * 2, params)]

    fast = run()
    _torch_only(monkeypatch)
    slow = run()
    torch.testing.assert_close(fast[0], slow[0], rtol=0, atol=1e-5)
    assert fast[1] == slow[1]


def test_vector_exp_is_within_two_ulps() -> None:
    x = torch.cat([torch.linspace(-87.3, 88.3, 200003), torch.tensor([0.0, -0.0, 1e-8, -1e-8, -90.0, -1e4]),
                   torch.randn(1001) * 10])
    out = torch.empty_like(x)
    native.library().exp_lanes(x.data_ptr(), x.numel(), out.data_ptr())
    exact = torch.exp(x.double())
    ulp = torch.nextafter(exact.float(), torch.tensor(float("inf"))).double() - exact.float().double()
    keep = exact > 1.2e-38  # normal range; below it the kernel returns 0
    err = ((out.double() - exact).abs() / ulp)[keep]
    assert float(err.max()) <= 2.0
    assert torch.all(out[~keep] == 0)
    assert out[x == 0].eq(1).all()


@pytest.mark.parametrize("tokens", [1, 19])
def test_attention_back_matches_torch(tokens: int) -> None:
    from deepseek_engine.layers.attention import GroupedOutputProjection
    from deepseek_engine.layers.rotary_embedding import apply_rotary_tables, rotary_tables

    g = torch.Generator().manual_seed(300 + tokens)
    h, d, groups, rank, hidden, rope = 4, 32, 2, 16, 24, 8
    x = torch.randn(tokens, h, d, generator=g)
    angles = torch.rand(tokens, rope // 2, generator=g) * 6
    c, s = rotary_tables(angles.cos(), angles.sin())
    wo_a = GroupedOutputProjection(h * d // groups, groups * rank, groups)
    with torch.no_grad():
        wo_a.weight.copy_(torch.randn(groups * rank, h * d // groups, generator=g) * 0.2)
    wo_b = torch.randn(hidden, groups * rank, generator=g) * 0.2
    fast = native.attn_back(x, c, -s, wo_a.weight.detach(), groups, wo_b)
    with torch.no_grad():
        rotated = x.clone()
        rotated[..., -rope:] = apply_rotary_tables(x, c, -s)[..., -rope:]
        want = torch.nn.functional.linear(wo_a(rotated.reshape(tokens, groups, -1)), wo_b)
    torch.testing.assert_close(fast, want, rtol=0, atol=1e-5)


def test_step_rotary_tables_match_direct_evaluation(monkeypatch) -> None:
    from deepseek_engine import batched_attention
    from deepseek_engine.layers.rotary_embedding import rotary_tables
    from model_fixtures import PLAIN, model

    rope = model(PLAIN).compress_rope
    for positions in (torch.tensor([0, 5, 77, 3000]), torch.arange(1500, 1530)):
        for limit in (1 << 16, 100):  # whole-position tables, and per-step evaluation past the limit
            monkeypatch.setattr(batched_attention, "_MAX_TABLE_POSITIONS", limit)
            layout = batched_attention.StepLayout(positions, positions, [0, positions.numel()],
                                                  [list(range(200))], 16, 64)
            cos, sin = rope(positions, torch.float32)
            c, s = rotary_tables(cos, sin)
            got_c, got_s = layout.rope_tables(rope, torch.float32)
            torch.testing.assert_close(got_c, c, rtol=0, atol=1e-6)
            torch.testing.assert_close(got_s, s, rtol=0, atol=1e-6)
            torch.testing.assert_close(layout.rope_tables(rope, torch.float32, inverse=True)[1], -s, rtol=0, atol=1e-6)
