"""Triton ``v41_select``: up to three launches, each program on one row and a chunk of its columns.

1. ``candidate_mask_kernel`` (``candidates`` given): the logits outside the row's candidate blocks become -inf;
2. ``block_scores_kernel`` (``write_blocks > 0``): each block's maximum visible logit (NaN if one is NaN), the
   newest visible block pinned to +inf; ``rank_kernel`` then writes each of the best blocks at its rank;
3. ``rank_kernel``: each column's rank in the row's order (larger first, NaN above every number, ties to the
   lower column), counted over the row chunk by chunk; the mask keeps the finite, visible columns of rank < k.

Ranks are counts of comparisons, so the choice is the reference's exactly (no arithmetic on the values).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_I = 64
BLOCK_J = 64


@triton.jit
def candidate_mask_kernel(l_ptr, cand_ptr, out_ptr, N, NC, BS, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < N
    x = tl.load(l_ptr + r * N + cols, mask=ok, other=0.0)
    blk = cols // BS
    keep = cols < 0
    for c in range(NC):
        keep = keep | (blk == tl.load(cand_ptr + r * NC + c))  # negative or too large ids match no column
    tl.store(out_ptr + r * N + cols, tl.where(keep, x, float("-inf")), mask=ok)


@triton.jit
def block_scores_kernel(v_ptr, ends_ptr, out_ptr, N, NB, BS, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    b = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    valid = b < NB
    end = tl.load(ends_ptr + r)
    lim = tl.minimum(tl.maximum(end, 0), N)
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    has_nan = b < 0
    for o in range(BS):
        col = b * BS + o
        x = tl.load(v_ptr + r * N + col, mask=valid & (col < lim), other=float("-inf"))
        nan = x != x
        has_nan = has_nan | nan
        best = tl.maximum(best, tl.where(nan, float("-inf"), x))
    score = tl.where(has_nan, float("nan"), best)
    score = tl.where((end > 0) & (b == (end - 1) // BS), float("inf"), score)
    tl.store(out_ptr + r * NB + b, score, mask=valid)


@triton.jit
def rank_kernel(v_ptr, ends_ptr, out_ptr, M, K, TOPK, OUT_W, BLOCKS: tl.constexpr, BLOCK_I: tl.constexpr,
                BLOCK_J: tl.constexpr):
    r = tl.program_id(0)
    i = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    ivalid = i < M
    vi = tl.load(v_ptr + r * M + i, mask=ivalid, other=0.0)
    nan_i = vi != vi
    rank = tl.zeros([BLOCK_I], dtype=tl.int32)
    for j0 in range(0, M, BLOCK_J):
        j = j0 + tl.arange(0, BLOCK_J)
        vj = tl.load(v_ptr + r * M + j, mask=j < M, other=0.0)
        nan_j = vj != vj
        a, b = vi[:, None], vj[None, :]
        na, nb = nan_i[:, None], nan_j[None, :]
        lower = j[None, :] < i[:, None]
        before = (nb & ~na) | ((na == nb) & ((b > a) | (((b == a) | (na & nb)) & lower)))
        rank += tl.sum((before & (j < M)[None, :]).to(tl.int32), axis=1)
    if BLOCKS:
        ids = tl.where(vi != float("-inf"), i, -1).to(tl.int64)
        tl.store(out_ptr + r * OUT_W + rank, ids, mask=ivalid & (rank < K))
    else:
        end = tl.load(ends_ptr + r)
        seen = ivalid & (i < end)
        picked = seen & (rank < K) & (vi != float("-inf"))
        chosen = tl.where(end <= TOPK, seen, picked)
        tl.store(out_ptr + r * M + i, chosen.to(tl.int8), mask=ivalid)


def v41_select_triton(logits, ends, topk: int, candidates, block_size: int, write_blocks: int):
    rows, n = logits.shape
    if topk < 0 or block_size < 1 or write_blocks < 0:
        raise RuntimeError("v41_select: topk and write_blocks must be >= 0 and block_size >= 1")
    dev = logits.device
    v = logits.float().contiguous()
    ends = ends.contiguous()
    mask = torch.zeros(rows, n, dtype=torch.int8, device=dev)
    chosen = torch.full((rows, write_blocks), -1, dtype=torch.long, device=dev)
    if rows == 0 or n == 0:
        return mask.view(torch.bool), chosen
    if candidates is not None:
        masked = torch.empty_like(v)
        candidate_mask_kernel[(rows, triton.cdiv(n, BLOCK_I))](v, candidates.contiguous(), masked, n,
                                                               candidates.shape[1], block_size, BLOCK=BLOCK_I)
        v = masked
    if write_blocks > 0:
        nb = triton.cdiv(n, block_size)
        scores = torch.empty(rows, nb, dtype=torch.float32, device=dev)
        block_scores_kernel[(rows, triton.cdiv(nb, BLOCK_I))](v, ends, scores, n, nb, block_size, BLOCK=BLOCK_I)
        rank_kernel[(rows, triton.cdiv(nb, BLOCK_I))](scores, ends, chosen, nb, min(write_blocks, nb), 0,
                                                      write_blocks, BLOCKS=True, BLOCK_I=BLOCK_I, BLOCK_J=BLOCK_J)
    rank_kernel[(rows, triton.cdiv(n, BLOCK_I))](v, ends, mask, n, min(topk, n), topk, n, BLOCKS=False,
                                                 BLOCK_I=BLOCK_I, BLOCK_J=BLOCK_J)
    return mask.view(torch.bool), chosen
