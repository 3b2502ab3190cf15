"""Engram (DeepSeek V4.1): n-gram hash lookups gated into the hyper-connection streams.

Hashing (once per step, shared by all engram layers):

* every token id is first mapped to a *compressed* id: tokens whose decoded
  text normalises alike (NFKC, accents stripped, lower case, runs of white
  space folded, trimmed) share one id (:func:`build_compressed_token_map`);
  the number of compressed ids must equal ``engram_compressed_vocab_size``;
* the n-grams ending at position ``p`` (sizes 2 .. ``engram_max_ngram_size``)
  are hashed with a rolling XOR of ``id(p - s) * m[layer, s]``, where the odd
  multipliers ``m`` come from ``numpy.random.default_rng(10007 * layer_id)``;
  a position before the sequence start or an image token ends the n-gram (it
  and every older position count as the pad token's compressed id);
* n-gram size ``s + 1`` and head ``h`` own a prime-sized bucket range (primes
  drawn in order above ``engram_vocab_size - 1``, never reused across heads,
  sizes and layers); the row is ``hash % prime + offset``.

A chunk that starts at position ``p0 > 0`` needs the ``engram_max_ngram_size -
1`` token ids before ``p0``; the cache keeps every position's token id for that.

Layer (:class:`Engram`), before the layer's attention pre-mix, on the full
streams ``h [T, hc, D]``: the rows of all hash columns (an FP8 table with one
e8m0 scale per 32 values, dequantised at load) are concatenated and projected
by ``wkv`` to ``hc`` keys and one shared value; stream ``i`` gets
``h_i + sigmoid(signed_sqrt(<rms(h_i) * q_w_i * k_w_i, rms(key_i)> / sqrt(D))) * value``.
Image tokens (id ``IMAGE_SENTINEL_BASE_ID``) get no update.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import deepseek_kernels as ops
import numpy as np
import torch
from torch import nn

from deepseek_engine.layers.row_invariant import linear
from deepseek_engine.models.deepseek_v41.config import (
    IMAGE_SENTINEL_BASE_ID,
    DeepseekV41ModelConfig,
)

#: Compressed id of a token that takes no part in any n-gram (image positions).
DEAD_ID = -1


def is_prime(n: int) -> bool:
    """Deterministic primality test for ``n < 2**64`` (Miller-Rabin with fixed witnesses)."""
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
    for p in small:
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d //= 2
        r += 1
    for a in small:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


class EngramLayout:
    """Bucket primes, row offsets and hash multipliers of every engram layer."""

    def __init__(self, config: DeepseekV41ModelConfig) -> None:
        self.layer_ids = tuple(config.engram_layer_ids)
        self.max_ngram = config.engram_max_ngram_size
        self.n_heads = config.engram_n_heads
        self.n_cols = (self.max_ngram - 1) * self.n_heads
        seen: set[int] = set()
        primes = []
        for _ in self.layer_ids:
            layer = []
            for _ in range(self.max_ngram - 1):
                current = config.engram_vocab_size - 1
                for _ in range(self.n_heads):
                    current += 1
                    while not is_prime(current) or current in seen:
                        current += 1
                    seen.add(current)
                    layer.append(current)
            primes.append(layer)
        self.primes = torch.tensor(primes, dtype=torch.int64, device="cpu")  # [layers, n_cols]
        self.offsets = torch.cumsum(self.primes, dim=1) - self.primes
        for i, total in enumerate(self.primes.sum(dim=1).tolist()):
            if total > config.engram_num_embeddings[i]:
                raise ValueError(f"engram layer {self.layer_ids[i]} needs {total} rows, "
                                 f"engram_num_embeddings gives {config.engram_num_embeddings[i]}")
        self.multipliers = hash_multipliers(self.layer_ids, self.max_ngram, config.engram_compressed_vocab_size)


def hash_multipliers(layer_ids, max_ngram: int, compressed_vocab_size: int) -> torch.Tensor:
    """Odd per-(layer, lookback) multipliers ``[layers, max_ngram]`` small enough that no product overflows."""
    bound = max(1, (np.iinfo(np.int64).max // compressed_vocab_size) // 2)
    rows = []
    for layer_id in layer_ids:
        values = np.random.default_rng(10007 * layer_id).integers(0, bound, size=(max_ngram,), dtype=np.int64)
        rows.append(torch.from_numpy(values * 2 + 1))
    return torch.stack(rows) if rows else torch.zeros((0, max_ngram), dtype=torch.int64, device="cpu")


def ngram_hashes(compressed: torch.Tensor, positions: torch.Tensor, layout: EngramLayout, pad_id: int) -> torch.Tensor:
    """Rows ``[T, layers, n_cols]`` of the n-grams ending at the last ``T`` entries of ``compressed``.

    ``compressed`` holds the compressed ids of positions ``positions[0] - L ..
    positions[-1]`` (``L = max_ngram - 1``; entries before position 0 may hold
    anything), ``DEAD_ID`` for image tokens.
    """
    device = compressed.device
    # The kernel op (reference: deepseek_kernels.engram_hash.reference): rolling XOR hashes, floor modulo.
    return ops.engram_hash(compressed.long(), positions.long(), layout.multipliers.to(device),
                           layout.primes.to(device), layout.offsets.to(device), layout.n_heads, pad_id, DEAD_ID)


def build_compressed_token_map(tokenizer_json: str | Path) -> tuple[list[int], int]:
    """Map each token id to its compressed id; return the map and the number of compressed ids.

    Uses the ``tokenizers`` package to decode every id on its own (special
    tokens kept) exactly as the model's training did; ids that decode to a
    partial UTF-8 sequence are keyed by their raw token string.
    """
    try:
        from tokenizers import Regex, Tokenizer, normalizers
    except ImportError as err:  # pragma: no cover - the engine's extra
        raise RuntimeError("engram layers need the `tokenizers` package to build the token map") from err
    tok = Tokenizer.from_file(str(tokenizer_json))
    sentinel = "\ue000"
    normalizer = normalizers.Sequence([
        normalizers.NFKC(), normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"[ \t\r\n]+"), " "), normalizers.Replace(Regex(r"^ $"), sentinel),
        normalizers.Strip(), normalizers.Replace(sentinel, " "),
    ])
    size = tok.get_vocab_size(with_added_tokens=True)
    keys: dict[str, int] = {}
    lookup = [0] * size
    for token_id in range(size):
        text = tok.decode([token_id], skip_special_tokens=False)
        if "\ufffd" in text:
            key = tok.id_to_token(token_id)
        else:
            normalized = normalizer.normalize_str(text)
            key = normalized if normalized else text
        lookup[token_id] = keys.setdefault(key, len(keys))
    return lookup, len(keys)


@lru_cache(maxsize=4)
def _cached_map(path: str, mtime: float) -> tuple[tuple[int, ...], int]:
    lookup, size = build_compressed_token_map(path)
    return tuple(lookup), size


def load_token_map(tokenizer_json: str | Path, vocab_size: int, expected: int) -> torch.Tensor:
    """The compressed-id map for a model of ``vocab_size`` tokens, checked against the config."""
    path = Path(tokenizer_json)
    lookup, size = _cached_map(str(path), path.stat().st_mtime)
    if size != expected:
        raise ValueError(f"the tokenizer at {path.name} gives {size} compressed ids but the config says "
                         f"engram_compressed_vocab_size={expected}; the engram hashes would not match training")
    table = torch.full((vocab_size,), 0, dtype=torch.int64)
    n = min(vocab_size, len(lookup))
    table[:n] = torch.tensor(lookup[:n], dtype=torch.int64)
    return table


def engram_gate_add(streams: torch.Tensor, kv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
                    keep: torch.Tensor, eps: float) -> torch.Tensor:
    """``streams [T, hc, D]`` plus the gated value; ``kv [T, (hc + 1) * D]`` holds hc keys then the value (the
    kernel op ``deepseek_kernels.engram_gate``: each token's rows on their own, the same bits in any batch)."""
    return ops.engram_gate(streams, kv, q_weight, k_weight, keep, eps)


class Engram(nn.Module):
    """One layer's engram: table ``embed`` ``[rows, head_dim]``, ``wkv``, ``q_weight``/``k_weight`` ``[hc, D]``."""

    def __init__(self, config: DeepseekV41ModelConfig, index: int) -> None:
        super().__init__()
        c = config
        self.index = index
        self.eps = c.rms_norm_eps
        n_cols = (c.engram_max_ngram_size - 1) * c.engram_n_heads
        self.embed = nn.Embedding(c.engram_num_embeddings[index], c.engram_head_dim)
        self.wkv = nn.Linear(n_cols * c.engram_head_dim, c.hidden_size * (c.hc_mult + 1), bias=False)
        self.q_weight = nn.Parameter(torch.ones(c.hc_mult, c.hidden_size))
        self.k_weight = nn.Parameter(torch.ones(c.hc_mult, c.hidden_size))

    def forward(self, streams: torch.Tensor, rows: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """``rows``: ``[T, n_cols]`` table rows of this layer; ``keep``: ``[T]`` false for image tokens."""
        emb = self.embed(rows).flatten(1)
        kv = linear(emb.to(self.wkv.weight.dtype), self.wkv.weight)
        return engram_gate_add(streams, kv, self.q_weight, self.k_weight, keep, self.eps)


def image_token_mask(input_ids: torch.Tensor) -> torch.Tensor:
    """Positions whose id is the image placeholder (no n-grams, no engram update)."""
    return input_ids == IMAGE_SENTINEL_BASE_ID


def tokenizer_json_in(folder: str | Path) -> Path | None:
    """``tokenizer.json`` of a checkpoint folder, if it ships one."""
    p = Path(folder) / "tokenizer.json"
    return p if p.is_file() else None


__all__ = ["DEAD_ID", "Engram", "EngramLayout", "build_compressed_token_map", "engram_gate_add", "hash_multipliers",
           "image_token_mask", "is_prime", "load_token_map", "ngram_hashes", "tokenizer_json_in"]
