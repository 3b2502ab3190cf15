"""The codec objects one served model needs, built once per tokenizer and shared.

The served model's architecture picks the API model name (and so the prompt version) from the
codec's default model table; the checkpoint's own tokenizer, handed over as its JSON text, is the
vocabulary the encoder and the stream parser use, so prompt IDs and output IDs agree with vLLM's.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import deepseek_recipe as dr

# Architecture name (config.json) -> the API model name the default model table maps to it.
MODEL_BY_ARCHITECTURE = {
    "DeepseekV41ForCausalLM": "DeepSeek-V4.1-Flash",
    "DeepseekV4ForCausalLM": "DeepSeek-V4-Pro",
}
DEFAULT_MODEL = "DeepSeek-V4.1-Flash"


@dataclass(frozen=True)
class Codec:
    model: str                  # API model name: selects V4 or V4.1 in conversion
    model_version: object       # dr.ModelVersion
    tokenizer: object           # dr.Tokenizer over the checkpoint's vocabulary
    encoding: object            # dr.DeepseekV4Encoding / DeepseekV41Encoding with the tokenizer

    def control_id(self, spelling: str) -> int | None:
        """The added-vocabulary ID of one control-token spelling, if the vocabulary has it."""
        ids = list(self.tokenizer.encode(spelling))
        return ids[0] if len(ids) == 1 else None


_LOCK = threading.Lock()
_CACHE: dict = {}


def model_name(model_config) -> str:
    """The API model name for a vLLM `ModelConfig` (V4.1 unless the architecture says V4)."""
    architectures = getattr(getattr(model_config, "hf_config", None), "architectures", None) or []
    for arch in architectures:
        if arch in MODEL_BY_ARCHITECTURE:
            return MODEL_BY_ARCHITECTURE[arch]
    return DEFAULT_MODEL


def codec_for(hf_tokenizer, model: str) -> Codec:
    """The codec for vLLM's tokenizer object and an API model name (cached per pair)."""
    key = (id(hf_tokenizer), model)
    with _LOCK:
        found = _CACHE.get(key)
        if found is not None and found[0] is hf_tokenizer:
            return found[1]
    backend = getattr(hf_tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError("the deepseek_recipe tokenizer mode needs the checkpoint's tokenizer.json "
                         "(a fast tokenizer)")
    tokenizer = dr.Tokenizer.from_str(backend.to_str())
    if model == "DeepSeek-V4-Pro":
        encoding, version = dr.DeepseekV4Encoding(), dr.ModelVersion.DeepseekV4Pro
    else:
        encoding, version = dr.DeepseekV41Encoding(), dr.ModelVersion.DeepseekV41Flash
    codec = Codec(model, version, tokenizer, encoding.with_tokenizer(tokenizer))
    with _LOCK:
        _CACHE[key] = (hf_tokenizer, codec)
    return codec
