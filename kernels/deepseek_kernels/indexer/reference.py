"""PyTorch definitions of the lightning indexer: entry scores, the top-k choice with the reference's ties, and
the two composed into the mask of the entries each query attends to."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def indexer_scores_reference(q, weights, entry_pool, entry_slots, threshold, qscale: float, wscale: float):
    """``[B, Tq, N]``: ``sum_h relu(q[h] . entry) * qscale * weights[h] * wscale``, ``-inf`` from ``threshold`` on."""
    b, tq, hi, di = q.shape
    n = entry_slots.shape[1]
    keys = entry_pool.reshape(-1, di)[entry_slots.flatten()].view(b, n, di).float()
    scores = torch.matmul(q.float(), keys[:, None].transpose(-1, -2))  # [B, Tq, H, N]
    scores = F.relu(scores) * qscale
    scores = (scores * (weights.float() * wscale)[..., None]).sum(dim=2)
    entry = torch.arange(n, device=q.device)
    return scores.masked_fill(entry[None, None, :] >= threshold[..., None], float("-inf"))


def top_entries_reference(scores: torch.Tensor, topk: int, totals: list[int]) -> torch.Tensor:
    """Indices of the best ``topk`` entries per query, ``[B, Tq, k]``; indices ``>= N`` are padding.

    Scores often tie exactly (the ReLU zeroes every head) and ``torch.topk`` breaks ties depending on the row
    length, so sequence ``b`` is ranked over a row of exactly ``totals[b]`` entries (padded with ``-inf`` or
    cut), the length of the reference model's row for that query.
    """
    b, tq, n = scores.shape
    if all(total == n for total in totals):
        return scores.topk(min(topk, n), dim=-1).indices
    k = min(topk, max(totals))
    picked = torch.full((b, tq, k), n, dtype=torch.long, device=scores.device)
    for i, total in enumerate(totals):
        if total:
            row = scores[i, :, :total]
            if total > n:
                row = F.pad(row, (0, total - n), value=float("-inf"))
            k_i = min(topk, total)
            picked[i, :, :k_i] = row.topk(k_i, dim=-1).indices
    return picked


def indexer_select_reference(q, weights, entry_pool, entry_slots, threshold, qscale: float, wscale: float, topk: int,
                             totals: list[int]) -> torch.Tensor:
    """``[B, Tq, N]`` bool: the entries each query attends to, the indexer's scores ranked by
    :func:`top_entries_reference` (rows of ``totals[b]`` entries) and kept where below the query's ``threshold``."""
    scores = indexer_scores_reference(q, weights, entry_pool, entry_slots, threshold, qscale, wscale)
    b, tq, n = scores.shape
    if n == 0 or tq == 0:
        return torch.zeros((b, tq, n), dtype=torch.bool, device=q.device)
    picked = top_entries_reference(scores, topk, totals)
    picked = torch.where(picked < threshold[..., None], picked, torch.full_like(picked, n))
    allowed = torch.zeros((b, tq, n + 1), dtype=torch.bool, device=q.device)
    allowed.scatter_(2, picked, True)
    return allowed[..., :n]
