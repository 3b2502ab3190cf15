"""vLLM's chat messages and chat-template kwargs as a Chat Completions body for this codec.

vLLM hands a renderer the request's messages (Responses and Anthropic Messages requests arrive
already turned into chat messages by vLLM) and `ChatParams`: the chat-template kwargs (tools,
`thinking` / `enable_thinking`, `reasoning_effort`, `continue_final_message`, ...) plus the
request's `tool_choice` and `response_format`. This module only reshapes those into the JSON the
codec's `ChatCompletionRequest` reads; every rule about what they mean lives in the codec.
"""

from __future__ import annotations

from typing import Any

# Part types vLLM's Responses-to-chat conversion leaves in messages, and their Chat names.
_PART_TYPES = {"input_text": "text", "output_text": "text", "input_image": "image_url"}
_IMAGE_PARTS = ("image_url", "input_image", "image_pil")


def plain(value: Any) -> Any:
    """JSON-ready copy: pydantic models dumped, iterables listed, `None` fields kept."""
    if hasattr(value, "model_dump"):
        return plain(value.model_dump(by_alias=True, exclude_none=True))
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "__iter__"):
        return [plain(v) for v in value]
    return value


def _message(raw: Any) -> dict:
    message = plain(raw)
    if message.get("role") == "developer":
        message["role"] = "system"
    if "reasoning" in message and "reasoning_content" not in message:
        message["reasoning_content"] = message.pop("reasoning")
    content = message.get("content")
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") in _PART_TYPES:
                part["type"] = _PART_TYPES[part["type"]]
    return message


def has_images(messages: list) -> bool:
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
                isinstance(p, dict) and p.get("type") in _IMAGE_PARTS for p in content):
            return True
    return False


def thinking_requested(kwargs: dict) -> bool:
    """Thinking on unless the kwargs turn it off (vLLM's convention for DeepSeek V4 models)."""
    if "thinking" not in kwargs and "enable_thinking" not in kwargs:
        return kwargs.get("reasoning_effort") != "none"
    flag = kwargs.get("thinking", kwargs.get("enable_thinking"))
    if isinstance(flag, dict):
        flag = flag.get("type") in ("enabled", "adaptive")
    return bool(flag) and kwargs.get("reasoning_effort") != "none"


def _tool(raw: Any) -> dict:
    tool = plain(raw)
    function = tool.get("function")
    if isinstance(function, dict):
        tool["function"] = {k: v for k, v in function.items() if v is not None}
    return {k: v for k, v in tool.items() if v is not None}


def chat_body(messages: list, kwargs: dict, tool_choice: Any, response_format: Any, model: str) -> dict:
    """The Chat Completions request the codec converts for one vLLM render call."""
    body: dict = {"model": model, "messages": [_message(m) for m in messages]}
    thinking = thinking_requested(kwargs)
    body["thinking"] = {"type": "enabled" if thinking else "disabled"}
    effort = kwargs.get("reasoning_effort")
    if thinking and effort is not None:
        body["reasoning_effort"] = effort
    tools = kwargs.get("tools")
    if tools:
        body["tools"] = [_tool(t) for t in tools]
        if tool_choice is not None:
            choice = plain(tool_choice)
            # A Responses request names a function at the top level; Chat nests it.
            if isinstance(choice, dict) and "name" in choice and "function" not in choice:
                choice = {"type": "function", "function": {"name": choice["name"]}}
            body["tool_choice"] = choice
    if response_format is not None:
        fmt = plain(response_format)
        # A structural tag is enforced by vLLM's grammar; the prompt does not describe it.
        if isinstance(fmt, dict) and fmt.get("type") not in (None, "structural_tag"):
            body["response_format"] = fmt
    if kwargs.get("continue_final_message") and body["messages"] \
            and body["messages"][-1].get("role") == "assistant":
        body["messages"][-1]["prefix"] = True
    return body


def conversation_messages(messages: list) -> list:
    """Role and text of each message, the shape vLLM keeps for echo and logging."""
    out = []
    for raw in messages:
        message = plain(raw)
        content = message.get("content")
        if isinstance(content, list):
            content = "\n\n".join(p.get("text", "") for p in content if isinstance(p, dict) and "text" in p)
        out.append({"role": message.get("role"), "content": content if content is not None else ""})
    return out
