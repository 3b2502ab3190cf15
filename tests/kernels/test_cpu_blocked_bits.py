"""The CPU kernels that work on groups of tokens (``hc_step``: sixteen tokens per AVX-512 register) give, bit for
bit, the composition of the per-token kernels they replaced, on shapes the benchmark never takes: token counts
that are not multiples of sixteen (one token, partial last groups of nine to fifteen tokens, last groups of at
most eight, which run token by token), ``hc`` other than 4 and widths that are not multiples of eight or sixteen.

The old ``hc_step`` was ``hc_merge``, ``rms_norm`` of the flattened streams, ``small_linear`` (the mix
projection) and ``hc_mix``, then the weighted ``rms_norm``; all but ``small_linear`` are ops of their own, and
``small_linear``'s order of float32 operations is written out below with single elementwise torch operations
(each one IEEE rounding, like the kernel's lane arithmetic).
"""

from __future__ import annotations

import deepseek_kernels as ops
import pytest
import torch


def small_linear_bits(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x [T, n] @ w [m, n].T`` in ``small_linear``'s order: from n >= 8 on, eight running sums (column k into
    sum k mod 8, below the last multiple of eight) added up in lane order; then the remaining columns one by
    one; every sum starts from +0."""
    t, n = x.shape
    m = w.shape[0]
    prod = x[:, None, :] * w[None, :, :]
    n8 = n - n % 8 if n >= 8 else 0
    total = torch.zeros(t, m)
    if n8:
        acc = torch.zeros(t, m, 8)
        for k in range(0, n8, 8):
            acc = acc + prod[:, :, k:k + 8]
        for lane in range(8):
            total = total + acc[:, :, lane]
    for k in range(n8, n):
        total = total + prod[:, :, k]
    return total


def hc_step_composed(streams, block, post_prev, comb_prev, fn, base, scale, hc, iters, hc_eps, norm_eps, weight,
                     block_eps):
    """``hc_step`` as the chain of per-token kernels it fuses."""
    t = streams.shape[0]
    merged = ops.hc_merge(streams, block, post_prev, comb_prev) if block is not None else streams.clone()
    flat = ops.rms_norm(merged.reshape(t, -1), None, norm_eps)
    _, post, comb, collapsed = ops.hc_mix(small_linear_bits(flat, fn), base, scale, hc, iters, hc_eps, merged)
    return merged, post, comb, ops.rms_norm(collapsed, weight, block_eps)


def hc_inputs(seed: int, tokens: int, hc: int, dim: int):
    g = torch.Generator().manual_seed(seed)
    mix = (2 + hc) * hc
    streams = torch.randn(tokens, hc, dim, generator=g)
    block, post = torch.randn(tokens, dim, generator=g), torch.rand(tokens, hc, generator=g) * 2
    comb = torch.rand(tokens, hc, hc, generator=g)
    fn = torch.randn(mix, hc * dim, generator=g) * 0.2
    base, scale = torch.randn(mix, generator=g) * 0.5, torch.rand(3, generator=g) + 0.5
    weight = 1 + 0.1 * torch.randn(dim, generator=g)
    return streams, block, post, comb, fn, base, scale, weight


@pytest.mark.parametrize(("tokens", "hc", "dim"), [
    (1, 4, 32), (15, 4, 32), (16, 4, 32), (33, 4, 32),  # decode's one token, partial and whole groups
    (17, 4, 5), (9, 4, 12), (20, 4, 40),                # widths not multiples of 8 / 16 (hc * dim >= 16)
    (7, 1, 3), (18, 1, 9), (5, 2, 7), (21, 3, 24),      # hc other than 4; flattened widths under 8, under 16
    (3, 8, 2), (19, 5, 16), (12, 3, 5), (10, 8, 3),     # partial groups of nine to fifteen tokens, other hc
    (18, 4, 256),                                       # a group's scratch too large for the stack
])
@pytest.mark.parametrize("merge", [False, True])
def test_hc_step_is_the_composition_of_the_per_token_kernels(tokens, hc, dim, merge) -> None:
    streams, block, post, comb, fn, base, scale, weight = hc_inputs(300 + 7 * tokens + hc + dim, tokens, hc, dim)
    args = (block, post, comb) if merge else (None, None, None)
    iters = 20 if hc == 4 else 3
    got = ops.hc_step(streams, *args, fn, base, scale, hc, iters, 1e-6, 1e-6, weight, 1e-5)
    want = hc_step_composed(streams, *args, fn, base, scale, hc, iters, 1e-6, 1e-6, weight, 1e-5)
    for a, b in zip(got, want):
        assert a.shape == b.shape and torch.equal(a, b)



def test_exp_lanes_gives_every_position_the_one_lane_bits() -> None:
    """``exp_lanes`` takes sixteen, then eight, then one value at a time (the MoE activations use it): the same
    bits wherever a value sits, over the clamps' edges, zeros, infinities and NaN."""
    g = torch.Generator().manual_seed(4)
    special = torch.tensor([0.0, -0.0, 88.3762626, 88.38, 89.0, -87.3365447, -87.34, -104.0, 1e-30, -1e-30,
                            float("inf"), float("-inf"), float("nan"), 0.5, -0.5, 20.0])
    x = torch.cat([special, torch.randn(61, generator=g) * 30, special.flip(0)])
    whole = torch.ops.deepseek_kernels.exp_lanes(x)
    one_by_one = torch.cat([torch.ops.deepseek_kernels.exp_lanes(v.reshape(1)) for v in x])
    assert torch.equal(whole.view(torch.int32), one_by_one.view(torch.int32))
    for start in (1, 5, 9):  # every value at another lane of another width
        assert torch.equal(torch.ops.deepseek_kernels.exp_lanes(x[start:]).view(torch.int32),
                           one_by_one[start:].view(torch.int32))


def moe_dense_composed(y, e, inter, topk, score_func, tid2eid, ids, bias, scale, limit, down):
    """``moe_dense_experts`` from the routing op (the kernel's scores and weights), ``exp_lanes`` (its exponential)
    and single elementwise operations in the kernel's order: per column, each expert's down projection summed
    from +0 over its intermediate rows in order, then weighted into the output in increasing expert order, the
    shared expert last."""
    t, h = y.shape[0], down.shape[-1]
    experts, weights = ops.route(y[:, :e].contiguous(), topk, score_func, tid2eid, ids, bias, scale)
    order = experts.argsort(dim=-1, stable=True)
    experts, weights = experts.gather(-1, order), weights.gather(-1, order)
    gate_up = y[:, e:].reshape(t, 2, e + 1, inter)
    out = torch.empty(t, h)
    for row in range(t):
        chosen = experts[row].tolist() + [e]
        for j, ex in enumerate(chosen):
            g, u = gate_up[row, 0, ex], gate_up[row, 1, ex]
            a = torch.where(g < limit, g, torch.tensor(limit))
            ea = torch.ops.deepseek_kernels.exp_lanes(-a)
            b = torch.where(u < -limit, torch.tensor(-limit), torch.where(u > limit, torch.tensor(limit), u))
            act = (a / (1.0 + ea)) * b
            acc = torch.zeros(h)
            for i in range(inter):
                acc = acc + act[i] * down[ex, i]
            if j == 0:
                out[row] = acc * weights[row, 0]
            elif j < topk:
                out[row] = out[row] + acc * weights[row, j]
            else:
                out[row] = out[row] + acc
    return out


@pytest.mark.parametrize(("tokens", "e", "inter", "hidden", "topk"), [
    (1, 4, 32, 32, 2),     # the benchmark's shape, decode's single token
    (5, 4, 12, 40, 2),     # 32 + 8 columns: a register pair of 16 and a tail
    (3, 6, 7, 20, 4),      # 16 + 4 columns; five experts a token: a group of four and one more
    (4, 3, 5, 8, 1),       # under sixteen columns: the one-column loop only
    (2, 8, 3, 16, 7),      # eight experts a token: two groups of four
])
@pytest.mark.parametrize(("score_func", "hashed"), [("sqrtsoftplus", False), ("sqrtsoftplus", True),
                                                   ("softmax", True), ("sigmoid", False)])
def test_moe_dense_experts_is_the_composition_of_its_steps(tokens, e, inter, hidden, topk, score_func, hashed) -> None:
    g = torch.Generator().manual_seed(tokens * 100 + e * 10 + topk)
    vocab = 30
    y = torch.randn(tokens, e + 2 * (e + 1) * inter, generator=g) * 2
    y[0, e:e + 3] = torch.tensor([7.5, 12.0, -9.0])  # gates past the limit
    down = torch.randn(e + 1, inter, hidden, generator=g) * 0.3
    ids = torch.randint(0, vocab, (tokens,), generator=g)
    tid2eid = torch.stack([torch.randperm(e, generator=g)[:topk] for _ in range(vocab)])
    args = (tid2eid, ids, None) if hashed else (None, None, torch.randn(e, generator=g) * 0.1)
    got = ops.moe_dense_experts(y, e, inter, topk, score_func, *args, 1.5, 7.0, down)
    want = moe_dense_composed(y, e, inter, topk, score_func, *args, 1.5, 7.0, down)
    assert torch.equal(got, want)


def test_moe_hash_routing_checks_ids_and_table_entries() -> None:
    """Hash routing reads tid2eid rows by input id: an id past the table or a row entry that is not an expert
    index is refused by name, before any work."""
    e, inter, topk = 4, 3, 2
    y = torch.randn(3, e + 2 * (e + 1) * inter)
    down = torch.randn(e + 1, inter, 5)
    tid2eid = torch.tensor([[0, 1], [2, 3], [1, 9]])
    for ids, what in ((torch.tensor([0, 3, 1]), "input ids must index tid2eid"),
                      (torch.tensor([0, -1, 1]), "input ids must index tid2eid"),
                      (torch.tensor([0, 2, 1]), "tid2eid entries must be expert indices")):
        for call in (lambda: ops.moe_dense_experts(y, e, inter, topk, "sqrtsoftplus", tid2eid, ids, None, 1.0, 7.0,
                                                   down),
                     lambda: ops.route(y[:, :e].contiguous(), topk, "sqrtsoftplus", tid2eid, ids)):
            with pytest.raises(RuntimeError, match=what):
                call()
    unused_bad_row = ops.moe_dense_experts(y, e, inter, topk, "sqrtsoftplus", tid2eid, torch.tensor([0, 1, 1]), None,
                                           1.0, 7.0, down)
    assert unused_bad_row.shape == (3, 5)
