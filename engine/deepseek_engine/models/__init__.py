"""The architectures the engine serves, and the switchboard that picks one.

One package per architecture: :mod:`.deepseek_v4` and :mod:`.deepseek_v41` (each: ``config``, ``model``,
``kv_cache`` (its paged cache), ``serving`` (the model-runner contract over that cache) and the layers only it
uses). A config decides the architecture (:func:`config_from_dict`); everything after that asks this module,
never an ``isinstance`` of its own: :func:`model_class` for the loader, :func:`wrap` for the serving engine.
:mod:`.loader` fills any of them from safetensors shards.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from deepseek_engine.models.deepseek_v4.config import DeepseekV4ModelConfig
from deepseek_engine.models.deepseek_v41.config import DeepseekV41ModelConfig, is_v41_config

#: Context length used when the caller gives none (the checkpoint's may be 1M tokens).
DEFAULT_MAX_MODEL_LEN = 8192


def config_from_dict(raw: dict[str, Any]) -> DeepseekV4ModelConfig:
    """The config of the architecture ``raw`` describes: V4, or V4.1 (see :mod:`.deepseek_v41.config`)."""
    if isinstance(raw, dict) and is_v41_config(raw):
        return DeepseekV41ModelConfig.from_dict(raw)
    return DeepseekV4ModelConfig.from_dict(raw)


def load_config(path: str | Path) -> DeepseekV4ModelConfig:
    """Read ``config.json`` (or the folder containing it) into a validated config of its architecture."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise FileNotFoundError(f"no config.json at {p}")
    with p.open("r", encoding="utf-8") as fh:
        raw = json.load(fh)
    return config_from_dict(raw)


def model_class(config: DeepseekV4ModelConfig) -> type[nn.Module]:
    """The ``nn.Module`` class that computes ``config``'s architecture."""
    if isinstance(config, DeepseekV41ModelConfig):
        from deepseek_engine.models.deepseek_v41.model import DeepseekV41ForCausalLM

        return DeepseekV41ForCausalLM
    from deepseek_engine.models.deepseek_v4.model import DeepseekV4ForCausalLM

    return DeepseekV4ForCausalLM


def load(model_dir: str, dtype: torch.dtype | None, device: torch.device,
         swa_replay: str | None = "exact") -> tuple[nn.Module, Any, dict]:
    """Load a checkpoint; return the served model, its cache factory and engine facts (see :func:`wrap`)."""
    from deepseek_engine.models.loader import load_model

    model = load_model(model_dir, dtype or torch.float32, device, prepare=False)  # wrap prepares it
    return wrap(model, swa_replay)


def wrap(model: nn.Module, swa_replay: str | None = "exact") -> tuple[nn.Module, Any, dict]:
    """The served form of a loaded model (the model-runner contract, :mod:`deepseek_engine.core.model_runner`),
    its cache factory ``make_kv(num_blocks, block_size)`` and ``{vocab_size, eos_token_id, max_model_len}``.

    ``swa_replay`` chooses how V4.1 models keep window KV (:mod:`.deepseek_v41.serving`); V4 models keep it in
    the shared pool blocks (``None``) and refuse the other settings."""
    config = model.config
    max_model_len = min(config.max_position_embeddings, DEFAULT_MAX_MODEL_LEN)
    if isinstance(config, DeepseekV41ModelConfig):
        from deepseek_engine.models.deepseek_v41.serving import wrap_v41

        return wrap_v41(model, max_model_len, swa_replay)
    from deepseek_engine.models.deepseek_v4.serving import wrap_v4

    return wrap_v4(model, max_model_len, swa_replay)
