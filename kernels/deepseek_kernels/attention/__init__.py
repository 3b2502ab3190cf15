"""Attention with a sink logit (sliding window plus compressed / sparse entries).

* ``sink_attention(q, keys, visible, sink, scale)``: keys already gathered per sequence (prefill, any dtype).
* ``sink_attention_paged(q, kv_pool, key_slots, win_visible, sink, scale, entry_pool, entry_slots,
  entry_visible | threshold)``: keys read in place from the paged pools (decode): the window rows, then the
  compressed entries, visible by mask (CSA: the indexer's picks) or below a per-query count (HCA).

CPU: ``cpu.cpp``. CUDA / Ascend: the Triton kernel of ``triton.py`` (online softmax seeded with the sink).
"""

from __future__ import annotations

import torch

from .._mode import reference_mode
from .._registry import device_impl, entry_point, fake, op
from .reference import gather_paged_keys, sink_attention_paged_reference, sink_attention_reference

_dense, _paged = op("sink_attention"), op("sink_attention_paged")


@fake("sink_attention")
def _(q, keys, visible, sink, scale):
    return torch.empty_like(q)


@fake("sink_attention_paged")
def _(q, kv_pool, key_slots, win_visible, sink, scale, entry_pool=None, entry_slots=None, entry_visible=None,
      threshold=None):
    return torch.empty_like(q)


def _dense_accelerator(q, keys, visible, sink, scale):
    from .triton import sink_attention_triton

    return sink_attention_triton(q, keys, visible, sink, scale)


def _paged_accelerator(q, kv_pool, key_slots, win_visible, sink, scale, entry_pool=None, entry_slots=None,
                       entry_visible=None, threshold=None):
    from .triton import sink_attention_triton

    keys, visible = gather_paged_keys(kv_pool, key_slots, win_visible, entry_pool, entry_slots, entry_visible,
                                      threshold)
    return sink_attention_triton(q, keys, visible, sink, scale)


device_impl("sink_attention", _dense_accelerator, "triton")
device_impl("sink_attention_paged", _paged_accelerator, "gather rows (torch indexing) + triton sink_attention")


sink_attention = entry_point("sink_attention", sink_attention_reference)


def sink_attention_paged(q, kv_pool, key_slots, win_visible, sink, scale: float, entry_pool=None, entry_slots=None,
                         entry_visible=None, threshold=None):
    if reference_mode():
        return sink_attention_paged_reference(q, kv_pool, key_slots, win_visible, sink, scale, entry_pool,
                                              entry_slots, entry_visible, threshold)
    return _paged(q, kv_pool, key_slots, win_visible, sink, scale, entry_pool, entry_slots, entry_visible, threshold)


__all__ = ["sink_attention", "sink_attention_paged", "sink_attention_reference", "sink_attention_paged_reference"]
