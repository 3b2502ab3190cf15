"""``v41_select(logits, ends, topk, candidates, block_size, write_blocks)``: the entries each query of a V4.1
index source attends to, and the candidate blocks it publishes (see ``reference.py``), as one call instead of
a sort and some thirty small tensor operations per layer and step.

The result is a choice, not arithmetic: every implementation gives exactly the reference's masks and block
ids (same ties: equal values go to the lower column; NaN ranks above every number, as in ``torch.sort``).
CPU: ``cpu.cpp`` (per row a selection over a total order). CUDA / Ascend: the Triton kernels of ``triton.py``.
"""

from __future__ import annotations

import torch

from .._registry import entry_point, fake, triton_impl
from .reference import (
    apply_candidate_mask,
    select_candidate_blocks,
    stable_topk,
    topk_mask,
    v41_select_reference,
)


@fake("v41_select")
def _(logits, ends, topk, candidates, block_size, write_blocks):
    r, e = logits.shape
    return logits.new_empty(r, e, dtype=torch.bool), logits.new_empty(r, max(write_blocks, 0), dtype=torch.long)


triton_impl("v41_select", "v41_select.triton", "v41_select_triton")


v41_select = entry_point("v41_select", v41_select_reference)


__all__ = ["apply_candidate_mask", "select_candidate_blocks", "stable_topk", "topk_mask", "v41_select",
           "v41_select_reference"]
