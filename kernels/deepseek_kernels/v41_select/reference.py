"""PyTorch reference of ``v41_select``: which compressed entries each query of a V4.1 index source attends to.

Three steps, each row on its own (the definitions checked against vLLM's V4.1 indexer, see
``engine/deepseek_engine/models/deepseek_v41/indexer.py``):

* ``apply_candidate_mask``: a reading layer keeps only the columns of the candidate blocks another layer chose;
* ``select_candidate_blocks``: the candidate source picks its best blocks (a block scores the maximum of its
  visible logits; the block of the newest visible column is pinned);
* ``topk_mask``: the ``topk`` largest logits of a row (ties to the lower column; rows that see at most ``topk``
  entries take all of them).
"""

from __future__ import annotations

import torch


def stable_topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row-wise top-``k`` where equal values go to the lower index.

    ``torch.topk`` breaks ties in a way that depends on the row's length, and
    relu scores tie often (exact zeros); a stable order keeps the choice the
    same whether a prompt arrives in one piece or in chunks.
    """
    values, indices = torch.sort(x, dim=-1, descending=True, stable=True)
    return values[..., :k], indices[..., :k]


def select_candidate_blocks(logits: torch.Tensor, ends: torch.Tensor, topk_blocks: int, block_size: int) -> torch.Tensor:
    """Per row, the ids of the ``topk_blocks`` best blocks (``-1`` padded), ``[T, topk_blocks]``.

    A block's score is the maximum of its logits among the row's visible
    columns ``[0, ends[t])``; the block holding column ``ends[t] - 1`` scores
    ``+inf``. Blocks without a visible column are never picked.
    """
    t, n = logits.shape
    out = torch.full((t, topk_blocks), -1, dtype=torch.long, device=logits.device)
    if n == 0:
        return out
    nblocks = -(-n // block_size)
    cols = torch.arange(n, device=logits.device)
    valid = cols[None, :] < ends[:, None]
    padded = torch.full((t, nblocks * block_size), float("-inf"), dtype=torch.float32, device=logits.device)
    padded[:, :n] = logits.float().masked_fill(~valid, float("-inf"))
    scores = padded.view(t, nblocks, block_size).amax(dim=-1)
    newest = ((ends - 1).clamp_min(0) // block_size)
    pinned = (ends > 0)[:, None] & (torch.arange(nblocks, device=logits.device)[None, :] == newest[:, None])
    scores = scores.masked_fill(pinned, float("inf"))
    k = min(topk_blocks, nblocks)
    values, indices = stable_topk(scores, k)
    out[:, :k] = torch.where(values != float("-inf"), indices, torch.full_like(indices, -1))
    return out


def apply_candidate_mask(logits: torch.Tensor, candidates: torch.Tensor, block_size: int) -> torch.Tensor:
    """``logits`` with every column outside the row's candidate blocks set to ``-inf``."""
    t, n = logits.shape
    if n == 0:
        return logits
    nblocks = -(-n // block_size)
    keep_block = torch.zeros((t, nblocks + 1), dtype=torch.bool, device=logits.device)
    ids = torch.where(candidates >= 0, candidates.clamp_max(nblocks), torch.full_like(candidates, nblocks))
    keep_block.scatter_(1, ids, True)
    keep = keep_block[:, :nblocks].repeat_interleave(block_size, dim=1)[:, :n]
    return logits.masked_fill(~keep, float("-inf"))


def topk_mask(logits: torch.Tensor, ends: torch.Tensor, topk: int) -> torch.Tensor:
    """Boolean ``[T, N]``: the entries each row attends to.

    Rows that see at most ``topk`` entries take all of them; other rows take
    their ``topk`` largest finite logits.
    """
    t, n = logits.shape
    cols = torch.arange(n, device=logits.device)
    visible = cols[None, :] < ends[:, None]
    if n == 0:
        return visible
    k = min(topk, n)
    values, indices = stable_topk(logits, k)
    picked = torch.zeros((t, n + 1), dtype=torch.bool, device=logits.device)
    idx = torch.where(values != float("-inf"), indices, torch.full_like(indices, n))
    picked.scatter_(1, idx, True)
    picked = picked[:, :n] & visible
    short = ends <= topk
    return torch.where(short[:, None], visible, picked)


def v41_select_reference(logits: torch.Tensor, ends: torch.Tensor, topk: int, candidates: torch.Tensor | None,
                         block_size: int, write_blocks: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mask [R, E] bool, chosen [R, write_blocks] int64)`` for float32 ``logits [R, E]`` and ``ends [R]``.

    ``candidates`` (``[R, C]`` block ids, ``-1`` unused): the logits outside those blocks of ``block_size``
    columns become ``-inf`` first. ``write_blocks > 0``: ``chosen`` are the row's best ``write_blocks`` blocks
    of the (masked) logits (``select_candidate_blocks``); otherwise ``chosen`` is ``[R, 0]``. ``mask`` is
    ``topk_mask`` of the (masked) logits.
    """
    logits = logits.float()
    if candidates is not None:
        logits = apply_candidate_mask(logits, candidates, block_size)
    if write_blocks > 0:
        chosen = select_candidate_blocks(logits, ends, write_blocks, block_size)
    else:
        chosen = torch.empty(logits.shape[0], 0, dtype=torch.long, device=logits.device)
    return topk_mask(logits, ends, topk), chosen
