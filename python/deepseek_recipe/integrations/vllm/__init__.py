"""vLLM plugin: DeepSeek V4 / V4.1 prompts and output parsing through this codec.

Installed with the `vllm` extra, vLLM finds `register` through the `vllm.general_plugins` entry
point and calls it in every process it starts. It registers one name, `deepseek_recipe`, four
times: as a tokenizer mode and a renderer (vLLM picks the renderer by tokenizer mode), and as a
reasoning parser and a tool parser. Serve with::

    vllm serve MODEL --tokenizer-mode deepseek_recipe --enable-auto-tool-choice \
        --tool-call-parser deepseek_recipe --reasoning-parser deepseek_recipe

Nothing here parses or renders by itself: requests go through `ChatCompletionRequest.convert`
and `DeepseekV4Encoding` / `DeepseekV41Encoding.encode` (token IDs, so vLLM never tokenizes a
prompt string), and output token IDs go through one `StreamProcessor` per response.
"""

from __future__ import annotations

NAME = "deepseek_recipe"
_PACKAGE = __name__


def register() -> None:
    """Register the tokenizer mode, renderer, reasoning parser and tool parser (idempotent)."""
    from vllm.reasoning import ReasoningParserManager
    from vllm.renderers.registry import RENDERER_REGISTRY
    from vllm.tokenizers.registry import TokenizerRegistry
    from vllm.tool_parsers import ToolParserManager

    entries = (
        (TokenizerRegistry.tokenizers, f"{_PACKAGE}.tokenizer", "DeepseekRecipeTokenizer"),
        (RENDERER_REGISTRY.renderers, f"{_PACKAGE}.renderer", "DeepseekRecipeRenderer"),
        (ReasoningParserManager.lazy_parsers, f"{_PACKAGE}.parsers", "DeepseekRecipeReasoningParser"),
        (ToolParserManager.lazy_parsers, f"{_PACKAGE}.parsers", "DeepseekRecipeToolParser"),
    )
    # Writing the tables directly (rather than through `register`) keeps a second call silent:
    # vLLM's registries log a warning whenever a name is registered again.
    for table, module, class_name in entries:
        table[NAME] = (module, class_name)
