"""Paged per-sequence state of DeepSeek V4.1 models.

Same addressing as :mod:`deepseek_engine.models.deepseek_v4.kv_cache` (rows by token position
through a :class:`~deepseek_engine.models.deepseek_v4.kv_cache.SequenceCache` block table; every
row of block ``b`` depends only on the sequence's tokens up to the end of block
``b``, so full blocks can be shared by prefix caching), with V4.1's tensors:

* ``token_ids`` ``[num_blocks, block_size]`` (pool-wide): each position's token
  id, read back as the engram's lookback at a chunk's start;
* per layer ``kv``: the sliding-window key/value of every token (all layers),
  unless the pool is built with ``window_kv=False``: then every sequence keeps
  its window KV in a private :class:`WindowRing` and a prefix-cache hit rebuilds
  it by bounded replay (``models/deepseek_v41/serving.py``);
* KV-source layers only:

  - ``raw`` (ratio 2): the float32 compressor rows ``[kv | score]`` of every
    token; a group whose first token came in an earlier chunk (or speculative
    step) is pooled from these rows;
  - ``entries``: the rotated compressed entry of each group, in the row of the
    token that closes it (``(g + 1) * r - 1``);
  - ``index_keys`` (when the layer is also an index source): the group's
    index key, in the same row.

Other compressed layers own no compressed state: they read their KV source's
``entries``/``index_keys``. Nothing here depends on a step's batch or on how a
sequence was split into chunks. A rejected speculative token leaves rows that
no later step reads before rewriting them (rows are read only below the
sequence's ``num_tokens``), so rolling back is setting ``num_tokens`` back.
"""

from __future__ import annotations

import torch

from deepseek_engine.models.deepseek_v4.kv_cache import PagedPool, SequenceCache
from deepseek_engine.models.deepseek_v41.config import DeepseekV41ModelConfig


class V41LayerPool:
    """Tensors of one decoder layer (see the module docstring)."""

    def __init__(self, config: DeepseekV41ModelConfig, layer_idx: int, num_blocks: int, block_size: int,
                 dtype: torch.dtype, device: torch.device, window_kv: bool = True) -> None:
        shape = (num_blocks, block_size)

        def alloc(width: int, dt: torch.dtype = dtype) -> torch.Tensor:
            return torch.zeros(*shape, width, dtype=dt, device=device)

        self.ratio = config.ratio(layer_idx)
        self.kv = alloc(config.head_dim) if window_kv else None
        self.raw = self.entries = self.index_keys = None
        if layer_idx in config.kv_source_layer_ids:
            if self.ratio == 2:
                self.raw = alloc(2 * config.head_dim, torch.float32)
            self.entries = alloc(config.head_dim)
            if layer_idx in config.index_source_layer_ids:
                self.index_keys = alloc(config.index_head_dim)


class V41CachePool(PagedPool):
    """Block-paged storage for every layer of a V4.1 model, plus the pool-wide ``token_ids``."""

    layer_pool = V41LayerPool

    def __init__(self, config: DeepseekV41ModelConfig, num_blocks: int, block_size: int = 16,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
                 window_kv: bool = True) -> None:
        super().__init__(config, num_blocks, block_size, dtype, device, window_kv=window_kv)
        self.token_ids = torch.zeros(num_blocks, block_size, dtype=torch.long, device=self.device)
        self.window_kv = window_kv

    def bytes_per_token(self) -> dict[str, int]:
        """Cache bytes each token occupies, split into sliding-window KV and everything else."""
        swa = sum(lp.kv[0, 0].numel() * lp.kv.element_size() for lp in self.layers if lp.kv is not None)
        other = self.token_ids.element_size()
        for lp in self.layers:
            for t in (lp.raw, lp.entries, lp.index_keys):
                if t is not None:
                    other += t[0, 0].numel() * t.element_size()
        return {"window_kv": swa, "other": other}


def fresh_v41_cache(config: DeepseekV41ModelConfig, num_tokens: int, block_size: int = 16,
                    dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> SequenceCache:
    """A private pool sized for ``num_tokens`` tokens with an identity block table."""
    return V41CachePool.fresh_sequence(config, num_tokens, block_size, dtype, device)


class WindowRing:
    """Private sliding-window KV of one sequence, ``window + max_step`` rows per layer, reused in a ring.

    Position ``p`` lives in row ``p % size``. A step of ``t <= max_step`` tokens
    starting at ``s`` reads positions ``s - window + 1 .. s + t - 1``, all distinct
    modulo ``size``. ``lo`` is the lowest position the ring was ever filled from
    (the ``replay_start`` of its last replay, 0 otherwise): window reads never reach
    below it. ``end`` is one past the highest position written. A resize keeps only the window before
    the step it happens at (``floor``): a later step starting below that needs a replay.
    """

    def __init__(self, config: DeepseekV41ModelConfig, max_step: int, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu") -> None:
        self.window = config.sliding_window
        self.max_step = max_step
        self.size = self.window + max_step
        self.lo = self.end = 0
        self.floor = 0  # the lowest step start the rows kept by the last resize can serve
        self.layers = [torch.zeros(1, self.size, config.head_dim, dtype=dtype, device=device)
                       for _ in range(config.num_hidden_layers)]

    def rows(self, positions: torch.Tensor) -> torch.Tensor:
        return positions % self.size

    def holds_window_of(self, start: int) -> bool:
        """Whether a step starting at ``start`` finds the window before it intact in the ring.

        True when ``start`` is 0 or the ring was written up to at least ``start`` and
        at most ``max_step`` positions beyond it (a rolled-back speculative step, or a
        recompute after preemption): the rows of ``start - window + 1 .. start - 1``
        have not been overwritten since.
        """
        return start == 0 or (max(self.lo, self.floor) <= start <= self.end <= start + self.max_step)

    def grow(self, max_step: int, start: int) -> None:
        """Make room for steps of ``max_step`` tokens, keeping the window before ``start``."""
        if max_step > self.max_step:
            self.resize(max_step, start)

    def fit(self, max_step: int, start: int, slack: int = 4, minimum: int = 16) -> None:
        """Size the ring for steps of ``max_step`` tokens: grow when needed, and give back the rows of a
        large prefill chunk once steps are small again (more than ``slack`` times the need, at least
        ``minimum``)."""
        if max_step > self.max_step:
            self.resize(max_step, start)
        elif self.max_step > slack * max(max_step, minimum):
            self.resize(max(max_step, minimum), start)

    def resize(self, max_step: int, start: int) -> None:
        """Re-allocate for steps of ``max_step`` tokens, keeping the window before ``start``."""
        keep = torch.arange(max(self.lo, start - self.window + 1, 0), start)
        old_rows = self.rows(keep)
        self.max_step, self.size = max_step, self.window + max_step
        new_rows = self.rows(keep)
        for i, t in enumerate(self.layers):
            fresh = t.new_zeros(1, self.size, t.shape[-1])
            fresh[0, new_rows] = t[0, old_rows]
            self.layers[i] = fresh
        # Only the window before ``start`` survives: a step starting earlier (a rollback) needs a replay.
        self.floor, self.end = start, min(self.end, start)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.layers)
