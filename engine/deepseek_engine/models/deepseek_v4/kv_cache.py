"""Paged per-sequence state for DeepSeek V4 (window KV, compressor state, compressed entries).

Contract
========

``KVCachePool(config, num_blocks, block_size=16, dtype=torch.float32, device="cpu")``
    Owns every cache tensor.  For each decoder layer ``pool.layers[i]`` holds
    tensors of shape ``[num_blocks, block_size, width]``, all addressed by
    *token position* through the sequence's block table:

    * ``kv``          - the shared key/value vector (after norm and RoPE) of
      every token;
    * ``comp_kv`` / ``comp_gate`` (layers with a compressor) - the raw
      compressor projections of every token.  The open (not yet full)
      compressor window, and for compressed sparse attention the previous
      window that overlaps the next entry, are rebuilt from these rows, so
      chunk boundaries never change results;
    * ``entries``     - compressed KV entries; entry ``w`` (summarising tokens
      ``[w*r, (w+1)*r)``) sits in the row of the token that closes its
      window, position ``(w+1)*r - 1``;
    * ``idx_kv`` / ``idx_gate`` / ``idx_entries`` (compressed sparse attention
      only) - the same three things for the lightning indexer's keys.

    Every row of block ``b`` of a sequence is therefore a function of that
    sequence's tokens up to the end of block ``b``: a full block can be shared
    by sequences with the same prefix (prefix caching).  The pool does no
    allocation policy; block ids come from the caller.
    ``pool.blocks_needed(num_tokens)`` gives the block count for a length.

``SequenceCache(pool, block_table, num_tokens=0)``
    One sequence's view of the pool.  ``block_table`` is a list (or 1-D
    LongTensor) of block ids; token ``p`` lives in block
    ``block_table[p // block_size]`` at offset ``p % block_size``.  The table
    may be extended in place (``append_block`` / ``extend``) between forward
    calls.  ``num_tokens`` counts the tokens already in the cache (pass it
    when resuming from shared prefix blocks).

``DeepseekV4ForCausalLM.forward(input_ids, positions, cache) -> logits``
    With a ``SequenceCache``: ``input_ids`` and ``positions`` are 1-D int64
    tensors of the same length ``T >= 1``; ``positions`` must be exactly
    ``cache.num_tokens .. cache.num_tokens + T - 1`` and the block table must
    cover ``num_tokens + T`` tokens, otherwise ``ValueError``.  Returns
    float32 logits ``[T, vocab_size]`` and advances ``cache.num_tokens`` by
    ``T``.  Any split of a sequence into chunks, followed by one-token decode
    steps, gives the same logits (float32: up to rounding) as one forward over
    the whole sequence.

    With a batch context (any object with ``kv`` = a ``KVCachePool``,
    ``block_tables``, ``query_start_loc`` and optionally ``logits_indices``):
    the flat ``input_ids`` / ``positions`` hold several sequences back to
    back, sequence ``i`` owning ``[query_start_loc[i], query_start_loc[i+1])``
    and continuing from position ``positions[query_start_loc[i]]``.  Returns
    the rows ``logits_indices`` of the stacked logits (all rows when ``None``).

Sequences sharing a pool must not write to the same blocks.  Nothing is
evicted: window rows older than the sliding window stay allocated (simple and
exact; a later version can recycle them).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from deepseek_engine.models.deepseek_v4.config import CSA, SLIDING, DeepseekV4ModelConfig


class LayerPool:
    """Pool tensors of one decoder layer (see the module docstring)."""

    def __init__(
        self,
        config: DeepseekV4ModelConfig,
        layer_idx: int,
        num_blocks: int,
        block_size: int,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> None:
        kind = config.layer_types[layer_idx]
        shape = (num_blocks, block_size)

        def alloc(width: int) -> torch.Tensor:
            return torch.zeros(*shape, width, dtype=dtype, device=device)

        self.kind = kind
        self.kv = alloc(config.head_dim)
        self.comp_kv = self.comp_gate = self.entries = None
        self.idx_kv = self.idx_gate = self.idx_entries = None
        if kind != SLIDING:
            width = (2 if kind == CSA else 1) * config.head_dim
            self.comp_kv, self.comp_gate = alloc(width), alloc(width)
            self.entries = alloc(config.head_dim)
        if kind == CSA:
            self.idx_kv = alloc(2 * config.index_head_dim)
            self.idx_gate = alloc(2 * config.index_head_dim)
            self.idx_entries = alloc(config.index_head_dim)


class PagedPool:
    """Block-paged storage for all layers of one model: ``layers[i]`` is a ``layer_pool`` (one per
    architecture: :class:`LayerPool` here, ``V41LayerPool`` in :mod:`deepseek_engine.models.deepseek_v41.kv_cache`) built
    with ``(config, i, num_blocks, block_size, dtype, device, **layer_args)``."""

    layer_pool: type

    def __init__(self, config, num_blocks: int, block_size: int = 16, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu", **layer_args) -> None:
        if num_blocks <= 0 or block_size <= 0:
            raise ValueError("num_blocks and block_size must be positive")
        self.config = config
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.dtype = dtype
        self.device = torch.device(device)
        self.layers = [self.layer_pool(config, i, num_blocks, block_size, dtype, self.device, **layer_args)
                       for i in range(config.num_hidden_layers)]

    def blocks_needed(self, num_tokens: int) -> int:
        """Number of blocks a sequence of ``num_tokens`` tokens occupies."""
        return -(-num_tokens // self.block_size)

    @classmethod
    def fresh_sequence(cls, config, num_tokens: int, block_size: int = 16, dtype: torch.dtype = torch.float32,
                       device: torch.device | str = "cpu") -> SequenceCache:
        """A private pool sized for ``num_tokens`` tokens, seen through an identity block table."""
        blocks = max(1, -(-num_tokens // block_size))
        return SequenceCache(cls(config, blocks, block_size, dtype, device), range(blocks))


class KVCachePool(PagedPool):
    """Block-paged storage for all layers of a DeepSeek V4 model."""

    layer_pool = LayerPool


class SequenceCache:
    """One sequence's block table and progress over a :class:`KVCachePool`."""

    def __init__(self, pool: KVCachePool, block_table: Iterable[int] | torch.Tensor, num_tokens: int = 0) -> None:
        self.pool = pool
        self.block_table: list[int] = [int(b) for b in block_table]
        for b in self.block_table:
            if not 0 <= b < pool.num_blocks:
                raise ValueError(f"block id {b} outside pool of {pool.num_blocks} blocks")
        if num_tokens < 0 or num_tokens > self.capacity:
            raise ValueError(f"num_tokens={num_tokens} does not fit the block table ({self.capacity} tokens)")
        self.num_tokens = num_tokens
        self._table: torch.Tensor | None = None  # tensor copy of block_table, rebuilt when it grows

    @classmethod
    def fresh(cls, config: DeepseekV4ModelConfig, num_tokens: int, block_size: int = 16,
              dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> SequenceCache:
        """A private pool sized for ``num_tokens`` tokens with an identity block table."""
        return KVCachePool.fresh_sequence(config, num_tokens, block_size, dtype, device)

    @property
    def capacity(self) -> int:
        """Tokens the current block table can hold."""
        return len(self.block_table) * self.pool.block_size

    def append_block(self, block_id: int) -> None:
        """Extend the block table by one block id."""
        if not 0 <= block_id < self.pool.num_blocks:
            raise ValueError(f"block id {block_id} outside pool of {self.pool.num_blocks} blocks")
        self.block_table.append(int(block_id))
        self._table = None

    def extend(self, block_ids: Iterable[int]) -> None:
        """Extend the block table by several block ids."""
        for b in block_ids:
            self.append_block(b)

    def slots(self, index: torch.Tensor) -> torch.Tensor:
        """Flat pool rows for logical row numbers ``index`` (token positions or entry ids)."""
        bs = self.pool.block_size
        cached = self._table
        if cached is None or cached.numel() != len(self.block_table) or cached.device != index.device:
            cached = self._table = torch.tensor(self.block_table, dtype=torch.long, device=index.device)
        return cached[index // bs] * bs + index % bs

    def check_step(self, positions: torch.Tensor) -> int:
        """Validate that ``positions`` continue this sequence; return the first position."""
        if positions.dim() != 1 or positions.numel() == 0:
            raise ValueError("positions must be a non-empty 1-D tensor")
        start = int(positions[0])
        t = positions.numel()
        if start != self.num_tokens:
            raise ValueError(f"positions start at {start} but the cache holds {self.num_tokens} tokens")
        expected = torch.arange(start, start + t, device=positions.device)
        if not torch.equal(positions.to(torch.long), expected):
            raise ValueError("positions must be consecutive")
        if start + t > self.capacity:
            raise ValueError(
                f"block table covers {self.capacity} tokens but {start + t} are needed; append blocks first"
            )
        return start


def write_rows(pool: torch.Tensor, slots: torch.Tensor, values: torch.Tensor) -> None:
    """Store ``values[i]`` at flat row ``slots[i]`` of a ``[blocks, block_size, width]`` pool."""
    pool.view(-1, pool.shape[-1]).index_copy_(0, slots, values.to(pool.dtype))


def read_rows(pool: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """Gather flat rows ``slots`` of a ``[blocks, block_size, width]`` pool."""
    return pool.view(-1, pool.shape[-1]).index_select(0, slots)
