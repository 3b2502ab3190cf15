"""Rendering a Hugging Face chat template (Jinja) the way `transformers`' `apply_chat_template`
does, with `transformers`' own renderer (an optional dependency: `pip install transformers`)."""

from __future__ import annotations

import json

from .conversation_json import chat_messages
from .inputs import InputError, read_text

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"


def _renderer():
    try:
        from transformers.utils import chat_template_utils as ctu
    except ImportError:
        raise InputError("checking a chat template needs transformers (pip install transformers)") from None
    return ctu


def tools_for_template(conv) -> list[dict] | None:
    """The conversation's tools in the OpenAI function layout templates iterate over."""
    tools = [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                               "parameters": t.parameters}} for t in conv.tools]
    return tools or None


def render_template(template: str, conv, extra: dict | None = None) -> str:
    """The prompt string a chat template renders for `conv` (generation prompt added).

    Template variables besides `messages`/`tools`: `bos_token`, `eos_token`,
    `add_generation_prompt=True`, and the thinking switches templates of the V3.x family read
    (`thinking`, `enable_thinking`), plus `extra`.
    """
    ctu = _renderer()
    kwargs = {"bos_token": BOS, "eos_token": EOS, "thinking": conv.thinking_mode,
              "enable_thinking": conv.thinking_mode}
    kwargs.update(extra or {})
    messages = chat_messages(conv)
    tools = tools_for_template(conv)
    try:
        if hasattr(ctu, "render_jinja_template"):
            rendered, _ = ctu.render_jinja_template(conversations=[messages], tools=tools, chat_template=template,
                                                    add_generation_prompt=True, **kwargs)
            return rendered[0]
        compiled = ctu._compile_jinja_template(template)  # older transformers
        return compiled.render(messages=messages, tools=tools, add_generation_prompt=True, **kwargs)
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - a template error is bad input, not a crash
        raise InputError(f"the chat template failed to render: {type(e).__name__}: {e}") from None


def read_template(path: str) -> str:
    """A template file: raw Jinja, or a tokenizer_config.json holding `chat_template`."""
    text = read_text(path)
    if path.endswith(".json"):
        try:
            value = json.loads(text).get("chat_template")
        except (ValueError, AttributeError):
            value = None
        if isinstance(value, list):  # named templates
            value = next((t["template"] for t in value if t.get("name") == "default"), None)
        if not isinstance(value, str):
            raise InputError(f"{path} has no chat_template string")
        if not value.strip():
            raise InputError(f"{path} has an empty chat_template")
        return value
    return text
