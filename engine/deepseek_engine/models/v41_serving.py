"""Serving glue for DeepSeek V4.1: the model-runner contract over a V4.1 cache pool.

The scheduler and model runner call ``model(input_ids, positions, ctx)`` with a
step context (:mod:`deepseek_engine.model_runner`). The V4.1 model runs each
scheduled sequence on its own (so a row never depends on the other rows of its
step), and this wrapper returns only the logits rows the runner asks for.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from deepseek_engine.kv_cache_v41 import V41CachePool


class ServedDeepseekV41(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.config = model.config

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx) -> torch.Tensor:
        if ctx.logits_indices is not None and ctx.logits_indices.numel() == 0:
            # Unfinished prefill chunks only: the caches still advance.
            self.model.forward_batch(input_ids, positions, ctx)
            return torch.empty(0, self.config.vocab_size, device=input_ids.device)
        return self.model.forward_batch(input_ids, positions, ctx)


def wrap_v41(model: nn.Module, max_model_len: int) -> tuple[nn.Module, Any, dict]:
    config = model.config

    def make_kv(num_blocks: int, block_size: int) -> V41CachePool:
        return V41CachePool(config, num_blocks, block_size, model.dtype, model.device)

    info = {"vocab_size": config.vocab_size, "eos_token_id": config.eos_token_id, "max_model_len": max_model_len}
    return ServedDeepseekV41(model), make_kv, info
