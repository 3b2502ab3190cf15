"""Conversation JSON → `deepseek_recipe.Conversation`.

The layout is the neutral one the project's encoding fixtures use::

    {"messages": [{"role": "system"|"user"|"assistant"|"tool"|"latest_reminder", "content": str,
                   "reasoning_content"?: str, "tool_calls"?: [{"id", "name", "arguments"}],
                   "prefix"?: bool, "tool_call_id"?: str, "tools"?: [TOOL],
                   "image_sources"?: [{"kind": "data_url"|"url"|"bytes", "value", "detail"?}],
                   "image_token"?: str}],
     "thinking_mode"?: bool, "tools"?: [TOOL], "tool_choice"?: str, "reasoning_effort"?: str,
     "response_format"?: str, "response_schema"?: JSON, "response_regex"?: str}
    TOOL = {"name", "description"?, "parameters"?, "strict"?, "defer_loading"?}

The constructors of the native classes validate every value.
"""

from __future__ import annotations

import deepseek_recipe as dr


def _image(spec):
    kind, detail, path = spec["kind"], spec.get("detail", "high"), spec.get("path", "")
    if kind == "data_url":
        return dr.DataUrlImageSource(spec["value"], detail, path=path)
    if kind == "url":
        return dr.UrlImageSource(spec["value"], detail, path=path)
    if kind == "bytes":
        return dr.BytesImageSource(bytes.fromhex(spec["value"]), detail, path=path)
    raise ValueError(f"unknown image kind {kind!r}")


def _tool(spec):
    return dr.ToolDefinition(spec["name"], spec.get("description"), spec.get("parameters"),
                             spec.get("strict"), spec.get("defer_loading", False))


def _message(spec):
    role = spec["role"]
    images = [_image(s) for s in spec.get("image_sources") or []] or None
    kw = {"image_token": spec["image_token"]} if spec.get("image_token") is not None else {}
    if role == "system":
        tools = spec.get("tools")
        return dr.SystemMessage(spec["content"], images, None if tools is None else [_tool(t) for t in tools], **kw)
    if role == "user":
        return dr.UserMessage(spec["content"], images, **kw)
    if role == "assistant":
        calls = spec.get("tool_calls")
        calls = None if calls is None else [dr.ToolCall(c["id"], c["name"], c["arguments"]) for c in calls]
        return dr.AssistantMessage(spec.get("content", ""), spec.get("reasoning_content"), calls, spec.get("prefix", False))
    if role == "tool":
        return dr.ToolMessage(spec["content"], spec.get("tool_call_id"), images, **kw)
    if role == "latest_reminder":
        return dr.LatestReminderMessage(spec["content"])
    raise ValueError(f"unknown role {role!r}")


def build_conversation(spec: dict):
    kw = dict(
        thinking_mode=spec.get("thinking_mode", True),
        tools=[_tool(t) for t in spec.get("tools", [])],
        tool_choice=spec.get("tool_choice", "auto"),
        reasoning_effort=spec.get("reasoning_effort"),
        response_format=spec.get("response_format", "text"),
    )
    for key in ("response_schema", "response_regex"):
        if key in spec:
            kw[key] = spec[key]
    return dr.Conversation([_message(m) for m in spec.get("messages", [])], **kw)


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
