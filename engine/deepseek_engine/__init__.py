"""A compact PyTorch inference engine for DeepSeek V4 / V4.1.

Token IDs in, token IDs out: the engine never sees JSON. ``protocol_api`` and
``batch_cli`` connect it to the ``deepseek_recipe`` codec.
"""

from deepseek_engine.config import DeepseekV4ModelConfig, load_config
from deepseek_engine.kv_cache import KVCachePool, SequenceCache
from deepseek_engine.llm import LLM, RequestOutput
from deepseek_engine.loader import load_model
from deepseek_engine.models.deepseek_v4 import DeepseekV4ForCausalLM
from deepseek_engine.sampling_params import SamplingParams

__all__ = [
    "LLM",
    "DeepseekV4ForCausalLM",
    "DeepseekV4ModelConfig",
    "KVCachePool",
    "RequestOutput",
    "SamplingParams",
    "SequenceCache",
    "load_config",
    "load_model",
]
