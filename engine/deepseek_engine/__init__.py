"""Compact offline inference engine for DeepSeek V4 checkpoints (PyTorch)."""

from deepseek_engine.config import DeepseekV4ModelConfig, load_config
from deepseek_engine.kv_cache import KVCachePool, SequenceCache
from deepseek_engine.loader import load_model
from deepseek_engine.models.deepseek_v4 import DeepseekV4ForCausalLM

__all__ = [
    "DeepseekV4ForCausalLM",
    "DeepseekV4ModelConfig",
    "KVCachePool",
    "SequenceCache",
    "load_config",
    "load_model",
]
