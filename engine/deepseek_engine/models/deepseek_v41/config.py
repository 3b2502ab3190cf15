"""Configuration of DeepSeek V4.1 text models (the architecture, not only the file layout).

A ``deepseek_v41`` checkpoint nests its text model under ``text_config``. That
layout alone does not select the V4.1 architecture: the engine has always read
V4 models saved in that layout, and keeps doing so. The V4.1 architecture is
selected when the text config names any of the fields only V4.1 has
(:data:`V41_MARKERS`: ``kv_source_layer_ids``, ``index_source_layer_ids``,
``engram_layer_ids``).

What V4.1 adds to the V4 fields (see ``docs/engine-serving.md``):

* ``compress_ratios``: one entry per decoder layer, 0 (sliding window only),
  1 (one compressed entry per token) or 2 (one per pair of tokens);
* ``kv_source_layer_ids``: the only layers with a compressor and compressed
  cache; every other compressed layer reads the latest source at or below it;
* ``index_source_layer_ids``: the only layers with an indexer; every other
  compressed layer reuses the top-k choice of the latest index source at or
  below it;
* ``candidate_source_layer_id`` / ``candidate_topk_blocks`` /
  ``candidate_block_size``: two-level filtering of the indexer's candidates;
* ``engram_*``: the n-gram hash tables added to the residual streams;
* ``vision_n_layers`` (from ``vision_config.num_hidden_layers``): when positive,
  MoE gates carry ``bias_vl`` for image-sentinel tokens;
* ``dspark_*``: the DSpark draft layers (speculative decoding).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from deepseek_engine.models.deepseek_v4.config import (
    CSA,
    HCA,
    SLIDING,
    DeepseekV4ModelConfig,
    normalize_config_dict,
)

#: Text-config fields that only the V4.1 architecture has; any of them selects it.
V41_MARKERS = ("kv_source_layer_ids", "index_source_layer_ids", "engram_layer_ids")

#: First of the token ids that stand for image positions; the MoE router treats
#: ``[IMAGE_SENTINEL_BASE_ID, IMAGE_SENTINEL_BASE_ID + IMAGE_SENTINEL_COUNT)`` as image tokens.
IMAGE_SENTINEL_BASE_ID = 129264
IMAGE_SENTINEL_COUNT = 5


def is_v41_config(raw: dict[str, Any]) -> bool:
    """Whether a parsed ``config.json`` describes the V4.1 architecture."""
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    return any(text.get(k) for k in V41_MARKERS)


class DeepseekV41ModelConfig(DeepseekV4ModelConfig):
    """Validated hyper-parameters of a DeepSeek V4.1 text model."""

    compress_ratios: list[int] = Field(default_factory=list)
    kv_source_layer_ids: list[int] = Field(default_factory=list)
    index_source_layer_ids: list[int] = Field(default_factory=list)
    candidate_source_layer_id: int = -1
    candidate_topk_blocks: int = 0
    candidate_block_size: int = 0
    engram_layer_ids: list[int] = Field(default_factory=list)
    engram_num_embeddings: list[int] = Field(default_factory=list)
    engram_max_ngram_size: int = 4
    engram_n_heads: int = 8
    engram_head_dim: int = 64
    engram_vocab_size: int = 0
    engram_compressed_vocab_size: int = 0
    engram_pad_token_id: int = 0
    vision_n_layers: int = 0
    num_nextn_predict_layers: int = 0
    dspark_n_routed_experts: int = 0
    dspark_num_experts_per_tok: int = 0
    dspark_target_layer_ids: list[int] = Field(default_factory=list)
    dspark_markov_rank: int = 0
    dspark_noise_token_id: int = 0

    def ratio(self, layer_idx: int) -> int:
        """Compression ratio of a layer (0: sliding window only)."""
        return int(self.compress_ratios[layer_idx])

    def kv_source(self, layer_idx: int) -> int | None:
        """Layer whose compressed cache ``layer_idx`` reads (``None`` for sliding-window layers)."""
        if self.ratio(layer_idx) == 0:
            return None
        return max(s for s in self.kv_source_layer_ids if s <= layer_idx)

    def index_source(self, layer_idx: int) -> int | None:
        """Layer whose top-k choice ``layer_idx`` uses (``None`` for sliding-window layers)."""
        if self.ratio(layer_idx) == 0:
            return None
        return max(s for s in self.index_source_layer_ids if s <= layer_idx)

    @property
    def uses_candidates(self) -> bool:
        return self.candidate_source_layer_id >= 0 and self.candidate_topk_blocks > 0

    @property
    def engram_lookback(self) -> int:
        """Tokens before a chunk's start that the engram hash reads (0 without engram layers)."""
        return self.engram_max_ngram_size - 1 if self.engram_layer_ids else 0

    @model_validator(mode="after")
    def _check_v41(self) -> DeepseekV41ModelConfig:
        n = self.num_hidden_layers
        if len(self.compress_ratios) < n:
            raise ValueError(f"compress_ratios has {len(self.compress_ratios)} entries; need {n}")
        bad = sorted({r for r in self.compress_ratios[:n] if r not in (0, 1, 2)})
        if bad:
            raise ValueError(f"V4.1 compress_ratios must be 0, 1 or 2 per layer, got {bad}")
        for name in ("kv_source_layer_ids", "index_source_layer_ids"):
            ids = getattr(self, name)
            wrong = [i for i in ids if not 0 <= i < n or self.compress_ratios[i] == 0]
            if wrong:
                raise ValueError(f"{name} {wrong} must name compressed layers of the backbone")
        for i in range(n):
            r = self.ratio(i)
            if r == 0:
                continue
            if not any(s <= i for s in self.kv_source_layer_ids) or not any(s <= i for s in self.index_source_layer_ids):
                raise ValueError(f"compressed layer {i} has no kv source / index source at or below it")
            kv, ix = self.kv_source(i), self.index_source(i)
            if self.ratio(kv) != r or self.ratio(ix) != r:
                raise ValueError(f"layer {i} (ratio {r}) reads sources {kv}/{ix} of another ratio")
            if self.kv_source(ix) != kv:
                raise ValueError(f"layer {i}: its index source {ix} keys off another kv source than {kv}")
        if self.uses_candidates:
            c = self.candidate_source_layer_id
            if c not in self.index_source_layer_ids:
                raise ValueError(f"candidate_source_layer_id {c} is not an index source")
            if self.candidate_block_size <= 0:
                raise ValueError("candidate_block_size must be positive with candidate filtering")
            later = [s for s in self.index_source_layer_ids if s > c and self.ratio(s) != self.ratio(c)]
            if later:
                raise ValueError(f"index sources {later} use candidates of another compression ratio")
        if self.engram_layer_ids:
            if len(self.engram_num_embeddings) != len(self.engram_layer_ids):
                raise ValueError("engram_num_embeddings needs one entry per engram layer")
            if 0 in self.engram_layer_ids:
                raise ValueError("an engram on layer 0 is not supported (vLLM's first layer skips it)")
            if any(not 0 < i < n for i in self.engram_layer_ids):
                raise ValueError("engram_layer_ids must name backbone layers")
            if self.engram_max_ngram_size < 2 or self.engram_compressed_vocab_size <= 0:
                raise ValueError("engram needs engram_max_ngram_size >= 2 and engram_compressed_vocab_size")
        return self

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> DeepseekV41ModelConfig:
        return cls.model_validate(normalize_v41_dict(raw))


def normalize_v41_dict(raw: dict[str, Any]) -> dict[str, Any]:
    """Flatten a V4.1 config; the per-layer ratios also fill the V4 ``layer_types`` fields."""
    vision = raw.get("vision_config") if isinstance(raw.get("vision_config"), dict) else {}
    text = dict(raw.get("text_config")) if isinstance(raw.get("text_config"), dict) else dict(raw)
    n = int(text.get("num_hidden_layers", DeepseekV4ModelConfig.model_fields["num_hidden_layers"].default))
    ratios = [int(r) for r in (text.get("compress_ratios") or [0] * n)]
    # The V4 fields stay meaningful for code that reads them: ratio-0 layers are sliding
    # window, ratio-2 ones pool (HCA kind), ratio-1 ones keep every token (CSA kind).
    text["layer_types"] = [SLIDING if r == 0 else (HCA if r == 2 else CSA) for r in ratios[:n]]
    text["compress_rates"] = {CSA: 1, HCA: 2}
    text["mlp_layer_types"] = ["moe"] * n
    if "dspark_noise_token_id" not in text and "mask_token_id" in text:  # vLLM reads either name
        text["dspark_noise_token_id"] = text["mask_token_id"]
    text.pop("compress_ratios", None)
    text.pop("num_hash_layers", None)
    merged = dict(raw)
    merged["text_config"] = text
    d = normalize_config_dict(merged)
    d["compress_ratios"] = ratios
    d["model_type"] = "deepseek_v41"
    if vision:
        d["vision_n_layers"] = int(vision.get("num_hidden_layers", d.get("vision_n_layers", 0)) or 0)
    return d
