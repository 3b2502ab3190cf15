"""Conversation JSON → `deepseek_recipe.Conversation`, and Chat-style message dicts.

The layout is the canonical one of `Conversation.to_json` / `Conversation.from_json`
(`docs/conversation-json.md`); reading and validating it is the codec's job.
"""

from __future__ import annotations

import json

import deepseek_recipe as dr


def build_conversation(spec: dict):
    """The conversation a parsed conversation JSON object describes (`ValueError` if invalid)."""
    return dr.Conversation.from_json(json.dumps(spec))


def chat_messages(conv) -> list[dict]:
    """The conversation as Chat-style message dicts (what a Hugging Face chat template reads)."""
    out = []
    for m in conv.messages:
        role = m.role if hasattr(m, "role") else type(m).__name__
        d = {"role": role, "content": m.content}
        if role == "assistant":
            if m.reasoning_content is not None:
                d["reasoning_content"] = m.reasoning_content
            if m.tool_calls:
                d["tool_calls"] = [{"id": c.id, "type": "function",
                                    "function": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls]
        elif role == "tool" and m.tool_call_id is not None:
            d["tool_call_id"] = m.tool_call_id
        out.append(d)
    return out
