"""The structural tag our vLLM tool parser attaches to a request: the codec's own output grammar
(`OutputGrammar`, built from the converted request) exported for vLLM's xgrammar backend.

Kept apart from `parsers.py` (which imports vLLM) so it can be used and tested without vLLM.
"""

from __future__ import annotations

import deepseek_recipe as dr

from .codec import Codec


def structural_tag_for(codec: Codec, body: dict) -> str | None:
    """The structural-tag JSON for a Chat Completions body (as `request.chat_body` builds it),
    or `None` when the request constrains nothing (no tools, `tool_choice: none`) or is not
    one the codec converts (the renderer reports that error).
    """
    try:
        converted = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())
    except ValueError:
        return None
    constraint = converted.inference_options.output_constraint
    if constraint is None or constraint.kind not in ("tool_call", "tool_call_required"):
        return None
    grammar = dr.OutputGrammar.compile(converted, codec.tokenizer)
    return None if grammar is None else grammar.structural_tag_json()
