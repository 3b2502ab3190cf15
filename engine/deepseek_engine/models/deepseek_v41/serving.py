"""Serving glue for DeepSeek V4.1: the model-runner contract over a V4.1 cache pool.

The scheduler and model runner call ``model(input_ids, positions, ctx)`` with a
step context (:mod:`deepseek_engine.core.model_runner`). The V4.1 model runs each
scheduled sequence on its own (so a row never depends on the other rows of its
step), and this wrapper returns only the logits rows the runner asks for.

Sliding-window KV and prefix caching (``swa_replay``):

* ``None``: window KV lives in the pool's blocks like every other piece of state,
  so a prefix-cache hit shares it too (exact; every position holds window KV).
* ``"exact"`` (the default): the pool holds no window KV; each sequence keeps its
  last ``window + step`` positions in a private :class:`WindowRing`. A sequence
  whose step starts where its ring holds nothing (a prefix-cache hit, or a
  recompute after preemption) first replays the last ``num_layers * (window - 1)``
  tokens before its start (:meth:`DeepseekV41ForCausalLM.replay_prefix`): enough
  for every later row to equal a full forward, and bounded by the window and the
  depth, not by the hit's length.
* ``"window"``: the same, replaying only the last ``window`` tokens (vLLM's
  ``swa_bounded_replay``): cheaper, but rows after a hit longer than the window
  differ from a full forward unless the model was trained for it.

Each sequence's ``model_state`` (see :class:`~deepseek_engine.core.sequence.Sequence`)
holds its ring and ``replayed_tokens``, the number of tokens it replayed.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from deepseek_engine.models.deepseek_v4.kv_cache import SequenceCache
from deepseek_engine.models.deepseek_v41.kv_cache import V41CachePool, WindowRing

SWA_REPLAY_MODES = (None, "exact", "window")


class ServedDeepseekV41(nn.Module):
    def __init__(self, model: nn.Module, swa_replay: str | None = "exact") -> None:
        super().__init__()
        if swa_replay not in SWA_REPLAY_MODES:
            raise ValueError(f"swa_replay must be one of {SWA_REPLAY_MODES}, got {swa_replay!r}")
        self.model = model
        self.config = model.config
        self.swa_replay = swa_replay
        self.replay_depth = 0
        if swa_replay is not None:
            self.replay_depth = model.exact_replay_depth() if swa_replay == "exact" else self.config.sliding_window

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx) -> torch.Tensor:
        rings = self._rings(positions, ctx) if self.swa_replay is not None else None
        logits = self.model.forward_batch(input_ids, positions, ctx, rings)
        if ctx.logits_indices is not None and ctx.logits_indices.numel() == 0:
            # Unfinished prefill chunks only: the caches advanced, no row is wanted.
            return torch.empty(0, self.config.vocab_size, device=input_ids.device)
        return logits

    def _rings(self, positions: torch.Tensor, ctx) -> list[WindowRing]:
        """Each sequence's window ring, made ready for this step (replaying where it holds nothing)."""
        states = getattr(ctx, "seq_states", None)
        if states is None:
            raise ValueError("bounded SWA replay needs per-sequence state in the step context (seq_states)")
        starts = ctx.query_start_loc
        rings = []
        for i, state in enumerate(states):
            start, steps = int(positions[starts[i]]), starts[i + 1] - starts[i]
            ring = state.get("window_ring")
            if ring is None:
                ring = state["window_ring"] = WindowRing(self.config, steps, self.model.dtype, self.model.device)
            ring.fit(steps, start)
            if start == 0:
                ring.lo = ring.end = ring.floor = 0
            elif not ring.holds_window_of(start):
                ring.grow(min(self.replay_depth, start), start)  # replay in as few chunks as the bound allows
                cache = SequenceCache(ctx.kv, ctx.block_tables[i], num_tokens=start)
                r0 = self.model.replay_prefix(None, cache, ring, self.replay_depth)
                state["replayed_tokens"] = state.get("replayed_tokens", 0) + start - r0
            rings.append(ring)
        return rings


def wrap_v41(model: nn.Module, max_model_len: int, swa_replay: str | None = "exact") -> tuple[nn.Module, Any, dict]:
    config = model.config
    served = ServedDeepseekV41(model, swa_replay)

    def make_kv(num_blocks: int, block_size: int) -> V41CachePool:
        return V41CachePool(config, num_blocks, block_size, model.dtype, model.device, window_kv=swa_replay is None)

    info = {"vocab_size": config.vocab_size, "eos_token_id": config.eos_token_id, "max_model_len": max_model_len}
    return served, make_kv, info
