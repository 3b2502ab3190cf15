"""Lightning-indexer ops: ``indexer_scores`` (scores of the compressed entries read from the paged pool),
``top_entries`` (the per-query top-k with the reference model's tie order) and ``indexer_select`` (both, and the
threshold, as one call: the mask of the entries each query attends to).

CPU: ``cpu.cpp`` for the scores and for ``indexer_select`` (which ranks with ``at::topk``, the function behind
``torch.topk``, so with its ties). ``top_entries`` is ``torch.topk`` over rows of the reference's length on every
device: the tie order is part of its contract, and it is the order ``torch.topk`` produces.
CUDA / Ascend scores: ``triton.py``.
"""

from __future__ import annotations

import torch

from .._registry import device_impl, entry_point, fake, op
from .reference import indexer_scores_reference, indexer_select_reference, top_entries_reference

_scores = op("indexer_scores")


@fake("indexer_scores")
def _(q, weights, entry_pool, entry_slots, threshold, qscale, wscale):
    return q.new_empty(q.shape[0], q.shape[1], entry_slots.shape[1], dtype=torch.float32)


def _accelerator(q, weights, entry_pool, entry_slots, threshold, qscale, wscale):
    from .triton import indexer_scores_triton

    return indexer_scores_triton(q, weights, entry_pool, entry_slots, threshold, qscale, wscale)


device_impl("indexer_scores", _accelerator, "triton")


indexer_scores = entry_point("indexer_scores", indexer_scores_reference)


@fake("indexer_select")
def _(q, weights, entry_pool, entry_slots, threshold, qscale, wscale, topk, totals):
    return q.new_empty(q.shape[0], q.shape[1], entry_slots.shape[1], dtype=torch.bool)


device_impl("indexer_select", indexer_select_reference, "PyTorch reference")
indexer_select = entry_point("indexer_select", indexer_select_reference)


top_entries = top_entries_reference

__all__ = ["indexer_scores", "indexer_scores_reference", "indexer_select", "indexer_select_reference", "top_entries",
           "top_entries_reference"]
