"""Paged per-sequence state for DeepSeek V4 (window KV, compressor state, compressed entries).

Contract
========

``KVCachePool(config, num_blocks, block_size=16, dtype=torch.float32, device="cpu")``
    Owns every cache tensor.  For each decoder layer it allocates pool
    tensors of shape ``[num_blocks, block_size, width]``:

    * ``kv``          – the shared key/value vector (after norm and RoPE) of
      every token, addressed by token position;
    * ``comp_kv`` / ``comp_gate`` (layers with a compressor) – the raw
      compressor projections of every token, addressed by token position.
      The not-yet-full compressor window (and, for compressed sparse
      attention, the previous window whose first half overlaps the next entry)
      is rebuilt from these rows, so chunk boundaries never matter;
    * ``entries``     – compressed KV entries, addressed by *entry index*
      (entry ``w`` summarises tokens ``[w*r, (w+1)*r)``);
    * ``idx_kv`` / ``idx_gate`` / ``idx_entries`` (compressed sparse attention
      only) – the same three things for the lightning indexer's keys.

    A block id therefore reserves ``block_size`` token rows *and*
    ``block_size`` entry rows in every layer.  Blocks are handed out by the
    caller (the serving block manager); the pool does no allocation policy.
    ``KVCachePool.blocks_needed(num_tokens)`` gives the block count for a
    sequence length.

``SequenceCache(pool, block_table)``
    One sequence's view of the pool.  ``block_table`` is a list (or 1-D
    LongTensor) of block ids; logical token ``p`` lives in block
    ``block_table[p // block_size]`` at offset ``p % block_size``.  The table
    may be extended in place (``append_block`` / ``extend``) between forward
    calls.  ``num_tokens`` counts the tokens already processed.

``DeepseekV4ForCausalLM.forward(input_ids, positions, cache) -> logits``
    ``input_ids`` and ``positions`` are 1-D LongTensors of the same length
    ``T >= 1``; ``positions`` must be exactly
    ``cache.num_tokens, ..., cache.num_tokens + T - 1`` and the block table
    must cover ``num_tokens + T`` tokens, otherwise ``ValueError``.  Returns
    float logits ``[T, vocab_size]`` for every input position and advances
    ``cache.num_tokens`` by ``T``.  Any split of a prompt into chunks,
    followed by one-token decode steps, yields the same logits (float32: to
    rounding) as a single forward over the whole sequence.

Sequences sharing a pool must use disjoint blocks.  Nothing is evicted: the
window KV rows of tokens older than the sliding window stay allocated (simple
and exact; a later version can recycle them).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from deepseek_engine.config import CSA, SLIDING, DeepseekV4ModelConfig


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


class KVCachePool:
    """Block-paged storage for all layers of one model."""

    def __init__(
        self,
        config: DeepseekV4ModelConfig,
        num_blocks: int,
        block_size: int = 16,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        if num_blocks <= 0 or block_size <= 0:
            raise ValueError("num_blocks and block_size must be positive")
        self.config = config
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.dtype = dtype
        self.device = torch.device(device)
        self.layers = [
            LayerPool(config, i, num_blocks, block_size, dtype, self.device) for i in range(config.num_hidden_layers)
        ]

    def blocks_needed(self, num_tokens: int) -> int:
        """Number of blocks a sequence of ``num_tokens`` tokens occupies."""
        return -(-num_tokens // self.block_size)


class SequenceCache:
    """One sequence's block table and progress over a :class:`KVCachePool`."""

    def __init__(self, pool: KVCachePool, block_table: Iterable[int] | torch.Tensor) -> None:
        self.pool = pool
        self.block_table: list[int] = [int(b) for b in block_table]
        for b in self.block_table:
            if not 0 <= b < pool.num_blocks:
                raise ValueError(f"block id {b} outside pool of {pool.num_blocks} blocks")
        self.num_tokens = 0

    @classmethod
    def fresh(cls, config: DeepseekV4ModelConfig, num_tokens: int, block_size: int = 16,
              dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> "SequenceCache":
        """A private pool sized for ``num_tokens`` tokens with an identity block table."""
        blocks = max(1, -(-num_tokens // block_size))
        pool = KVCachePool(config, blocks, block_size, dtype, device)
        return cls(pool, range(blocks))

    @property
    def capacity(self) -> int:
        """Tokens the current block table can hold."""
        return len(self.block_table) * self.pool.block_size

    def append_block(self, block_id: int) -> None:
        """Extend the block table by one block id."""
        if not 0 <= block_id < self.pool.num_blocks:
            raise ValueError(f"block id {block_id} outside pool of {self.pool.num_blocks} blocks")
        self.block_table.append(int(block_id))

    def extend(self, block_ids: Iterable[int]) -> None:
        """Extend the block table by several block ids."""
        for b in block_ids:
            self.append_block(b)

    def slots(self, index: torch.Tensor) -> torch.Tensor:
        """Flat pool rows for logical row numbers ``index`` (token positions or entry ids)."""
        bs = self.pool.block_size
        table = torch.tensor(self.block_table, dtype=torch.long, device=index.device)
        return table[index // bs] * bs + index % bs

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
