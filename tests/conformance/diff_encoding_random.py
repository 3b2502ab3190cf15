"""Broad random differential check of the conversation API against the official package.

    python tests/conformance/diff_encoding_random.py [N] [SEED] [-v]

Not part of the test suite (it needs the official side venv, see official_venv.py). It draws N
random cases from SEED and runs each through the official `deepseek-recipe==0.2.0` (side venv)
and through ours (the running interpreter's `deepseek_recipe`), then compares:

* construction: success, or the exact error type and message;
* what the constructed objects report back (reprs and properties);
* for V4 and V4.1, stock special tokens or a random override set: `render_conversation`
  (prompt, special ranges, image sources) and `encode` with the stock tokenizer and with a copy
  that adds `<｜System｜>` (token IDs, or error type and message).

Two kinds of case are drawn:

* ``spec`` cases (about 70%): well-typed conversations in the neutral format of
  encoding_spec.py (every message kind, images, tools with random JSON schemas, every
  tool_choice / effort / response format, special-token overrides, adversarial text), built and
  recorded with encoding_spec.record_case, so a failing case can be pasted into
  generate_encoding.py as it is;
* ``raw`` cases: the same conversations written as a call tree (see `build_raw`) with one
  random mutation: a wrong type or value for an argument, a missing or extra argument, an
  unknown keyword, an unknown enum name, a foreign object inside a list, a wrong argument to
  `render_conversation` / `with_special_tokens` / `with_tokenizer`, or `encode` without a
  tokenizer.

The direct API takes message content as a `str` only and has no forced tool name and no
thinking-history options; content parts, named tool choices and reasoning-content handling belong
to request conversion (see conversion_random.py).

`--fixture N SEED` records the official results of one seeded draw into
`encoding/random_seeded.json`, which the test suite replays against ours in seconds.

Typical use (the official side is the slow part, about 0.25 s of CPU per case)::

    DEEPSEEK_OFFICIAL_VENV=path/to/official-venv python \
        tests/conformance/diff_encoding_random.py 1000 3 -v

Mismatches are grouped by a short class key; the first few of each class are printed. Exit
status 1 when anything differs. Where the official package panics (PanicException) the case is
counted separately and not as a mismatch (documented in docs/encoding-differences.md).
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from encoding_spec import build_raw, error_record, record_case, record_raw, tokenizer_path  # noqa: E402

FIELDS = ["bos", "eos", "thinking_start", "thinking_end", "system", "user", "assistant", "latest_reminder",
          "dsml", "image", "ref", "ref_end", "box", "box_end", "point", "point_end", "polygon", "polygon_end"]
DEFAULTS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<think>", "</think>", "<｜System｜>", "<｜User｜>",
            "<｜Assistant｜>", "<｜latest_reminder｜>", "｜DSML｜", "<｜image｜>", "<｜ref｜>", "<｜/ref｜>", "<｜box｜>",
            "<｜/box｜>", "<｜point｜>", "<｜/point｜>", "<｜polygon｜>", "<｜/polygon｜>"]
PIECES = ["hi", "Hello, world!", "the", " ", "   ", "\t", "\n", "\n\n\n", "\r\n", "\r", "\u3000", "\u00a0",
          "你好，世界。", "日本語のテキスト", "한국어", "مرحبا", "שלום", "🎉", "👩‍💻", "🇨🇳", "e\u0301", "a\u0308\u0323",
          "\u200b", "\u200d", "\ufeff", "\u2028", "\x00", "\x01", "\x1b[0m", "\x7f", "\\", "\"", "'", "{", "}",
          '{"a": 1}', "[1, 2]", "null", "<think>", "</think>", "<think></think>", "<tool_result>", "</tool_result>",
          "<｜DSML｜ calls>", "<｜DSML｜tool_calls>", '<｜DSML｜ invoke name="f">', '<｜DSML｜invoke name="get">',
          '<｜DSML｜ parameter name="x" string="true">v</｜DSML｜ parameter>', "</｜DSML｜ invoke>", "</｜DSML｜ calls>",
          "## Tools", "## Response Format:", "Reasoning Effort:", "<｜image2｜>", "<|User|>", "<｜", "｜>", "▁",
          "x" * 120, "lorem ipsum dolor sit amet " * 8, "1e400", "-0", "3.14"] + DEFAULTS
SPELLINGS = ["", "[X]", "é", "※", "🎉", "<|user|>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜",
             "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜image｜>", " ", "\n", "<tool>", "T", "思考", "<｜System｜>"]
IMAGE_TOKENS = ["<｜image｜>", "[IMG]", "图", "<｜User｜>", "🖼", " "]
INTS = [0, 1, -1, 7, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -2**63, 2**64 - 1, 10**18]
FLOATS = [0.0, -0.0, 0.1, 0.5, 1.0, 1e-7, 1.5e-5, 123.456, 1e15, 1e16, 7e16, 1e21, 2.5e300, 5e-324, -3.75, 1 / 3]
KEYS = ["type", "properties", "required", "items", "enum", "description", "default", "additionalProperties",
        "anyOf", "$ref", "$defs", "minimum", "format", "名前", "k<｜User｜>", "</think>", "", " ", "a.b", "🎉", "\n"]
DETAILS = ["low", "high", "original", "auto"]


def _added_spellings():
    """Every token of the real tokenizer's added vocabulary (not a hand list)."""
    try:
        return [t["content"] for t in json.loads(Path(tokenizer_path()).read_text(encoding="utf-8"))["added_tokens"]]
    except Exception:  # noqa: BLE001 - without the tokenizer the harness cannot run anyway
        return []


# Typed into every text field: user/system/assistant content, reasoning, tool arguments and
# results, tool names and descriptions, schema keys and values, call IDs.
ADDED = _added_spellings()
BAD_ENUMS = ["", "HIGH", "Auto", "medium", "none ", "ＡＵＴＯ", "json", "regex", "json_schema", "text", "minimal",
             "ultra", "any", "forced", "get_weather", "low\x00", "高"]


def piece(rng):
    if ADDED and rng.random() < 0.3:
        return rng.choice(ADDED)
    return rng.choice(PIECES)


def text(rng, maxn=6):
    n = rng.choice([0, 1, 1, 2, 3, maxn])
    return "".join(piece(rng) for _ in range(n))


def jval(rng, depth=0):
    r = rng.random()
    if depth >= 4 or r < 0.35:
        return rng.choice([None, True, False, rng.choice(INTS), rng.choice(FLOATS), text(rng, 3), rng.randint(-99, 99)])
    if r < 0.55:
        return [jval(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(KEYS + [text(rng, 2)]): jval(rng, depth + 1) for _ in range(rng.randint(0, 5))}


def schema(rng, depth=0):
    if depth >= 3 or rng.random() < 0.3:
        t = rng.choice(["string", "integer", "number", "boolean", "null", ["string", "null"]])
        s = {"type": t}
        if rng.random() < 0.4:
            s["description"] = text(rng)
        if rng.random() < 0.2:
            s["enum"] = [jval(rng, 3) for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.2:
            s["default"] = jval(rng, 3)
        return s
    if rng.random() < 0.25:
        return {"type": "array", "items": schema(rng, depth + 1)}
    props = {rng.choice(KEYS + [text(rng, 2), f"p{depth}", piece(rng)]): schema(rng, depth + 1) for _ in range(rng.randint(0, 5))}
    s = {"type": "object", "properties": props}
    if props and rng.random() < 0.6:
        s["required"] = rng.sample(list(props), rng.randint(0, len(props)))
    if rng.random() < 0.3:
        s["additionalProperties"] = rng.choice([False, True, {"type": "string"}])
    if rng.random() < 0.1:
        s["$defs"] = {"d": schema(rng, depth + 1)}
    return s


def params(rng):
    r = rng.random()
    if r < 0.6:
        return schema(rng)
    if r < 0.75:
        return None
    return jval(rng)


def tool(rng):
    name = rng.choice(["get_weather", "search", "f", "noop", "ns::tool", "", "名前", "a-b_c", "x" * 80, text(rng, 2),
                       piece(rng)])
    t = {"name": name}
    if rng.random() < 0.8:
        t["description"] = rng.choice([None, text(rng), "Get the weather."])
    if rng.random() < 0.85:
        t["parameters"] = params(rng)
    if rng.random() < 0.4:
        t["strict"] = rng.choice([None, True, False])
    if rng.random() < 0.3:
        t["defer_loading"] = rng.random() < 0.5
    return t


def arguments(rng):
    r = rng.random()
    if r < 0.55:
        obj = {rng.choice(KEYS + ["city", "q", text(rng, 2)]): jval(rng, 1) for _ in range(rng.randint(0, 4))}
        sep = rng.choice([None, (",", ":"), (", ", ": "), (" , ", " : ")])
        return json.dumps(obj, ensure_ascii=rng.random() < 0.3, separators=sep)
    return rng.choice(["", "{}", "null", "[1,2]", "5", '"str"', "notjson", '{"a":1,"a":2}', '{"big":1E400}', " {\"a\" : 1 } ",
                       '{"n":12345678901234567890123}', '{"f":1e5,"g":1E-7,"h":-0}', '"{\\"a\\":1}"', text(rng), '{"a":'])


def image(rng):
    kind = rng.choice(["data_url", "url", "bytes"])
    value = {"data_url": rng.choice(["data:image/png;base64,AAAA", "data:,x", "data:image/jpeg;base64,/9j/" + "A" * 40, text(rng, 2)]),
             "url": rng.choice(["https://example.com/a.png", "http://x/y.jpg?q=1&r=2", "ftp://nope", "", text(rng, 2)]),
             "bytes": rng.choice(["", "89504e47", "00ff" * 20])}[kind]
    return {"kind": kind, "value": value, "detail": rng.choice(DETAILS), "path": rng.choice(["", "messages.0.content[1]", text(rng, 1)])}


def content_with_images(rng, imgs, image_token):
    tokens = image_token or "<｜image｜>"
    parts = [text(rng, 4) for _ in range(rng.randint(1, 3))]
    out = []
    for p in parts:
        out.append(p)
        for _ in range(rng.choice([0, 0, 1, 1, 2])):
            out.append(tokens if rng.random() < 0.8 else "<｜image｜>")
    return "".join(out)


def message(rng, known_ids):
    kind = rng.choices("SUATL", weights=[12, 30, 30, 20, 8])[0]
    if kind in "SUT":
        imgs = [image(rng) for _ in range(rng.choice([0, 0, 0, 1, 2, 3]))]
        itok = rng.choice([None, None, None] + IMAGE_TOKENS)
        m = {"content": content_with_images(rng, imgs, itok) if imgs or rng.random() < 0.2 else text(rng)}
        if imgs:
            m["image_sources"] = imgs
        if itok is not None:
            m["image_token"] = itok
        if kind == "S":
            m["role"] = "system"
            if rng.random() < 0.2:
                m["tools"] = [tool(rng) for _ in range(rng.randint(0, 3))]
        elif kind == "U":
            m["role"] = "user"
        else:
            m["role"] = "tool"
            m["tool_call_id"] = rng.choice(known_ids + known_ids + [None, "unknown", ""]) if known_ids else rng.choice([None, "zz"])
        return m
    if kind == "A":
        calls = None
        if rng.random() < 0.45:
            calls = []
            for _ in range(rng.choice([0, 1, 1, 2, 3, 4])):
                cid = rng.choice([f"call_{rng.randint(0, 9)}", f"c{len(known_ids)}", "", text(rng, 1)])
                calls.append({"id": cid, "name": rng.choice(["get_weather", "search", "f", "", text(rng, 1)]), "arguments": arguments(rng)})
                known_ids.append(cid)
        return {"role": "assistant", "content": text(rng), "reasoning_content": rng.choice([None, "", text(rng)]),
                "tool_calls": calls, "prefix": rng.random() < 0.12}
    return {"role": "latest_reminder", "content": text(rng)}


def conversation(rng):
    known = []
    msgs = [message(rng, known) for _ in range(rng.choice([0, 1, 2, 3, 4, 5, 6, 8, 10]))]
    c = {"messages": msgs, "thinking_mode": rng.random() < 0.55,
         "tools": [tool(rng) for _ in range(rng.choice([0, 0, 1, 2, 3]))],
         "tool_choice": rng.choice(["auto", "auto", "none", "required"]),
         "reasoning_effort": rng.choice([None, "low", "high", "xhigh", "max"]),
         "response_format": "text"}
    r = rng.random()
    if r < 0.15:
        c["response_format"] = "json_object"
    elif r < 0.35:
        c["response_schema"] = rng.choice([schema(rng), schema(rng), jval(rng)])
    elif r < 0.45:
        c["response_regex"] = rng.choice([r"^\d{3}-[a-z]+$", "", text(rng, 2), "(a|b)*"])
    elif r < 0.5:
        # invalid combinations and names (ValueError from the constructor)
        k = rng.choice(["tool_choice", "reasoning_effort", "response_format", "combo"])
        if k == "combo":
            c.update(rng.choice([{"response_format": "json_object", "response_schema": {}},
                                 {"response_format": "json_object", "response_regex": "a"},
                                 {"response_schema": None, "response_regex": "a"},
                                 {"response_schema": {}, "response_regex": None},
                                 {"response_format": "json_schema"}, {"response_format": "regex", "response_regex": "a"},
                                 {"response_format": "text", "response_schema": {"a": 1}}]))
        else:
            c[k] = rng.choice(BAD_ENUMS)
    return c


def special_tokens(rng):
    if rng.random() < 0.75:
        return None
    return {f: rng.choice(SPELLINGS) for f in rng.sample(FIELDS, rng.randint(1, 4))}


# ---------------------------------------------------------------------------------------------
# raw call trees and their mutations

SIGS = {  # class -> (positional names, keyword-only names); None-able flags are not needed here
    "ToolCall": (["id", "name", "arguments"], []),
    "ToolDefinition": (["name", "description", "parameters", "strict", "defer_loading"], []),
    "DataUrlImageSource": (["data_url", "detail"], ["path"]),
    "UrlImageSource": (["url", "detail"], ["path"]),
    "BytesImageSource": (["data", "detail"], ["path"]),
    "SystemMessage": (["content", "image_sources", "tools"], ["image_token"]),
    "UserMessage": (["content", "image_sources"], ["image_token"]),
    "AssistantMessage": (["content", "reasoning_content", "tool_calls", "prefix"], []),
    "ToolMessage": (["content", "tool_call_id", "image_sources"], ["image_token"]),
    "LatestReminderMessage": (["content"], []),
    "Conversation": (["messages"], ["thinking_mode", "tools", "tool_choice", "reasoning_effort", "response_format",
                                    "response_schema", "response_regex"]),
    "SpecialTokens": ([], FIELDS),
}


def call_node(cls, args, kw=None):
    return {"@call": cls, "args": args, "kw": kw or {}}


def image_node(s):
    cls = {"data_url": "DataUrlImageSource", "url": "UrlImageSource", "bytes": "BytesImageSource"}[s["kind"]]
    v = {"@bytes": s["value"]} if s["kind"] == "bytes" else s["value"]
    return call_node(cls, [v, s["detail"]], {"path": s["path"]})


def tool_node(t):
    return call_node("ToolDefinition", [t["name"], t.get("description"), t.get("parameters"), t.get("strict"),
                                        t.get("defer_loading", False)])


def message_node(m):
    imgs = [image_node(s) for s in m.get("image_sources") or []] or None
    kw = {"image_token": m["image_token"]} if m.get("image_token") is not None else {}
    role = m["role"]
    if role == "system":
        tools = m.get("tools")
        return call_node("SystemMessage", [m["content"], imgs, None if tools is None else [tool_node(t) for t in tools]], kw)
    if role == "user":
        return call_node("UserMessage", [m["content"], imgs], kw)
    if role == "tool":
        return call_node("ToolMessage", [m["content"], m.get("tool_call_id"), imgs], kw)
    if role == "assistant":
        calls = m.get("tool_calls")
        calls = None if calls is None else [call_node("ToolCall", [c["id"], c["name"], c["arguments"]]) for c in calls]
        return call_node("AssistantMessage", [m["content"], m.get("reasoning_content"), calls, m.get("prefix", False)])
    return call_node("LatestReminderMessage", [m["content"]])


def conversation_node(c):
    kw = {k: c[k] for k in ("thinking_mode", "tool_choice", "reasoning_effort", "response_format") if k in c}
    kw["tools"] = [tool_node(t) for t in c.get("tools", [])]
    for k in ("response_schema", "response_regex"):
        if k in c:
            kw[k] = c[k]
    return call_node("Conversation", [[message_node(m) for m in c["messages"]]], kw)


WRONG = [1, 0, -1, 1.5, None, True, False, "s", "", [], {}, {"@tuple": ["a"]}, {"@bytes": "78"}, {"@object": 0},
         {"@float": "nan"}, 2**70, {"@set": [1]}, ["x"], {"a": 1}, {"@call": "ToolCall", "args": ["i", "n", "{}"], "kw": {}},
         call_node("UserMessage", ["u"]), call_node("UrlImageSource", ["https://x"]), call_node("ToolDefinition", ["t"]),
         {"@bytearray": "78"}, {"@str_subclass": "abc"}, "\ud800", {"@dict_intkey": 1}]


def all_calls(node, out):
    if isinstance(node, dict):
        if "@call" in node:
            out.append(node)
            for a in node["args"]:
                all_calls(a, out)
            for a in node["kw"].values():
                all_calls(a, out)
        else:
            for v in node.values():
                all_calls(v, out)
    elif isinstance(node, list):
        for v in node:
            all_calls(v, out)
    return out


def mutate(rng, raw):
    """Apply one random breaking (or harmless-looking) change to the raw case in place; describe it."""
    calls = all_calls(raw["conv"], [])
    if raw.get("special_tokens"):
        calls += all_calls(raw["special_tokens"], [])
    r = rng.random()
    if r < 0.08:
        raw["render_arg"] = rng.choice(WRONG + [call_node("UserMessage", ["x"])])
        return "render_arg"
    if r < 0.12:
        raw["special_tokens"] = rng.choice(WRONG[:12] + [call_node("Conversation", [])])
        return "with_special_tokens arg"
    if r < 0.15:
        raw["tokenizer_arg"] = rng.choice(WRONG[:12])
        return "with_tokenizer arg"
    if r < 0.17:
        raw["no_tokenizer"] = True
        return "encode without tokenizer"
    if r < 0.22:
        raw["special_tokens"] = call_node("SpecialTokens", [], {rng.choice(FIELDS + ["foo", "System"]): rng.choice(WRONG + SPELLINGS)})
        return "SpecialTokens kw"
    node = rng.choice(calls)
    cls = node["@call"]
    pos, kwonly = SIGS[cls]
    r = rng.random()
    names = pos + kwonly
    if r < 0.45 and names:
        name = rng.choice(names)
        val = rng.choice(WRONG + BAD_ENUMS[:6])
        if name in pos and pos.index(name) < len(node["args"]):
            node["args"][pos.index(name)] = val
        else:
            node["kw"][name] = val
        return f"{cls}.{name} value"
    if r < 0.55 and node["args"]:
        node["args"].pop()
        return f"{cls} missing positional"
    if r < 0.62:
        node["args"] = node["args"] + [None] * (len(pos) - len(node["args"])) + [rng.choice(WRONG[:6])]
        return f"{cls} extra positional"
    if r < 0.7:
        node["kw"][rng.choice(["bogus", "Content", "role", "image_tokens", "id", "tools", "messages"])] = "x"
        return f"{cls} unknown keyword"
    if r < 0.8 and node["args"]:
        i = rng.randrange(len(node["args"]))
        if i < len(pos):
            node["kw"][pos[i]] = node["args"][i]
            if rng.random() < 0.5:
                node["args"] = node["args"][:i]  # proper keyword call (valid unless an earlier slot was dropped)
            return f"{cls} positional as keyword"
    if r < 0.85 and kwonly:
        k = rng.choice(kwonly)
        node["args"] = node["args"] + [None] * (len(pos) - len(node["args"])) + ["x"]
        return f"{cls} keyword-only given positionally ({k})"
    # a foreign object inside one of the lists
    lists = [(n, i) for n in calls for i, a in enumerate(n["args"]) if isinstance(a, list)]
    lists += [(n, k) for n in calls for k, a in n["kw"].items() if isinstance(a, list) and k in ("tools",)]
    if lists:
        n, i = rng.choice(lists)
        target = n["args"][i] if isinstance(i, int) else n["kw"][i]
        bad = rng.choice(WRONG)
        target.insert(rng.randint(0, len(target)), bad)
        if rng.random() < 0.3:
            wrapped = {"@tuple": list(target)}
            if isinstance(i, int):
                n["args"][i] = wrapped
            else:
                n["kw"][i] = wrapped
        return f"{n['@call']} foreign list item"
    node["args"] = [rng.choice(WRONG)]
    return f"{cls} first arg"


def draw(n, seed):
    rng = random.Random(seed)
    out = []
    for k in range(n):
        c = conversation(rng)
        st = special_tokens(rng)
        name = f"s{seed}_{k}"
        if rng.random() < 0.7:
            out.append({"name": name, "conversation": c, "special_tokens": st, "texts": [text(rng) for _ in range(2)]})
        else:
            raw = {"conv": conversation_node(c),
                   "special_tokens": None if st is None else call_node("SpecialTokens", [], st)}
            # valid keyword spellings of optional positionals are part of the surface too
            what = mutate(rng, raw) if rng.random() < 0.9 else "none"
            out.append({"name": name, "raw": raw, "mutation": what})
    return out


# ---------------------------------------------------------------------------------------------
# recording (runs in both interpreters) and comparison


def readback(dr, spec):
    """What the constructed objects report back: reprs and every property."""
    from encoding_spec import build_conversation, image_record
    try:
        conv = build_raw(dr, spec["raw"]["conv"]) if "raw" in spec else build_conversation(dr, spec["conversation"])
    except BaseException:  # noqa: BLE001 - construction errors are compared elsewhere
        return None
    if not isinstance(conv, dr.Conversation):
        return None

    def tool(t):
        return [repr(t), t.name, t.description, t.parameters, t.strict, t.defer_loading]

    msgs = []
    for m in conv.messages:
        row = [type(m).__name__, repr(m), m.role, m.content, m.reasoning_content, m.tool_call_id, m.prefix,
               None if m.tool_calls is None else [[repr(c), c.id, c.name, c.arguments] for c in m.tool_calls],
               [image_record(x) + [repr(x)] for x in m.image_sources]]
        if isinstance(m, dr.SystemMessage):
            row.append(None if m.tools is None else [tool(t) for t in m.tools])
        msgs.append(row)
    return {"repr": repr(conv), "messages": msgs, "thinking_mode": conv.thinking_mode, "tools": [tool(t) for t in conv.tools],
            "tool_choice": conv.tool_choice, "reasoning_effort": conv.reasoning_effort, "response_format": conv.response_format,
            "response_schema": conv.response_schema, "response_regex": conv.response_regex}


def record(path: str) -> None:
    import deepseek_recipe as dr
    from encoding_spec import system_tokenizer_json, tokenizer_path

    text_ = Path(tokenizer_path()).read_text(encoding="utf-8")
    toks = {"tokens": dr.Tokenizer.from_str(text_), "tokens_sys": dr.Tokenizer.from_str(system_tokenizer_json(text_))}
    res = []
    for spec in json.loads(Path(path).read_text(encoding="utf-8")):
        try:
            row = record_raw(dr, spec, toks) if "raw" in spec else record_case(dr, spec, toks)
            row["readback"] = readback(dr, spec)
            if "texts" in spec:
                row["tokenizer_encode"] = [_tokenizer_encode(toks["tokens"], t) for t in spec["texts"]]
            res.append(row)
        except BaseException as e:  # noqa: BLE001 - the harness itself must never stop a run
            res.append({"harness_error": error_record(e)})
    sys.stdout.write(json.dumps(res))


def _tokenizer_encode(tok, text_):
    """`Tokenizer.encode` (the full vocabulary: spellings become their tokens), or its error."""
    try:
        return tok.encode(text_)
    except BaseException as e:  # noqa: BLE001
        return {"error": error_record(e)}


def run_ours(path):
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        record(path)
    return json.loads(buf.getvalue())


def has_panic(x):
    if isinstance(x, dict):
        if x.get("type") == "PanicException":
            return True
        return any(has_panic(v) for v in x.values())
    if isinstance(x, list):
        return any(has_panic(v) for v in x)
    return False


def classify(want, got):
    """Short key naming the first differing field."""
    for key in ("harness_error", "construct_error"):
        if want.get(key) != got.get(key):
            w, g = want.get(key), got.get(key)
            return f"{key}: official {w and w['type']} / ours {g and g['type']}"
    if want.get("readback") != got.get("readback"):
        return "readback"
    if want.get("tokenizer_encode") != got.get("tokenizer_encode"):
        return "tokenizer_encode"
    for enc in ("v4", "v41"):
        w, g = want.get(enc, {}), got.get(enc, {})
        for f in ("render_error", "prompt", "special_ranges", "image_sources", "tokens", "tokens_sys"):
            if w.get(f) != g.get(f):
                return f"{f}"
    return "other"


FIXTURE = HERE / "encoding" / "random_seeded.json"


def write_fixture(n, seed):
    """Record the official results of `draw(n, seed)` for the suite's short seeded run
    (tests/python/test_encoding_random_seeded.py replays it against ours)."""
    from official_venv import run_in_official
    os.environ["RUST_BACKTRACE"] = "0"
    cases = draw(n, seed)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(cases, f)
    official = json.loads(run_in_official(__file__, "--record", f.name).stdout)
    # One case per line: readable in a diff, compact on disk.
    FIXTURE.write_text(f'{{"n": {n}, "seed": {seed},\n "cases": [\n' + ",\n".join(json.dumps(c) for c in cases)
                       + '],\n "official": [\n' + ",\n".join(json.dumps(c) for c in official) + "]}\n",
                       encoding="utf-8")
    print(f"{n} cases -> {FIXTURE}")


def main(argv):
    verbose = "-v" in argv
    argv = [a for a in argv if a != "-v"]
    if argv and argv[0] == "--record":
        record(argv[1])
        return 0
    if argv and argv[0] == "--fixture":
        write_fixture(int(argv[1]), int(argv[2]))
        return 0
    n = int(argv[0]) if argv else 1000
    seed = int(argv[1]) if len(argv) > 1 else 1
    from official_venv import run_in_official
    os.environ["RUST_BACKTRACE"] = "0"  # official panics would print slow backtraces
    cases = draw(n, seed)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(cases, f)  # ASCII escapes keep lone surrogates intact
    official = json.loads(run_in_official(__file__, "--record", f.name).stdout)
    ours = run_ours(f.name)
    classes = defaultdict(list)
    panics = 0
    kinds = Counter("raw" if "raw" in c else "spec" for c in cases)
    construct_fail = sum(1 for w in official if "construct_error" in w)
    for case, want, got in zip(cases, official, ours):
        if want == got:
            continue
        if has_panic(want) and not has_panic(got):
            panics += 1
            continue
        key = classify(want, got)
        if "mutation" in case:
            key += f" [{case['mutation']}]"
        classes[key].append((case, want, got))
    bad = sum(len(v) for v in classes.values())
    for key, items in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        print(f"== {len(items)} x {key}")
        for case, want, got in items[: (3 if verbose else 1)]:
            print("  case    ", json.dumps(case, ensure_ascii=False)[:1500])
            print("  official", json.dumps(want, ensure_ascii=False)[:800])
            print("  ours    ", json.dumps(got, ensure_ascii=False)[:800])
    print(f"seed {seed}: {n} cases ({kinds['spec']} spec, {kinds['raw']} raw; {construct_fail} fail to construct "
          f"officially), mismatches {bad} ({100.0 * bad / max(n, 1):.2f}%), official panics skipped {panics}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
