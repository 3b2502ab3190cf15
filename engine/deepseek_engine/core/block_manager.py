"""Paged-cache block allocation with reference counts and prefix caching.

The cache storage (owned by the model) is an array of ``num_blocks`` blocks of
``block_size`` token slots. This module only decides which block IDs a sequence
uses. A block that is full and whose contents have been computed is registered
under a hash of its tokens chained with the hash of the block before it, so a later
sequence with the same prefix (block for block) reuses it instead of recomputing.
Freed blocks keep their hash until they are handed out again (least recently freed
first), so a prefix stays reusable while nothing else needs the space.

A full block that a running sequence has been given but not computed yet is *in
flight*: ``prefix_in_flight`` tells the scheduler that a waiting sequence would find
its next prefix block cached if it waited for that computation (requests sharing a
prompt, such as the choices of an ``n > 1`` request, then compute it once).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from deepseek_engine.core.sequence import Sequence


def chain_hash(prev: bytes | None, token_ids: list[int]) -> bytes:
    """Hash of a full block given the hash of the block before it (``None`` for the first)."""
    h = hashlib.blake2b(digest_size=16)
    if prev is not None:
        h.update(prev)
    h.update(b"|")
    h.update(",".join(map(str, token_ids)).encode())
    return h.digest()


class Block:
    __slots__ = ("block_id", "ref_count", "hash", "token_ids")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_count = 0
        self.hash: bytes | None = None
        self.token_ids: tuple[int, ...] = ()


class BlockManager:
    """Hands out cache blocks to sequences and shares full, computed prefix blocks.

    Invariants (checked by ``check_invariants`` in tests): a block is either in use
    (``ref_count > 0``, not in the free queue) or free (``ref_count == 0``, in the
    free queue); every registered hash points at a block carrying that hash.
    """

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be positive")
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        # Free blocks in the order they were freed; the oldest is reused first.
        self.free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self.hash_to_block: dict[bytes, int] = {}
        # Per sequence: number of its leading blocks already registered as cached.
        self._num_hashed: dict[int, int] = {}
        # Hashes of full blocks being computed by running sequences (-> how many), and per sequence
        # the end of its in-flight block range (its blocks [num_hashed, end) are in flight).
        self.in_flight: dict[bytes, int] = {}
        self._in_flight_end: dict[int, int] = {}

    # -- queries --------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return len(self.free)

    def blocks_needed(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def block_hash(self, seq: Sequence, i: int) -> bytes:
        """The chained hash of ``seq``'s full block ``i`` (kept in ``seq.block_hashes``)."""
        hashes, bs = seq.block_hashes, self.block_size
        while len(hashes) <= i:
            j = len(hashes)
            hashes.append(chain_hash(hashes[-1] if hashes else None, seq.token_ids[j * bs : (j + 1) * bs]))
        return hashes[i]

    def _cached_prefix(self, seq: Sequence) -> list[int]:
        """Block IDs of the longest cached prefix of ``seq``, leaving at least one token to compute."""
        if not self.enable_prefix_caching:
            return []
        hits: list[int] = []
        bs = self.block_size
        max_blocks = (len(seq) - 1) // bs
        for i in range(max_blocks):
            block_id = self.hash_to_block.get(self.block_hash(seq, i))
            if block_id is None or self.blocks[block_id].token_ids != tuple(seq.token_ids[i * bs : (i + 1) * bs]):
                break
            hits.append(block_id)
        return hits

    def prefix_in_flight(self, seq: Sequence) -> bool:
        """Whether the first block of ``seq`` missing from the cache is being computed by a running
        sequence (so ``seq`` would find it cached after waiting for that step)."""
        if not self.in_flight:
            return False
        hits = len(self._cached_prefix(seq))
        if hits >= (len(seq) - 1) // self.block_size:
            return False
        return self.block_hash(seq, hits) in self.in_flight

    def _take_free(self, block_id: int | None = None) -> Block:
        """Take a block out of the free queue: ``block_id`` (a cache hit) or the oldest one."""
        if block_id is None:
            block_id, _ = self.free.popitem(last=False)
            block = self.blocks[block_id]
            if block.hash is not None and self.hash_to_block.get(block.hash) == block_id:
                del self.hash_to_block[block.hash]
            block.hash = None
            block.token_ids = ()
        else:
            del self.free[block_id]
            block = self.blocks[block_id]
        block.ref_count = 1
        return block

    def allocate(self, seq: Sequence, use_prefix_cache: bool = True) -> int | None:
        """Give ``seq`` blocks for all its current tokens, reusing its cached prefix.

        Returns the number of leading tokens found in the cache, or ``None`` (and
        changes nothing) when there are not enough free blocks.
        """
        if seq.block_table:
            raise RuntimeError(f"sequence {seq.seq_id} already holds blocks")
        hits = self._cached_prefix(seq) if use_prefix_cache else []
        new = self.blocks_needed(len(seq)) - len(hits)
        # Cached blocks sitting in the free queue are taken out of it, too.
        revived = sum(1 for b in hits if self.blocks[b].ref_count == 0)
        if new + revived > self.num_free_blocks:
            return None
        for block_id in hits:
            block = self.blocks[block_id]
            if block.ref_count == 0:
                self._take_free(block_id)
            else:
                block.ref_count += 1
        seq.block_table = hits + [self._take_free().block_id for _ in range(new)]
        self._num_hashed[seq.seq_id] = len(hits)
        if use_prefix_cache and self.enable_prefix_caching:
            end = len(seq) // self.block_size
            for i in range(len(hits), end):
                h = self.block_hash(seq, i)
                self.in_flight[h] = self.in_flight.get(h, 0) + 1
            self._in_flight_end[seq.seq_id] = end
        return len(hits) * self.block_size

    def _land(self, seq: Sequence, start: int, stop: int) -> None:
        """Blocks ``[start, stop)`` of ``seq`` are no longer in flight (computed, or given up)."""
        for i in range(start, min(stop, self._in_flight_end.get(seq.seq_id, 0))):
            h = seq.block_hashes[i]
            left = self.in_flight[h] - 1
            if left:
                self.in_flight[h] = left
            else:
                del self.in_flight[h]

    def deallocate(self, seq: Sequence) -> None:
        """Drop ``seq``'s references; blocks nobody uses go back to the free queue."""
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self.free[block_id] = None
        seq.block_table = []
        if seq.seq_id in self._in_flight_end:
            self._land(seq, self._num_hashed.get(seq.seq_id, 0), self._in_flight_end[seq.seq_id])
            del self._in_flight_end[seq.seq_id]
        self._num_hashed.pop(seq.seq_id, None)

    def ensure_slots(self, seq: Sequence, num_tokens: int) -> bool:
        """Grow ``seq``'s block table to cover ``num_tokens`` tokens; ``False`` (no change) if blocks run out."""
        extra = self.blocks_needed(num_tokens) - len(seq.block_table)
        if extra > self.num_free_blocks:
            return False
        for _ in range(extra):
            seq.block_table.append(self._take_free().block_id)
        return True

    def commit(self, seq: Sequence) -> None:
        """Register the full blocks of ``seq`` whose contents the model has now computed."""
        if not self.enable_prefix_caching:
            return
        done = self._num_hashed.get(seq.seq_id, 0)
        full = min(seq.num_computed_tokens, len(seq.token_ids)) // self.block_size
        if full <= done:  # no block filled since the last commit (most decode steps)
            return
        self._land(seq, done, full)
        for i in range(done, full):
            ids = seq.token_ids[i * self.block_size : (i + 1) * self.block_size]
            h = self.block_hash(seq, i)
            block = self.blocks[seq.block_table[i]]
            if block.hash is None:
                block.hash = h
                block.token_ids = tuple(ids)
                # An identical block computed by another sequence keeps its registration.
                self.hash_to_block.setdefault(h, block.block_id)
        self._num_hashed[seq.seq_id] = max(done, full)

    def reset_prefix_cache(self) -> None:
        """Forget every cached block (after the model's weights changed, their contents are stale). Only when no
        sequence holds blocks."""
        if len(self.free) != len(self.blocks):
            raise RuntimeError("the prefix cache can only be reset while no sequence holds cache blocks")
        for block in self.blocks:
            block.hash = None
            block.token_ids = ()
        self.hash_to_block.clear()

    # -- checks ----------------------------------------------------------------------------
    def check_invariants(self, live: list[Sequence]) -> None:
        counts = [0] * len(self.blocks)
        for seq in live:
            for block_id in seq.block_table:
                counts[block_id] += 1
        for block in self.blocks:
            assert block.ref_count == counts[block.block_id], (block.block_id, block.ref_count)
            assert (block.ref_count == 0) == (block.block_id in self.free), block.block_id
        for h, block_id in self.hash_to_block.items():
            assert self.blocks[block_id].hash == h
        flying: dict[bytes, int] = {}
        for seq in live:
            for i in range(self._num_hashed.get(seq.seq_id, 0), self._in_flight_end.get(seq.seq_id, 0)):
                flying[seq.block_hashes[i]] = flying.get(seq.block_hashes[i], 0) + 1
        assert flying == self.in_flight, "in-flight blocks differ from the live sequences' uncommitted blocks"
