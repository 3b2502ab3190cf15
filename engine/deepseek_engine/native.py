"""Former home of the engine's C kernels; they now live in the ``deepseek_kernels`` package.

Kept so that ``from deepseek_engine.native import ...`` keeps working: each name forwards to the
``deepseek_kernels`` op of the same job. Unlike the old ctypes functions these never return ``None``;
an unsupported argument raises an error naming the op. New code imports ``deepseek_kernels`` directly.
"""

from __future__ import annotations

import deepseek_kernels as ops
from deepseek_kernels import GreedyHead  # noqa: F401

hc_mix = ops.hc_mix
hc_merge = ops.hc_merge
rms_norm = ops.rms_norm
rope_apply = ops.rope
sink_attention = ops.sink_attention
sink_attention_paged = ops.sink_attention_paged
indexer_scores = ops.indexer_scores
attn_back = ops.attn_back


def library():
    """The compiled kernels module (importing ``deepseek_kernels`` fails when it is missing)."""
    from deepseek_kernels import _C

    return _C
