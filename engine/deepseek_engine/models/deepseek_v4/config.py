"""Model configuration for DeepSeek V4 text models.

:meth:`DeepseekV4ModelConfig.from_dict` validates a Hugging Face style ``config.json`` mapping
(:func:`deepseek_engine.models.load_config` reads the file and picks V4 or V4.1,
:class:`~deepseek_engine.models.deepseek_v41.config.DeepseekV41ModelConfig`).  Three layouts are understood:

* ``model_type == "deepseek_v4"``: the flat layout written by
  ``transformers`` (``layer_types``, ``mlp_layer_types``, ``compress_rates``
  and the nested ``rope_parameters = {"main": ..., "compress": ...}``), and
  the older flat layout that ships ``compress_ratios`` / ``num_hash_layers`` /
  ``qk_rope_head_dim`` / ``rope_scaling`` instead;
* ``model_type == "deepseek_v41"`` (or any config with a ``text_config``
  mapping): the text model lives under ``text_config`` and is read the same
  way;
* the short argument names used by DeepSeek's own inference code (``dim``,
  ``n_layers``, ``n_heads`` ...), mapped onto the long ones.

Everything downstream (layers, loader, cache) reads only this object.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

SLIDING = "sliding_attention"
CSA = "compressed_sparse_attention"
HCA = "heavily_compressed_attention"
ATTENTION_KINDS = (SLIDING, CSA, HCA)
MLP_KINDS = ("hash_moe", "moe")

_RATIO_TO_KIND = {0: SLIDING, 1: SLIDING, 4: CSA, 128: HCA}

# Short names used by DeepSeek's reference inference code -> long HF names.
_SHORT_NAMES = {
    "dim": "hidden_size",
    "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "moe_inter_dim": "moe_intermediate_size",
    "n_activated_experts": "num_experts_per_tok",
    "route_scale": "routed_scaling_factor",
    "rope_head_dim": "qk_rope_head_dim",
    "window_size": "sliding_window",
    "norm_eps": "rms_norm_eps",
    "score_func": "scoring_func",
    "max_seq_len": "max_position_embeddings",
}


class RopeSpec(BaseModel):
    """Rotary parameters for one rope kind (``main`` or ``compress``)."""

    model_config = ConfigDict(extra="allow")

    rope_type: str = "default"
    rope_theta: float = 10000.0
    partial_rotary_factor: float | None = None
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    beta_fast: float | None = None
    beta_slow: float | None = None
    attention_factor: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True


class DeepseekV4ModelConfig(BaseModel):
    """Validated hyper-parameters of a DeepSeek V4 text model."""

    model_config = ConfigDict(extra="ignore")

    vocab_size: int = 129280
    hidden_size: int = 4096
    moe_intermediate_size: int = 2048
    num_hidden_layers: int = 43
    num_attention_heads: int = 64
    head_dim: int = 512
    q_lora_rank: int = 1024
    num_experts_per_tok: int = 6
    n_routed_experts: int = 256
    n_shared_experts: int = 1
    scoring_func: str = "sqrtsoftplus"
    routed_scaling_factor: float = 1.5
    max_position_embeddings: int = 1048576
    rope_theta: float = 10000.0
    compress_rope_theta: float = 160000.0
    layer_types: list[str] = Field(default_factory=list)
    mlp_layer_types: list[str] = Field(default_factory=list)
    compress_rates: dict[str, int] = Field(default_factory=lambda: {CSA: 4, HCA: 128})
    hc_mult: int = 4
    hc_sinkhorn_iters: int = 20
    hc_eps: float = 1.0e-6
    swiglu_limit: float = 10.0
    sliding_window: int = 128
    o_groups: int = 8
    o_lora_rank: int = 1024
    index_n_heads: int = 64
    index_head_dim: int = 128
    index_topk: int = 512
    rms_norm_eps: float = 1.0e-6
    partial_rotary_factor: float = 64 / 512
    rope_main: RopeSpec = Field(default_factory=RopeSpec)
    rope_compress: RopeSpec = Field(default_factory=RopeSpec)
    tie_word_embeddings: bool = False
    bos_token_id: int | None = 0
    eos_token_id: int | list[int] | None = 1
    quantization_config: dict[str, Any] | None = None
    model_type: str = "deepseek_v4"

    @property
    def qk_rope_head_dim(self) -> int:
        """Number of trailing channels of each head that carry RoPE."""
        return int(self.head_dim * self.partial_rotary_factor)

    def compress_rate(self, layer_idx: int) -> int:
        """Compression rate of a layer (0 for sliding-window-only layers)."""
        kind = self.layer_types[layer_idx]
        return 0 if kind == SLIDING else int(self.compress_rates[kind])

    @model_validator(mode="after")
    def _check(self) -> DeepseekV4ModelConfig:
        n = self.num_hidden_layers
        if len(self.layer_types) != n or len(self.mlp_layer_types) != n:
            raise ValueError(
                f"layer_types ({len(self.layer_types)}) and mlp_layer_types ({len(self.mlp_layer_types)}) "
                f"must both have num_hidden_layers={n} entries"
            )
        bad = [t for t in self.layer_types if t not in ATTENTION_KINDS]
        if bad:
            raise ValueError(f"unknown attention layer types {bad}; expected one of {ATTENTION_KINDS}")
        bad = [t for t in self.mlp_layer_types if t not in MLP_KINDS]
        if bad:
            raise ValueError(f"unknown mlp layer types {bad}; expected one of {MLP_KINDS}")
        for kind in set(self.layer_types) - {SLIDING}:
            if int(self.compress_rates.get(kind, 0)) <= 0:
                raise ValueError(f"compress_rates lacks a positive rate for {kind}")
        if self.num_attention_heads * self.head_dim % self.o_groups:
            raise ValueError("num_attention_heads * head_dim must be divisible by o_groups")
        # Only compressed sparse attention layers have an indexer (whose heads the rope must fit).
        widths = [self.head_dim] + ([self.index_head_dim] if CSA in self.layer_types else [])
        if self.qk_rope_head_dim % 2 or self.qk_rope_head_dim > min(widths):
            raise ValueError(f"rope dim {self.qk_rope_head_dim} must be even and fit in every head")
        if self.scoring_func not in ("sqrtsoftplus", "softmax", "sigmoid"):
            raise ValueError(f"unsupported scoring_func {self.scoring_func!r}")
        return self

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> DeepseekV4ModelConfig:
        """Build a config from the parsed JSON of any supported layout."""
        return cls.model_validate(normalize_config_dict(raw))


def normalize_config_dict(raw: dict[str, Any]) -> dict[str, Any]:
    """Fold nested / legacy / short-name layouts into the flat field set."""
    if not isinstance(raw, dict):
        raise TypeError("config must be a JSON object")
    text = raw.get("text_config")
    if isinstance(text, dict):
        merged = {k: v for k, v in raw.items() if k in ("quantization_config", "tie_word_embeddings")}
        merged.update(text)
        raw = merged
    d = dict(raw)
    for short, long in _SHORT_NAMES.items():
        if short in d and long not in d:
            d[long] = d.pop(short)
    n = int(d.get("num_hidden_layers", DeepseekV4ModelConfig.model_fields["num_hidden_layers"].default))

    rates = dict(d.get("compress_rates") or {CSA: 4, HCA: 128})
    if "compress_rate_csa" in d:
        rates[CSA] = int(d.pop("compress_rate_csa"))
    if "compress_rate_hca" in d:
        rates[HCA] = int(d.pop("compress_rate_hca"))
    d["compress_rates"] = rates

    if not d.get("layer_types"):
        ratios = d.get("compress_ratios")
        if ratios is not None:
            inverse = {v: k for k, v in rates.items()}
            d["layer_types"] = [inverse.get(int(r)) or _RATIO_TO_KIND.get(int(r), f"ratio {r}") for r in ratios]
        else:
            d["layer_types"] = [HCA] * min(n, 2) + [CSA if i % 2 else HCA for i in range(max(n - 2, 0))]
    d["layer_types"] = list(d["layer_types"])[:n]
    if not d.get("mlp_layer_types"):
        n_hash = int(d.get("num_hash_layers", 3))
        d["mlp_layer_types"] = ["hash_moe"] * min(n, n_hash) + ["moe"] * max(0, n - n_hash)
    d["mlp_layer_types"] = list(d["mlp_layer_types"])[:n]

    head_dim = int(d.get("head_dim", 512))
    if d.get("partial_rotary_factor") is None:
        rope_dim = d.get("qk_rope_head_dim")
        d["partial_rotary_factor"] = (rope_dim / head_dim) if rope_dim else 64 / 512
    prf = float(d["partial_rotary_factor"])
    d["rope_main"], d["rope_compress"] = _rope_specs(d, prf)
    if d.get("expert_dtype") and isinstance(d.get("quantization_config"), dict):
        d["quantization_config"] = {"expert_dtype": d["expert_dtype"], **d["quantization_config"]}
    return d


def _rope_specs(d: dict[str, Any], prf: float) -> tuple[dict, dict]:
    rope_theta = float(d.get("rope_theta", 10000.0))
    compress_theta = float(d.get("compress_rope_theta", 160000.0))
    rp = d.get("rope_parameters") or d.get("rope_scaling") or {}
    if isinstance(rp.get("main"), dict) and isinstance(rp.get("compress"), dict):
        main, compress = dict(rp["main"]), dict(rp["compress"])
        main.setdefault("rope_theta", rope_theta)
        compress.setdefault("rope_theta", compress_theta)
    else:
        scaling = {k: v for k, v in rp.items() if k not in ("main", "compress")}
        main = {"rope_type": "default", "rope_theta": rope_theta}
        compress = {**scaling, "rope_theta": compress_theta}
        if "type" in compress and "rope_type" not in compress:
            compress["rope_type"] = compress.pop("type")
        compress.setdefault("rope_type", "default")
        if compress["rope_type"] == "yarn":
            compress.setdefault("attention_factor", 1.0)
    for spec in (main, compress):
        spec.setdefault("partial_rotary_factor", prf)
        if "type" in spec and "rope_type" not in spec:
            spec["rope_type"] = spec.pop("type")
        spec.setdefault("rope_type", "default")
        if spec["rope_type"] not in ("default", "yarn"):
            raise ValueError(f"unsupported rope_type {spec['rope_type']!r} (expected 'default' or 'yarn')")
        if spec["rope_type"] == "yarn":
            spec.setdefault("original_max_position_embeddings", d.get("max_position_embeddings", 1048576))
            if spec.get("factor") is None:
                spec["factor"] = float(d.get("max_position_embeddings", 1048576)) / float(
                    spec["original_max_position_embeddings"]
                )
    return main, compress


def yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN attention temperature helper (1 for no scaling)."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0
