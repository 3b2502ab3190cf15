"""A compact PyTorch inference engine for DeepSeek V4 / V4.1.

Token IDs in, token IDs out: the engine never sees JSON. ``entrypoints.protocol_api``
(``ProtocolEngine``) and ``entrypoints.batch_cli`` connect it to the ``deepseek_recipe`` codec.

Layout: ``llm`` and ``sampling_params`` are the public API; ``core/`` is the model-agnostic serving core
(scheduler, block manager, sequence, model runner, sampler); ``models/`` holds one package per architecture
(``deepseek_v4/``, ``deepseek_v41/``), the switchboard that picks one (``models/__init__``) and the
checkpoint loader; ``layers/`` the layers both architectures use; ``speculative/`` speculative decoding;
``entrypoints/`` the protocol API and the batch CLI; ``testing/`` the fixture writers of the tests,
examples and benchmarks (the engine never imports it).
"""

from deepseek_engine.entrypoints.protocol_api import ProtocolEngine
from deepseek_engine.llm import LLM, RequestOutput
from deepseek_engine.models import load_config
from deepseek_engine.models.deepseek_v4.config import DeepseekV4ModelConfig
from deepseek_engine.models.deepseek_v4.kv_cache import KVCachePool, SequenceCache
from deepseek_engine.models.deepseek_v4.model import DeepseekV4ForCausalLM
from deepseek_engine.models.loader import load_model
from deepseek_engine.sampling_params import SamplingParams

__all__ = [
    "LLM",
    "DeepseekV4ForCausalLM",
    "DeepseekV4ModelConfig",
    "KVCachePool",
    "ProtocolEngine",
    "RequestOutput",
    "SamplingParams",
    "SequenceCache",
    "load_config",
    "load_model",
]
