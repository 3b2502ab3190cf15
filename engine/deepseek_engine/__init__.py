"""A compact PyTorch inference engine for DeepSeek V4 / V4.1.

Token IDs in, token IDs out: the engine never sees JSON. ``protocol_api`` and
``batch_cli`` connect it to the ``deepseek_recipe`` codec.
"""

from .llm import LLM, RequestOutput
from .sampling_params import SamplingParams

__all__ = ["LLM", "RequestOutput", "SamplingParams"]
