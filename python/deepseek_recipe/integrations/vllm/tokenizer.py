"""The `deepseek_recipe` tokenizer mode: the checkpoint's fast tokenizer, without a chat template.

vLLM keeps using it to decode output and count tokens; prompts never pass through it, because the
renderer (`renderer.py`) hands vLLM token IDs from this codec's structural encoder.
"""

from __future__ import annotations

from transformers import TokenizersBackend
from vllm.tokenizers.hf import HfTokenizer, get_cached_tokenizer
from vllm.tokenizers.protocol import TokenizerLike


class DeepseekRecipeTokenizer(TokenizerLike):
    @classmethod
    def from_pretrained(cls, *args, **kwargs) -> HfTokenizer:
        return get_cached_tokenizer(TokenizersBackend.from_pretrained(*args, **kwargs))
