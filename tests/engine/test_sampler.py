"""The sampler's pieces: the nucleus (top-p) filter without a sort of the vocabulary (``top_p_keep``) keeps
exactly the tokens the definition keeps (in order of falling probability, lower IDs first among equals, every
token whose preceding mass is below ``top_p``); a sampled row's draws follow its distribution."""

from __future__ import annotations

import pytest
import torch
from deepseek_engine.core.sampler import exponential_noise, filtered_probs, sample_row, top_p_keep
from deepseek_engine.sampling_params import SamplingParams


def keep_by_sorting(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    order = torch.sort(probs, descending=True, stable=True).indices
    sorted_probs = probs.double()[order]
    before = torch.cumsum(sorted_probs, 0) - sorted_probs
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[order[before < top_p]] = True
    keep[order[0]] = True
    return keep


def rows():
    gen = torch.Generator().manual_seed(0)
    for vocab in (1, 2, 7, 1000, 129280):
        for scale in (0.01, 1.0, 5.0, 40.0):  # flat to peaked
            yield torch.softmax(torch.randn(vocab, generator=gen) * scale, 0)
    # ties: logits on a coarse grid, and a uniform row
    yield torch.softmax(torch.randint(0, 4, (5000,), generator=gen).float(), 0)
    yield torch.full((300,), 1 / 300)
    # zeros (what top-k leaves), and a row whose mass is all in one token
    row = torch.softmax(torch.randn(2000, generator=gen), 0)
    row[torch.randperm(2000, generator=gen)[:1500]] = 0.0
    yield row / row.sum()
    one = torch.zeros(50)
    one[17] = 1.0
    yield one


@pytest.mark.parametrize("top_p", [1e-6, 0.1, 0.5, 0.8, 0.9, 0.95, 0.999, 0.9999999])
def test_the_kept_set_is_the_definitions(top_p):
    for probs in rows():
        got, want = top_p_keep(probs, top_p), keep_by_sorting(probs, top_p)
        assert torch.equal(got, want), (probs.numel(), top_p, int((got != want).sum()))


def test_ties_at_the_threshold_keep_the_lower_ids():
    probs = torch.tensor([0.1, 0.2, 0.2, 0.2, 0.2, 0.1])
    # 0.2 + 0.2 = 0.4 before the third 0.2: below 0.5, so it stays; the fourth (0.6 before) goes.
    assert top_p_keep(probs, 0.5).tolist() == [False, True, True, True, False, False]


def test_filtered_probs_renormalises_the_nucleus():
    logits = torch.tensor([3.0, 2.0, 1.0, 0.0, -1.0])
    p = filtered_probs(logits, SamplingParams(temperature=1.0, top_p=0.8))
    full = torch.softmax(logits, 0)
    keep = keep_by_sorting(full, 0.8)
    assert torch.allclose(p, torch.where(keep, full, 0) / full[keep].sum())
    assert float(p.sum()) == pytest.approx(1.0)


def test_draws_follow_the_distribution():
    probs = torch.tensor([0.5, 0.25, 0.125, 0.0625, 0.0625, 0.0])
    params = SamplingParams(temperature=1.0, seed=0)
    gen = torch.Generator().manual_seed(0)
    n = 20000
    counts = torch.bincount(torch.tensor([sample_row(probs.log(), params, gen) for _ in range(n)]), minlength=6)
    sigma = (n * probs * (1 - probs)).sqrt()
    assert ((counts - n * probs).abs() <= 4 * sigma + 1e-9).all(), counts.tolist()
    assert counts[5] == 0
    noise = exponential_noise(torch.zeros(200000), torch.Generator().manual_seed(1))
    assert noise.dtype == torch.float32 and float(noise.min()) > 0
    assert abs(float(noise.mean()) - 1) < 0.01 and abs(float(noise.var()) - 1) < 0.03


def test_nan_probabilities_keep_every_token_instead_of_failing():
    probs = torch.tensor([0.5, float("nan"), 0.25, 0.25])
    assert top_p_keep(probs, 0.9).all()
    assert top_p_keep(torch.full((5,), float("nan")), 0.5).all()
    negative_nan = torch.tensor([0xFFC00000 - (1 << 32)], dtype=torch.int32).view(torch.float32)
    assert top_p_keep(torch.cat([torch.tensor([0.5, 0.5]), negative_nan]), 0.5).all()
