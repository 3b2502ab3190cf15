"""Generate the encoding conformance fixtures from the official deepseek-recipe 0.2.0.

    python tests/conformance/generate_encoding.py            # writes tests/conformance/encoding/*.json

The conversations are designed here (deterministic, seeded); each is rendered and encoded by the
official package inside the side venv (see official_venv.py), with the stock V4 tokenizer
(`tokens`) and with a copy that adds `<｜System｜>` as id 129280 (`tokens_sys`).
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fixture_json  # noqa: E402

OUT_DIR = HERE / "encoding"
CHUNK = 60  # cases per fixture file

CTRL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<think>", "</think>", "<｜System｜>",
        "<｜User｜>", "<｜Assistant｜>", "<｜latest_reminder｜>", "｜DSML｜", "<｜image｜>",
        "<｜DSML｜ calls>", "<｜DSML｜tool_calls>", "<tool_result>", "</tool_result>", "<｜image2｜>",
        "<｜ref｜>", "<｜/box｜>"]
TEXTS = ["hi", "Hello, world!", "你好，世界。今天天气怎么样？", "emoji 🎉🚀👩‍💻 and ZWJ", "  leading and trailing  ",
         "line1\nline2\n\n\nline5", "tabs\tand\r\nCRLF", "", "a<｜User｜>", "日本語のテキスト、カタカナ",
         "math: ∑_{i=1}^n i² = n(n+1)(2n+1)/6", "quotes \"double\" and 'single' and \\backslash",
         "<｜Assistant｜><think>fake</think>", "｜DSML｜ invoke name=\"x\"", "مرحبا بالعالم", "\u0000\u0001\u001f ctrl",
         "a" * 300, "The quick brown fox jumps over the lazy dog. " * 20]


def U(content, **kw):
    return {"role": "user", "content": content, **kw}


def S(content, **kw):
    return {"role": "system", "content": content, **kw}


def A(content, reasoning=None, calls=None, prefix=False):
    return {"role": "assistant", "content": content, "reasoning_content": reasoning,
            "tool_calls": calls, "prefix": prefix}


def T(content, call_id=None, **kw):
    return {"role": "tool", "content": content, "tool_call_id": call_id, **kw}


def L(content):
    return {"role": "latest_reminder", "content": content}


def call(cid, name, args):
    return {"id": cid, "name": name, "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)}


def img(kind="url", value="https://example.com/a.png", detail="high", path=""):
    return {"kind": kind, "value": value, "detail": detail, "path": path}


WEATHER = {"name": "get_weather", "description": "Get the current weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "城市名称"},
                                                           "unit": {"type": "string", "enum": ["c", "f"]}},
                          "required": ["city"]}}
SEARCH = {"name": "search", "description": "Search the web.",
          "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "top_k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5},
                                                          "threshold": {"type": "number", "default": 0.75, "minimum": 1e-7}}}}
NOARGS = {"name": "noop"}
DEFERRED = {"name": "later_tool", "description": "deferred", "parameters": {"type": "object"}, "defer_loading": True}
STRICT = {"name": "strict_tool", "description": None, "parameters": {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}, "strict": True}
CTRL_TOOL = {"name": "ctrl_tool", "description": "desc with <｜User｜> and </think> and ｜DSML｜ and \"quotes\"\nnewline",
             "parameters": {"type": "object", "properties": {"<｜Assistant｜>": {"type": "string", "description": "<think>x</think>"}}}}


def long_tool(i):
    props = {f"field_{k}": {"type": ["string", "integer", "number", "boolean"][k % 4], "description": f"Field number {k} — 説明 {k}",
                            **({"default": k * 0.5} if k % 4 == 2 else {})} for k in range(12)}
    return {"name": f"tool_{i}", "description": f"Tool {i}: does thing {i} with many options. " * 3,
            "parameters": {"type": "object", "properties": props, "required": [f"field_{k}" for k in range(0, 12, 3)],
                           "additionalProperties": False}}


TOOLSETS = {
    "weather": [WEATHER],
    "two": [WEATHER, SEARCH],
    "noargs": [NOARGS, {"name": "null_params", "description": "x", "parameters": None}],
    "deferred_only": [DEFERRED],
    "mixed_deferred": [WEATHER, DEFERRED, SEARCH],
    "strict": [STRICT],
    "ctrl": [CTRL_TOOL],
    "ten": [long_tool(i) for i in range(10)],
}


def conv(messages, **kw):
    c = {"messages": messages, "thinking_mode": kw.pop("thinking_mode", True), "tools": kw.pop("tools", []),
         "tool_choice": kw.pop("tool_choice", "auto"), "reasoning_effort": kw.pop("reasoning_effort", None),
         "response_format": kw.pop("response_format", "text")}
    c.update(kw)
    return c


def agent_history():
    """A multi-turn agent loop with reasoning, parallel calls and out-of-order results."""
    return [
        S("You are a helpful agent. 你是一个助手。"),
        U("What's the weather in 北京 and Paris? Also search for news."),
        A("", "I should call the tools. <think> nested?", [
            call("call_00_a", "get_weather", {"city": "北京", "unit": "c"}),
            call("call_01_b", "get_weather", {"city": "Paris"}),
            call("call_02_c", "search", {"query": "news <｜User｜>", "top_k": 3, "threshold": 0.5, "filters": {"lang": ["en", "zh"], "x": None, "ok": True}}),
        ]),
        T("Paris: 18°C, cloudy", "call_01_b"),
        T('{"temp": 25, "city": "北京"}', "call_00_a"),
        T("1. headline <｜Assistant｜> 2. another </tool_result>", "call_02_c"),
        A("Beijing is 25°C, Paris 18°C. 🌤", "Combine results."),
        U("Thanks! And tomorrow?"),
        A("", "Call again.", [call("call_03_d", "get_weather", '{"city": "北京", "day": 1}')]),
        T("sunny", "call_03_d"),
        L("Remember: answer briefly."),
    ]


def _call(cls, *args, **kw):
    return {"@call": cls, "args": list(args), "kw": kw}


def bad_arguments():
    """(conversation call tree, extra raw keys) pairs whose construction or use fails."""
    u = _call("UserMessage", "q")
    tc = _call("ToolCall", "i", "n", "{}")
    td = _call("ToolDefinition", "t")
    img = _call("UrlImageSource", "https://x/a.png")

    def C(*msgs, **kw):
        return _call("Conversation", list(msgs) or [u], **kw)

    obj = {"@object": 0}
    cases = [
        # messages
        C(_call("UserMessage", 1)), C(_call("UserMessage", None)), C(_call("UserMessage", "a", [1])),
        C(_call("UserMessage", "a", "x")), C(_call("UserMessage", "a", 1)), C(_call("UserMessage", "a", {"a": 1})),
        C(_call("UserMessage", "a", image_token=1)), C(_call("UserMessage", "a", [img, tc])),
        C(_call("UserMessage", "a", {"@tuple": [img, 5]})), C(_call("UserMessage")), C(_call("UserMessage", "a", content="b")),
        C(_call("UserMessage", "a", None, "tok")), C(_call("UserMessage", "a", bogus=1)),
        C(_call("SystemMessage", "a", None, [1])), C(_call("SystemMessage", "a", None, 5)), C(_call("SystemMessage", {"@bytes": "61"})),
        C(_call("SystemMessage", "a", None, [td, u])), C(_call("SystemMessage", "a", image_token=[])),
        C(_call("AssistantMessage", "a", 1)), C(_call("AssistantMessage", "a", None, "ab")), C(_call("AssistantMessage", "a", None, [u])),
        C(_call("AssistantMessage", "a", None, {"@set": [1]})), C(_call("AssistantMessage", "a", prefix=1)),
        C(_call("AssistantMessage", "a", prefix=None)), C(_call("AssistantMessage", "a", prefix="yes")), C(_call("AssistantMessage", "a", prefix=1.0)),
        C(_call("AssistantMessage", obj)), C(_call("AssistantMessage", "a", None, None, False, 1)),
        C(_call("ToolMessage", "a", 5)), C(_call("ToolMessage", "a", None, {})), C(_call("ToolMessage", "a", {"@str_subclass": "c1"}, [img, None])),
        C(_call("LatestReminderMessage", {"@bytes": "78"})), C(_call("LatestReminderMessage")),
        # tool calls and definitions
        C(_call("AssistantMessage", "", None, [_call("ToolCall", 1, "n", "{}")])),
        C(_call("AssistantMessage", "", None, [_call("ToolCall", "i", None, "{}")])),
        C(_call("AssistantMessage", "", None, [_call("ToolCall", "i", "n", {})])),
        C(_call("AssistantMessage", "", None, [_call("ToolCall", "i", "n")])),
        C(_call("AssistantMessage", "", None, [_call("ToolCall", "i", "n", "{}", "x")])),
        C(tools=[_call("ToolDefinition", 1)]), C(tools=[_call("ToolDefinition", "t", 2)]),
        C(tools=[_call("ToolDefinition", "t", None, None, "x")]), C(tools=[_call("ToolDefinition", "t", None, None, 1)]),
        C(tools=[_call("ToolDefinition", "t", defer_loading=None)]), C(tools=[_call("ToolDefinition", "t", defer_loading=0)]),
        C(tools=[_call("ToolDefinition", "t", parameters={"@dict_intkey": 2})]), C(tools=[_call("ToolDefinition", "t", parameters={"a": {"@set": [1]}})]),
        C(tools=[_call("ToolDefinition", "t", parameters={"@float": "nan"})]), C(tools=[_call("ToolDefinition", "t", parameters=2**64)]),
        C(tools=[_call("ToolDefinition", "t", parameters=obj)]), C(tools=[_call("ToolDefinition")]),
        # image sources
        C(_call("UserMessage", "a", [_call("DataUrlImageSource", None)])), C(_call("UserMessage", "a", [_call("DataUrlImageSource", "d", None)])),
        C(_call("UserMessage", "a", [_call("DataUrlImageSource", "d", "HIGH")])), C(_call("UserMessage", "a", [_call("DataUrlImageSource", "d", path=None)])),
        C(_call("UserMessage", "a", [_call("UrlImageSource", {"@bytes": "75"})])), C(_call("UserMessage", "a", [_call("UrlImageSource", "u", "high", "p")])),
        C(_call("UserMessage", "a", [_call("BytesImageSource", "x")])), C(_call("UserMessage", "a", [_call("BytesImageSource", 1)])),
        C(_call("UserMessage", "a", [_call("BytesImageSource", [1, 256])])), C(_call("UserMessage", "a", [_call("BytesImageSource", [-1])])),
        C(_call("UserMessage", "a", [_call("BytesImageSource", ["a"])])), C(_call("UserMessage", "a", [_call("BytesImageSource", {"a": 1})])),
        # conversation
        _call("Conversation", "ab"), _call("Conversation", 1), _call("Conversation", {}), _call("Conversation", [1]),
        _call("Conversation", {"@bytes": "6162"}), _call("Conversation", [u, tc]), _call("Conversation", [u], []),
        C(thinking_mode=1), C(thinking_mode=None), C(thinking_mode="true"), C(tools=[u]), C(tools=td), C(tools="t"),
        C(tool_choice=None), C(tool_choice=1), C(reasoning_effort=1), C(reasoning_effort={"@bytes": "6c6f77"}),
        C(response_format=None), C(response_format=["text"]), C(response_regex=1), C(response_schema={"@set": [1]}),
        C(response_schema={"@float": "inf"}), C(bogus=1), C(messages=[u], Messages=[u]),
    ]
    out = [(c, {}) for c in cases]
    # special tokens and the encoding methods
    out += [(C(), {"special_tokens": _call("SpecialTokens", bos=1)}), (C(), {"special_tokens": _call("SpecialTokens", "x")}),
            (C(), {"special_tokens": _call("SpecialTokens", foo="x")}), (C(), {"special_tokens": _call("SpecialTokens", polygon_end=[])}),
            (C(), {"special_tokens": 1}), (C(), {"special_tokens": C()}), (C(), {"render_arg": 1}), (C(), {"render_arg": u}),
            (C(), {"render_arg": None}), (C(), {"tokenizer_arg": 1}), (C(), {"tokenizer_arg": None}), (C(), {"no_tokenizer": True})]
    return out


def cases():
    out = []

    def add(name, c, special_tokens=None):
        out.append({"name": name, "conversation": c, "special_tokens": special_tokens})

    # 1. thinking / effort / system basics
    for think in (True, False):
        for eff in (None, "low", "high", "xhigh", "max"):
            add(f"basic_user_t{int(think)}_{eff}", conv([U("hi")], thinking_mode=think, reasoning_effort=eff))
            add(f"basic_sys_t{int(think)}_{eff}", conv([S("Be terse."), U("Explain 量子力学 briefly.")], thinking_mode=think, reasoning_effort=eff))
        add(f"empty_t{int(think)}", conv([], thinking_mode=think))
        add(f"empty_tools_t{int(think)}", conv([], thinking_mode=think, tools=TOOLSETS["weather"]))
        add(f"empty_json_t{int(think)}", conv([], thinking_mode=think, response_format="json_object"))
        add(f"only_system_t{int(think)}", conv([S("sys only")], thinking_mode=think))
        add(f"multi_system_t{int(think)}", conv([S("first"), U("q"), S("mid <｜User｜>"), A("ok", "r"), S("trailing")], thinking_mode=think, reasoning_effort="max"))
        add(f"system_second_t{int(think)}", conv([U("q"), S("later system"), U("q2")], thinking_mode=think))
        add(f"user_sys_user_merge_t{int(think)}", conv([U("a"), S("s"), U("b")], thinking_mode=think))

    # 2. tools x tool_choice x thinking
    for ts in TOOLSETS:
        for tc in ("auto", "none", "required"):
            for think in (True, False):
                if ts not in ("weather", "ten", "deferred_only") and (tc != "auto" or not think):
                    continue
                add(f"tools_{ts}_{tc}_t{int(think)}", conv([S("sys"), U("Use tools if needed.")], thinking_mode=think, tools=TOOLSETS[ts], tool_choice=tc))
    add("tools_no_system_required", conv([U("q")], tools=TOOLSETS["two"], tool_choice="required", thinking_mode=False))
    add("required_without_tools", conv([U("q")], tool_choice="required", thinking_mode=False))
    add("tools_effort_max", conv([U("q")], tools=TOOLSETS["two"], reasoning_effort="max"))
    add("tools_effort_low", conv([U("q")], tools=TOOLSETS["two"], reasoning_effort="low"))

    # 3. response formats
    schema = {"type": "object", "properties": {"answer": {"type": "string", "description": "答案 <think>"}, "score": {"type": "number", "minimum": 0.0, "maximum": 1e3},
                                               "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["answer"], "additionalProperties": False}
    for think in (True, False):
        add(f"rf_json_object_t{int(think)}", conv([U("give json")], thinking_mode=think, response_format="json_object"))
        add(f"rf_schema_t{int(think)}", conv([S("sys"), U("give json")], thinking_mode=think, response_schema=schema))
        add(f"rf_regex_t{int(think)}", conv([U("match")], thinking_mode=think, response_regex=r"^\d{3}-[a-z]+$"))
        add(f"rf_tools_json_t{int(think)}", conv([S("s"), U("q")], thinking_mode=think, tools=TOOLSETS["weather"], response_format="json_object"))
        add(f"rf_tools_schema_t{int(think)}", conv([U("q")], thinking_mode=think, tools=TOOLSETS["weather"], response_schema=schema))
    add("rf_schema_floats", conv([U("q")], thinking_mode=False, response_schema={"v": [1e-7, 1e-5, 1.5e-5, 1e15, 1e16, 123.456, -0.0, 2.5e300, 7e16, 0.1, 1.0, 100000.0, 1e21], "i": [0, -1, 2**63, -2**63, 2**64 - 1]}))
    add("rf_schema_strings", conv([U("q")], thinking_mode=False, response_schema={"s": "é\u2028\x7f\x1f\"\\/\n\t\b\f", "k<｜User｜>": "</think>"}))
    add("rf_schema_scalar", conv([U("q")], thinking_mode=False, response_schema="just a string"))
    add("sys_tools_and_updated", conv([S("s", tools=[SEARCH, DEFERRED]), U("q")], tools=TOOLSETS["weather"], response_format="json_object", thinking_mode=False))
    add("sys_updated_only", conv([S("s", tools=[NOARGS]), U("q"), S("mid", tools=[WEATHER]), U("q2"), S("mid2", tools=[])], thinking_mode=False))

    # 4. histories
    hist = agent_history()
    for think in (True, False):
        for ts in ("two", None):
            for tc in ("auto", "none"):
                add(f"agent_t{int(think)}_{ts}_{tc}", conv(hist, thinking_mode=think, tools=TOOLSETS[ts] if ts else [], tool_choice=tc))
    add("agent_ten_tools", conv(hist + [U("continue")], tools=TOOLSETS["ten"], reasoning_effort="xhigh"))
    add("agent_trailing_assistant", conv(hist[:7], tools=TOOLSETS["two"]))
    add("agent_reasoning_empty_vs_none", conv([U("q"), A("a1", ""), U("q2"), A("a2", None), U("q3"), A("a3", "r3")], tools=TOOLSETS["weather"]))
    args_variants = ['[1,2]', '5', '"str"', '', 'notjson', '"{\\"a\\":1}"', '{"a":1,"a":2}',
                     '{"n":12345678901234567890123,"f":1e5,"g":1E-7,"h":-0,"i":1.5e16,"j":0.00001}', ' {"a" : 1 } ',
                     '{}', 'null', '{"s":"<｜User｜>","<think>":"k","nested":{"x":[1,"two",null]},"u":"\\u00e9\\n"}',
                     '{"big":1E400}', '{"emoji":"🎉","cjk":"中文","q":"\\"quoted\\""}', '{"a":true,"b":false,"c":null,"d":[],"e":{}}']
    for k, a in enumerate(args_variants):
        add(f"args_{k}", conv([U("q"), A("", None, [call("c1", "f", a)]), T("r", "c1")], thinking_mode=False))
    add("calls_empty_list", conv([U("q"), A("text", None, [])], thinking_mode=False))
    add("calls_with_content_think", conv([U("q"), A("Let me check.", "thinking...", [call("c1", "get_weather", {"city": "X"})]), T("ok", "c1")], tools=TOOLSETS["weather"]))
    # tool result ordering
    calls3 = [call("1", "f", "{}"), call("2", "f", "{}"), call("3", "f", "{}")]
    orders = [["3", "1", "2"], ["2", "3", "1"], ["3", "2"], ["1", None, "3"], ["x", "3", "2", "1"], ["2", "1", "1"], ["3", "2", "1", "y"], [None, "2", "1"]]
    for k, ids in enumerate(orders):
        add(f"order_{k}", conv([U("q"), A("", None, calls3)] + [T(f"r{i}", i) for i in ids], thinking_mode=False))
    add("order_with_user_between", conv([U("q"), A("", None, calls3), T("r3", "3"), T("r1", "1"), U("u"), T("r2", "2")], thinking_mode=False))
    add("order_with_reminder_between", conv([U("q"), A("", None, calls3[:2]), T("r2", "2"), L("rem"), T("r1", "1")], thinking_mode=False))
    # V4 window rule: a run of user messages is one unit of the window (systems are dropped first,
    # reminders are units of their own), and each window sits at its assistant's index before any
    # reordering (so nested tool-calling assistants move with earlier windows).
    add("order_user_run_one_unit", conv([U("q"), A("", None, calls3[:2]), U("u1"), U("u2"), T("r2", "2"), T("r1", "1")], thinking_mode=False))
    add("order_user_run_across_system", conv([U("q"), A("", None, calls3[:2]), U("u1"), S("s"), U("u2"), T("r2", "2"), T("r1", "1")], thinking_mode=False))
    add("order_user_run_reminder_splits", conv([U("q"), A("", None, calls3[:2]), U("u1"), L("rem"), T("r2", "2"), T("r1", "1")], thinking_mode=False))
    add("order_user_runs_missing_unknown_ids", conv([U("q"), A("", None, calls3), U("u1"), U("u2"), T("rx", "x"), U("u3"), T("rn"), T("r1", "1")], thinking_mode=False))
    add("order_window_short_after_user_run", conv([U("q"), A("", None, calls3), U("u1"), U("u2"), T("r2", "2")], thinking_mode=False))
    add("order_nested_assistants_fixed_index", conv([U("q"), A("", None, [call("4", "f", "{}"), call("3", "f", "{}")]),
                                                     A("", None, [call("3", "f", "{}"), call("0", "f", "{}"), call("5", "f", "{}"), call("1", "f", "{}")]),
                                                     T("r3", "3"), U("u"), T("rz", "zz"), T("r2", "2"), L("rem"), T("rz2", "zz")], thinking_mode=False))
    add("order_nested_assistants_second_window", conv([U("q"), A("", None, [call("4", "f", "{}"), call("2", "f", "{}")]),
                                                       A("", None, [call("5", "f", "{}"), call("0", "f", "{}")]),
                                                       T("r2", "2"), U("u"), T("r3", "3")], thinking_mode=False))
    for think in (True, False):
        add(f"partial_results_then_user_t{int(think)}", conv([U("q"), A("", "r", calls3), T("r3", "3"), T("r1", "1"), U("follow up"), A("done", "r2")], tools=TOOLSETS["noargs"], thinking_mode=think))
        add(f"partial_results_end_t{int(think)}", conv([U("q"), A("", "r", calls3), T("r3", "3"), T("r1", "1")], tools=TOOLSETS["noargs"], thinking_mode=think))
        add(f"results_then_reminder_t{int(think)}", conv([U("q"), A("", "r", calls3[:2]), T("r2", "2"), T("r1", "1"), L("be brief"), A("ok")], tools=TOOLSETS["noargs"], thinking_mode=think))
        add(f"two_rounds_t{int(think)}", conv([U("q"), A("", "r", calls3[:2]), T("r2", "2"), T("r1", "1"), A("", "again", [call("4", "f", "{}"), call("5", "f", '{"z": 1}')]), T("r5", "5"), T("r4", "4")], tools=TOOLSETS["noargs"], thinking_mode=think))
        add(f"system_between_results_t{int(think)}", conv([U("q"), A("", None, calls3[:2]), S("s"), T("r2", "2"), T("r1", "1")], thinking_mode=think))
    add("empty_user_merges", conv([U("a"), U(""), U("b"), A("x"), U(""), U("c"), A("y"), U(""), U("")], thinking_mode=False))
    add("tool_then_empty_user", conv([U("q"), A("", None, [call("1", "f", "{}")]), T("r", "1"), U(""), U("b")], thinking_mode=False))
    add("empty_system_with_image", conv([S("", image_sources=[img()]), U("q <｜image｜>", image_sources=[img(path="u")]), S("", image_sources=[img(path="s2")])], thinking_mode=False))
    add("user_then_tool", conv([U("q"), T("r")], thinking_mode=False))
    add("orphan_tool", conv([T("res", "zz"), U("q")], thinking_mode=False))
    add("tool_after_plain_assistant", conv([U("q"), A("ok"), T("r1", "1")], thinking_mode=False))
    add("consecutive_users", conv([U("a"), U("b"), A("x"), U("c"), U("d")], thinking_mode=False))
    add("assistant_first", conv([A("hello"), U("q")], thinking_mode=False))
    add("two_assistants", conv([U("q"), A("a1"), A("a2")]))
    # reminders
    add("reminder_everywhere", conv([L("r0"), U("q"), L("r1"), A("c"), L("r2"), U("q2"), L("r3")], thinking_mode=False))
    add("reminder_after_tool", conv([U("q"), A("", None, [call("1", "f", "{}")]), T("r1", "1"), L("rem"), U("u")], tools=TOOLSETS["noargs"]))
    add("reminder_system", conv([S("s"), L("rem"), U("q")]))
    add("only_reminder", conv([L("r")], thinking_mode=False))
    # prefix
    for think in (True, False):
        for reasoning in (None, "", "partial reasoning"):
            for content in ("", "partial answer"):
                for last in (True, False):
                    msgs = [U("q"), A(content, reasoning, prefix=True)] + ([] if last else [U("next")])
                    add(f"prefix_t{int(think)}_r{reasoning is not None and len(reasoning)}_c{len(content)}_last{int(last)}", conv(msgs, thinking_mode=think))
    add("prefix_with_tools", conv([U("q"), A("c", "r", prefix=True)], tools=TOOLSETS["weather"]))
    add("prefix_with_calls", conv([U("q"), A("c", "r", [call("1", "get_weather", {"city": "A"})], prefix=True)], tools=TOOLSETS["weather"]))
    for hdr, kw in (("bare", {}), ("tools", {"tools": TOOLSETS["noargs"]}), ("json", {"response_format": "json_object"})):
        add(f"prefix_opening_{hdr}", conv([A("c", "r", prefix=True), U("q")], **kw))
        add(f"prefix_opening_calls_{hdr}", conv([A("", None, [call("1", "noop", "{}")], prefix=True)], **kw))
    add("prefix_after_system", conv([S("s"), A("c", "r", prefix=True)]))
    add("prefix_then_assistant", conv([U("q"), A("c", "r", prefix=True), A("d")], thinking_mode=False))
    add("prefix_required", conv([U("q"), A("c", None, prefix=True)], tools=TOOLSETS["weather"], tool_choice="required", thinking_mode=False))

    # 5. images
    add("img_user", conv([U("see <｜image｜> and <｜image｜> and <｜image｜>", image_sources=[img(), img("data_url", "data:image/png;base64,AAAA", "low", "messages.0.content[1]")])], thinking_mode=False))
    add("img_fewer_tokens", conv([U("no token here", image_sources=[img()])], thinking_mode=False))
    add("img_custom_token", conv([U("a [IMG] b <｜image｜>", image_sources=[img("bytes", "89504e47", "auto")], image_token="[IMG]")], thinking_mode=False))
    add("img_system_tool", conv([S("s <｜image｜>", image_sources=[img()]), U("q"), A("", None, [call("1", "f", "{}")]), T("t <｜image｜>", "1", image_sources=[img("url", "https://x/y.jpg", "original")])], thinking_mode=False))
    add("img_multi_system_v4_hoist", conv([U("u <｜image｜>", image_sources=[img(path="u")]), S("s2 <｜image｜>", image_sources=[img(path="s2")])], thinking_mode=False))
    add("img_two_users", conv([U("<｜image｜>", image_sources=[img()]), U("x<｜image｜>", image_sources=[img()])]))
    add("img_in_assistant_text", conv([U("q"), A("<｜image｜>")], thinking_mode=False))
    add("img_token_overlap", conv([U("<｜image｜><｜image｜>|<｜image｜>", image_sources=[img(), img(), img()])], thinking_mode=False))
    add("img_override_spelling", conv([U("a [IMG] b <｜image｜>", image_sources=[img()], image_token="[IMG]")], thinking_mode=False), {"image": "[IMG]"})
    add("img_override_default_msg", conv([U("a [IMG] b <｜image｜>", image_sources=[img()])], thinking_mode=False), {"image": "[IMG]"})

    # 6. control-token spellings in every text field
    for k, ct in enumerate(CTRL):
        add(f"ctrl_{k}", conv([S(f"sys {ct}"), U(f"user {ct}"), A(f"asst {ct}", f"reason {ct}", [call(f"id{ct}", f"name{ct}", {"k": ct, ct: 1})]),
                               T(f"tool {ct}", f"id{ct}"), L(f"rem {ct}"), U(ct)],
                              tools=[{"name": f"t{k}", "description": ct, "parameters": {"p": ct}}], response_schema={"x": ct}))
    add("ctrl_tool_block", conv([U("q")], tools=TOOLSETS["ctrl"]))
    add("ctrl_user_exact", conv([U("a<｜User｜>")], thinking_mode=False))

    # 7. special-token overrides
    add("ovr_user_assistant_swap", conv([U("hello"), A("world")], thinking_mode=False), {"user": "<｜Assistant｜>", "assistant": "<｜User｜>"})
    add("ovr_not_in_vocab", conv([U("hello")], thinking_mode=False), {"user": "<|user|>"})
    add("ovr_empty_bos", conv([U("hello")], thinking_mode=False), {"bos": ""})
    add("ovr_empty_user_nonascii", conv([U("héllo 你好"), A("wörld")], thinking_mode=False), {"user": ""})
    add("ovr_empty_assistant_ascii", conv([U("hello"), A("world")], thinking_mode=False), {"assistant": ""})
    add("ovr_empty_assistant_nonascii", conv([U("hello"), A("wörld 世界")], thinking_mode=False), {"assistant": ""})
    add("ovr_empty_think_end_nonascii", conv([U("q"), A("ünïcode")], thinking_mode=False), {"thinking_end": ""})
    add("ovr_dsml_think", conv([U("q"), A("", "r", [call("1", "get_weather", {"city": "Z"})]), T("z", "1")], tools=TOOLSETS["weather"], tool_choice="required"), {"dsml": "<tool>", "thinking_start": "<th>", "thinking_end": "</th>"})
    add("ovr_system_to_user", conv([S("s"), U("q")]), {"system": "<｜User｜>"})
    add("ovr_eos_reminder", conv([U("q"), A("a"), L("rem")], thinking_mode=False), {"eos": "<｜begin▁of▁sentence｜>", "latest_reminder": "<｜latest_reminder｜>"})
    add("ovr_empty_many", conv([S("sys"), U("q"), A("é", "r", [call("1", "f", "{}")]), T("t", "1")], tools=TOOLSETS["noargs"]), {"bos": "", "eos": "", "dsml": "", "thinking_end": ""})

    add("ovr_empty_ref_ascii", conv([U("q"), A("abc <｜ref｜>x", "rs")], thinking_mode=False), {"ref": ""})
    add("ovr_empty_ref_nonascii_panics", conv([U("q"), A("é", "rs")], thinking_mode=False), {"ref": ""})
    add("ovr_grounding_spellings", conv([U("<｜box｜>u"), A("<｜ref｜>obj<｜/ref｜><｜box｜>(1,2),(3,4)<｜/box｜> [P]<｜point｜>", "<｜polygon｜>p<｜/polygon｜>", [call("1", "f", {"a": "<｜ref｜>"})])], tools=TOOLSETS["noargs"]), {"point": "[P]"})
    add("v4_empty_systems", conv([S(""), U("q"), S("x"), S(""), S("y")], thinking_mode=False))

    # 8. long / unicode
    add("long_cjk_emoji", conv([U("你好！" * 200 + "🎉" * 50), A("好的。" * 100, "思考" * 50)], tools=TOOLSETS["weather"]))
    add("long_document", conv([S("Summarize."), U(("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 40 + "\n\n") * 5)], thinking_mode=False))

    # 9. validation errors
    add("err_json_schema_format", conv([U("q")], response_format="json_schema"))
    add("err_json_object_schema", conv([U("q")], response_format="json_object", response_schema={}))
    add("err_schema_regex", conv([U("q")], response_schema={}, response_regex="a"))
    add("err_tool_choice", conv([U("q")], tool_choice="any"))
    add("err_effort_none", conv([U("q")], reasoning_effort="none"))
    add("err_effort_medium", conv([U("q")], reasoning_effort="medium", tool_choice="bogus"))
    add("err_image_token_empty", conv([U("q", image_token="")]))

    # 10. found by the random differential (diff_encoding_random.py)
    # V4 lists an assistant's calls stably sorted by call ID (byte order); V4.1 keeps them as given.
    unsorted = [call("c3", "f3", "{}"), call("c1", "f1", '{"a": 1}'), call("", "f_empty", "{}"), call("c1", "f1b", "[1]"),
                call("é", "f_e", "{}"), call("C9", "f_C", "{}"), call("\r\n", "f_crlf", "{}")]
    for think in (True, False):
        add(f"calls_sorted_by_id_t{int(think)}", conv([U("q"), A("", "r", unsorted)], tools=TOOLSETS["noargs"], thinking_mode=think))
    add("calls_sorted_by_id_with_results", conv([U("q"), A("", None, unsorted[:3]), T("r1", "c1"), T("r3", "c3"), T("re", "")], thinking_mode=False))
    add("calls_sorted_by_id_prefix", conv([U("q"), A("x", None, [call("b", "fb", "{}"), call("a", "fa", "{}")], prefix=True)], thinking_mode=False))
    add("calls_sorted_by_id_required", conv([U("q"), A("", None, [call("z", "get_weather", {"city": "Z"}), call("a", "get_weather", {"city": "A"})])],
                                            tools=TOOLSETS["weather"], tool_choice="required", thinking_mode=False))
    # V4 hoists system messages, so a prefix turn followed only by systems still ends the prompt,
    # also when the V4 result ordering moves the prefix turn to the end.
    add("prefix_then_system", conv([U("q"), A("part", "r", prefix=True), S("late system")]))
    add("prefix_calls_then_systems", conv([U("q"), A("", None, [call("b", "fb", "{}"), call("a", "fa", "{}")], prefix=True), S("s1"), S("s2")], thinking_mode=False))
    add("prefix_moved_last_by_result_order", conv([U("q"), A("", None, [call("b", "fb", "{}"), call("a", "fa", "{}")]), A("p", prefix=True), T("ra", "a")], thinking_mode=False))
    add("prefix_then_reminder_then_system", conv([U("q"), A("p", prefix=True), L("rem"), S("s")], thinking_mode=False))
    # V4: a run of user messages that a window sort places after another run is separated from it
    # by a blank line even when empty (each run is one piece of the merged turn).
    c3 = [call("a", "f", "{}"), call("b", "f", "{}"), call("", "f", "{}")]
    add("v4_units_empty_run_after_moved_run", conv([U("q"), A("", None, c3), T("rn"), U("x"), T("re", ""), U(""), L("r")], thinking_mode=False))
    add("v4_units_two_runs", conv([U("q"), A("", None, c3), U("x"), T("rb", "b"), T("ra", "a"), U(""), U("")], thinking_mode=False))
    add("v4_units_empty_then_empty", conv([U("q"), A("", None, c3), U(""), T("rb", "b"), T("ra", "a"), U("")], thinking_mode=False))
    add("v4_units_empty_then_text", conv([U("q"), A("", None, c3), U("x"), T("rb", "b"), T("ra", "a"), U(""), U("y"), U(""), U("z")], thinking_mode=False))
    add("v4_units_across_system", conv([U("q"), A("", None, c3), U("x"), T("rb", "b"), T("ra", "a"), U(""), S("s"), U("y")], thinking_mode=False))
    # V4.1 orders tool results against the latest assistant that made calls; a later assistant
    # without calls (or with an empty list) does not reset them, one with other calls does.
    ab = [call("a", "f", "{}"), call("b", "f", "{}")]
    add("v41_order_after_plain_assistant", conv([U("q"), A("", None, ab), A("x"), T("rb", "b"), T("ra", "a")], thinking_mode=False))
    add("v41_order_after_empty_calls", conv([U("q"), A("", None, ab), A("x", None, []), T("rb", "b"), T("ra", "a")], thinking_mode=False))
    add("v41_order_after_user_and_plain", conv([U("q"), A("", None, ab), U("u"), A("x"), T("rb", "b"), T("ra", "a")], thinking_mode=False))
    add("v41_order_reset_by_new_calls", conv([U("q"), A("", None, ab), U("u"), A("", None, [call("c", "f", "{}")]), T("rb", "b"), T("rc", "c"), T("ra", "a")], thinking_mode=False))
    add("v41_order_after_reminder_prefix", conv([U("q"), A("", None, ab), L("l"), A("x", prefix=True), T("rb", "b"), T("ra", "a")], thinking_mode=False))
    add("v41_order_repeated_results", conv([U("q"), A("", None, ab), T("rb", "b"), T("ra", "a"), A("x"), T("rb2", "b"), T("ra2", "a")], tools=TOOLSETS["noargs"]))
    # V4.1 drops the block of an empty or missing reasoning when thinking_end is spelled "".
    for think in (True, False):
        for r in (None, "", "r"):
            add(f"ovr_empty_think_end_reasoning_t{int(think)}_{'none' if r is None else len(r)}",
                conv([U("q"), A("hi", r), U("q2"), A("<｜hi", r, [])], thinking_mode=think, tools=TOOLSETS["noargs"]), {"thinking_end": ""})
    # Invalid enum names are quoted with Rust string escapes.
    add("err_tool_choice_escaped", conv([U("q")], tool_choice="auto\x00\n\"é"))
    add("err_effort_escaped", conv([U("q")], reasoning_effort="low\t"))
    add("err_response_format_escaped", conv([U("q")], response_format="json\\object"))
    add("err_detail_escaped", conv([U("q", image_sources=[img(detail="HIGH\r\n")])]))
    # An overridden spelling missing from the vocabulary is quoted with Rust string escapes.
    for k, sp in enumerate(["\n", "tab\there", '"quoted"', "back\\slash", "\u200b", "\x1b", "é", "\u0301x"]):
        add(f"ovr_missing_spelling_escape_{k}", conv([U("q"), A("a")], thinking_mode=False), {"user": sp})

    # 11. constructor and method arguments of the wrong type or shape (raw call trees, see
    # encoding_spec.build_raw): the official error type and message.
    for k, (node, extra) in enumerate(bad_arguments()):
        out.append({"name": f"bad_argument_{k:02d}", "raw": {"conv": node, "special_tokens": extra.pop("special_tokens", None), **extra}})

    # 12. random conversations
    rng = random.Random(20261129)
    tool_pool = [WEATHER, SEARCH, NOARGS, DEFERRED, CTRL_TOOL, long_tool(1)]
    for k in range(90):
        msgs = []
        open_calls = []
        for _ in range(rng.randint(0, 9)):
            r = rng.random()
            text = rng.choice(TEXTS + CTRL)
            if r < 0.3:
                msgs.append(U(text))
            elif r < 0.5:
                n = rng.choice([0, 0, 1, 2, 3])
                calls = [call(f"call_{k}_{len(msgs)}_{i}", rng.choice(["get_weather", "search", "noop"]),
                              rng.choice(['{"city": "Z"}', '{"query": "' + str(i) + '", "top_k": 2}', '{}', 'bad', '{"x": [1.5, 2e-9]}']))
                         for i in range(n)] or None
                reasoning = rng.choice([None, "", rng.choice(TEXTS)])
                msgs.append(A(rng.choice(TEXTS), reasoning, calls, prefix=rng.random() < 0.08))
                open_calls = [c["id"] for c in calls or []]
            elif r < 0.7 and open_calls is not None:
                ids = list(open_calls) + [None, "unknown"]
                rng.shuffle(ids)
                for cid in ids[: rng.randint(1, max(1, len(ids)))]:
                    msgs.append(T(rng.choice(TEXTS), cid))
            elif r < 0.8:
                msgs.append(S(text, tools=rng.choice([None, [], [rng.choice(tool_pool)]])))
            elif r < 0.9:
                msgs.append(L(text))
            else:
                msgs.append(U(text + " <｜image｜>", image_sources=[img()] * rng.randint(0, 2)))
        c = conv(msgs, thinking_mode=rng.random() < 0.6, tools=rng.sample(tool_pool, rng.randint(0, 3)) if rng.random() < 0.6 else [],
                 tool_choice=rng.choice(["auto", "auto", "none", "required"]), reasoning_effort=rng.choice([None, "low", "high", "xhigh", "max"]))
        fmt = rng.random()
        if fmt < 0.15:
            c["response_format"] = "json_object"
        elif fmt < 0.3:
            c["response_schema"] = {"type": "object", "properties": {"v": {"type": "number", "default": rng.choice([0.5, 1e-6, 3.0])}}}
        elif fmt < 0.35:
            c["response_regex"] = "[a-z]+"
        st = None
        if rng.random() < 0.1:
            st = rng.choice([{"user": "<｜Assistant｜>"}, {"thinking_start": "<｜begin▁of▁sentence｜>"}, {"dsml": "｜DSML｜"}, {"eos": ""}])
        add(f"random_{k:03d}", c, st)
    return out


def record(specs_path: str, out_dir: str) -> None:
    """Runs inside the side venv: record official results for every spec."""
    import deepseek_recipe as dr
    from encoding_spec import record_case, system_tokenizer_json, tokenizer_path

    text = Path(tokenizer_path()).read_text(encoding="utf-8")
    toks = {"tokens": dr.Tokenizer.from_str(text), "tokens_sys": dr.Tokenizer.from_str(system_tokenizer_json(text))}
    specs = json.loads(Path(specs_path).read_text(encoding="utf-8"))
    out = Path(out_dir)
    for old in out.glob("cases_*.json"):
        old.unlink()
    for start in range(0, len(specs), CHUNK):
        chunk = specs[start:start + CHUNK]
        for spec in chunk:
            spec["official"] = record_case(dr, spec, toks)
        fixture_json.write(out / f"cases_{start // CHUNK:02d}.json",
                           {"generator": "tests/conformance/generate_encoding.py",
                            "official": "deepseek-recipe 0.2.0", "cases": chunk})
    print(f"recorded {len(specs)} cases into {out}")


def main(argv):
    if argv and argv[0] == "--record":
        record(argv[1], argv[2])
        return 0
    from official_venv import run_in_official
    specs = cases()
    names = [s["name"] for s in specs]
    assert len(names) == len(set(names)), "duplicate case names"
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(specs, f, ensure_ascii=False)
    res = run_in_official(__file__, "--record", f.name, str(OUT_DIR))
    print(res.stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
