"""Generate the request-conversion fixtures from the official deepseek-recipe 0.2.0.

Run from the repository root with our own Python; the conversions run inside the official
side venv (see `official_venv.py`):

    python tests/conformance/generate_conversion.py

Curated cases (every rule and error message we know of) are followed by deterministic random
requests from `conversion_random.py`.

Writes `tests/conformance/conversion/cases.json`: one entry per request with the request,
the options and the official outcome (conversation, inference/parsing options, resolved
max_tokens, Responses echo and namespace map, or the error class / status / body).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "conversion" / "cases.json"

PRO, FLASH = "DeepSeek-V4-Pro", "DeepSeek-V4.1-Flash"
U = {"role": "user", "content": "What is the weather in Paris?"}
FN = {"type": "function", "function": {"name": "get_weather", "description": "Weather lookup",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
FN2 = {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21C"}


def chat_cases():
    cases = []
    base = {"model": FLASH, "messages": [U]}

    def add(patch, options=None, model=None, as_text=False):
        for m in ([model] if model else [FLASH, PRO]):
            body = copy.deepcopy(base)
            body["model"] = m
            body.update(copy.deepcopy(patch))
            cases.append({"format": "chat", "body": body, "options": options, "as_text": as_text})

    add({})
    add({}, as_text=True)
    for t in [{"type": "enabled"}, {"type": "disabled"}, {"type": "adaptive"}]:
        add({"thinking": t})
    for e in ["none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max"]:
        add({"reasoning_effort": e})
    add({"reasoning_effort": "max", "thinking": {"type": "disabled"}})
    add({"reasoning_effort": "none", "thinking": {"type": "enabled"}})
    add({}, options={"default_thinking_mode": False})
    add({"reasoning_effort": "low"}, options={"default_thinking_mode": False})
    for temp in [0, 0.3, 0.7, 2, 2.5, -0.1]:
        add({"temperature": temp, "thinking": {"type": "disabled"}})
    add({"temperature": 3})
    for p in [0.1, 0.5, 0.95, 0.97, 1, 0, 1.5]:
        add({"top_p": p})
        add({"top_p": p, "thinking": {"type": "disabled"}})
    for mt in [1, 100, 393216, 0, 393217]:
        add({"max_tokens": mt})
    add({"max_tokens": 5000}, options={"thinking_bound": 4096})
    add({"max_tokens": 5000, "thinking": {"type": "disabled"}}, options={"non_thinking_bound": 4096})
    add({"max_tokens": -1})
    add({"max_tokens": 1.5})
    add({"max_completion_tokens": 50})
    add({"n": 1}); add({"n": 2})
    add({"seed": 42}); add({"seed": 9223372036854775808}); add({"seed": -1})
    add({"logprobs": True}); add({"logprobs": True, "top_logprobs": 5}); add({"top_logprobs": 5})
    add({"logprobs": True, "top_logprobs": 21})
    add({"stop": "END"}); add({"stop": ["a", "b"]}); add({"stop": ""}); add({"stop": ["a", ""]})
    add({"stop": [str(i) for i in range(17)]}); add({"stop": 5})
    add({"stream": True}); add({"stream": True, "stream_options": {"include_usage": True}})
    add({"stream_options": {"include_usage": True}})
    add({"stream": "yes"})
    add({"model": "gpt-4o"}, model=FLASH)
    add({"model": "my-alias"}, options={"aliases": [["my-alias", "DeepseekV4Pro"]]}, model=FLASH)
    add({"messages": []})
    add({"messages": [{"role": "developer", "content": "x"}]})
    add({"messages": [{"role": "system", "content": "Be brief."}, U]})
    add({"messages": [{"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}, U]})
    add({"messages": [{"role": "user", "content": [{"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]})
    add({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x/a.png"}}]}]})
    add({"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}]})
    add({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]})
    add({"messages": [{"role": "user", "content": None}]})
    add({"messages": [{"role": "user"}]})
    add({"messages": [U, {"role": "assistant", "content": "Hi", "reasoning_content": "r"}, U]})
    add({"messages": [U, {"role": "assistant"}]})
    add({"messages": [U, {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]})
    add({"messages": [U, {"role": "assistant", "content": "Par", "prefix": True}]})
    add({"messages": [U, {"role": "assistant", "content": "", "reasoning_content": "Let me", "prefix": True}]})
    add({"messages": [U, {"role": "assistant", "content": "", "prefix": True}]})
    add({"messages": [U, {"role": "assistant", "content": "x", "prefix": True}, U]})
    add({"messages": [U, {"role": "latest_reminder", "content": "Today is Monday."}]})
    add({"messages": [{"role": "tool", "tool_call_id": "x", "content": "r"}]})
    add({"messages": [U, CALL, RESULT], "tools": [FN]})
    add({"messages": [U, CALL, RESULT, U], "tools": [FN]})
    add({"messages": [U, CALL, RESULT], "tools": [FN]}, options={"reject_missing_reasoning": True})
    add({"messages": [U, CALL, RESULT, U], "tools": [FN]}, options={"reject_missing_reasoning": True})
    add({"messages": [U, CALL], "tools": [FN]})
    add({"messages": [U, CALL, {"role": "tool", "tool_call_id": "zz", "content": "r"}], "tools": [FN]})
    add({"messages": [U, CALL, RESULT, RESULT], "tools": [FN]})
    add({"messages": [U, dict(CALL, tool_calls=[])]})
    add({"messages": [U, CALL, RESULT, {"role": "assistant", "content": "x", "prefix": True}], "tools": [FN]})
    add({"tools": [FN, FN2]})
    add({"tools": [FN, FN2], "thinking": {"type": "disabled"}, "tool_choice": "required"})
    add({"tools": [FN, FN2], "tool_choice": "required"})
    add({"tools": [FN, FN2], "tool_choice": "none"})
    add({"tools": [FN, FN2], "tool_choice": "auto"})
    add({"tools": [FN, FN2], "thinking": {"type": "disabled"}, "tool_choice": {"type": "function", "function": {"name": "search"}}})
    add({"tools": [FN, FN2], "tool_choice": {"type": "function", "function": {"name": "search"}}})
    add({"tools": [FN, FN2], "thinking": {"type": "disabled"}, "tool_choice": {"type": "function", "function": {"name": "nope"}}})
    add({"tool_choice": "required"})
    add({"tool_choice": "bogus"})
    add({"tools": [FN, FN]})
    add({"tools": [{"type": "function", "function": {"name": "bad name"}}]})
    add({"tools": [{"type": "function", "function": {"name": ""}}]})
    add({"tools": [{"type": "function", "function": {"name": "f"}}]})
    add({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}]})
    add({"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]})
    add({"tools": [{"type": "custom", "function": {"name": "f"}}]})
    strict = {"type": "function", "function": {"name": "s", "strict": True, "parameters": {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"b": {"type": "array", "items": {"type": "object", "properties": {"c": {"type": "string", "format": "email"}}}}}},
        "d": {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 1}]}}}}}
    add({"tools": [strict]})
    add({"tools": [strict, FN]})
    add({"tools": [strict], "response_format": {"type": "text"}})
    for bad in [{"type": "string", "format": "date"}, {"type": "object"}, {"type": "array"}, {"description": "x"},
                {"type": "bogus"}]:
        add({"tools": [{"type": "function", "function": {"name": "s", "strict": True, "parameters": {
            "type": "object", "properties": {"a": bad}}}}]}, model=FLASH)
    add({"tools": [{"type": "function", "function": {"name": "s", "strict": True, "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True}}}]}, model=FLASH)
    add({"response_format": {"type": "json_object"}})
    add({"messages": [{"role": "user", "content": "Reply in JSON"}], "response_format": {"type": "json_object"}})
    add({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}})
    add({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}})
    add({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})
    add({"response_format": {"type": "regex", "regex": "[a-z]+"}})
    add({"response_format": {"type": "text"}})
    add({"response_format": {"type": "xml"}})
    add({"thinking": {"type": "bogus"}})
    add({"thinking": "enabled"})
    add({"reasoning_effort": "extreme"})
    add({"temperature": "1"})
    add({"frequency_penalty": 0.5, "presence_penalty": 0.5, "logit_bias": {"1": 2}, "user": "u", "parallel_tool_calls": False})
    return cases


def chat_n_cases():
    # `n` is read as an 8-bit count before any conversion check.
    return [{"format": "chat", "body": {"model": PRO, "messages": [U], "n": n}, "options": None}
            for n in [0, 2, 255, 256, -1, 1.5, "text"]]


def responses_cases():
    cases = []

    def add(body, options=None, models=(FLASH, PRO)):
        for m in models:
            b = copy.deepcopy(body)
            b.setdefault("model", m)
            cases.append({"format": "responses", "body": b, "options": options})

    add({"input": "Hello"})
    add({"input": "Hello", "instructions": "Be nice", "max_output_tokens": 100, "temperature": 0.5,
         "top_p": 0.9, "user": "u1", "stream": True})
    for e in ["none", "low", "medium", "high", "xhigh", "max"]:
        add({"input": "Hello", "reasoning": {"effort": e}})
    add({"input": "Hello", "reasoning": {"effort": "bogus"}})
    add({"input": "Hello", "reasoning": "high"})
    add({"input": []})
    add({})
    add({"instructions": "Only instructions"})
    add({"input": 5})
    add({"input": [5]})
    add({"input": "x", "temperature": 3})
    add({"input": "x", "top_p": 0})
    add({"input": "x", "max_output_tokens": 0})
    add({"input": "x", "max_output_tokens": 400000})
    add({"input": "x", "top_logprobs": 3})
    add({"input": "x", "top_logprobs": 30})
    items = [{"role": "user", "content": "hi"},
             {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
             {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]},
             {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "out"}]
    ftool = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
    add({"input": items, "tools": [ftool]})
    add({"input": items, "tools": [ftool], "reasoning": {"effort": "none"}})
    add({"input": [{"role": "user", "content": "q"},
                   {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                   {"type": "function_call", "call_id": "d", "name": "f", "arguments": "{\"a\":1}"},
                   {"type": "function_call_output", "call_id": "d", "output": "x"},
                   {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "t"}]}],
         "tools": [ftool]})
    add({"input": [{"type": "function_call_output", "call_id": "zz", "output": "x"}]})
    for t in ["x", 1, None, True, [], {}]:
        add({"input": "Hello", "tools": [{"type": "namespace", "name": "ns", "description": "", "tools": [t]}]}, models=(PRO,))
    # Function call output parts: names and variant lists of the wheel's error messages.
    for o in ["function", 1, None, {"type": "x"}, {"type": "output_text", "text": "a"}, [], {}]:
        add({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                       {"type": "function_call_output", "call_id": "c", "output": [o]}],
             "tools": [{"type": "function", "name": "f"}]}, models=(PRO,))
    add({"input": [{"role": "user", "content": "q"}, {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]})
    add({"input": [{"role": "user", "content": [{"type": "input_text", "text": "a"},
        {"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "low"}]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "ans"}]}]})
    add({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]})
    add({"input": [{"role": "user", "content": [{"type": "input_image"}]}]})
    add({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]})
    add({"input": [{"role": "bogus", "content": "a"}]})
    add({"input": [{"role": "user", "content": 5}]})
    add({"input": [{"role": "user", "content": [{"type": "bogus"}]}]})
    add({"input": [{"type": "bogus"}, {"role": "user", "content": "a"}]})
    add({"input": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]})
    ns = {"type": "namespace", "name": "ns", "description": "nsd", "tools": [
        {"type": "function", "name": "g", "description": "gd", "parameters": {"type": "object", "properties": {}}}]}
    add({"input": "x", "tools": [ns, {"type": "custom", "name": "apply_patch"}, {"type": "web_search"}]})
    add({"input": "x", "tools": [{"type": "web_search"}]}, options={"responses_web_search": "Reject"})
    add({"input": "x", "tools": [{"type": "custom", "name": "other"}]})
    add({"input": "x", "tools": [{"type": "file_search"}, {"type": "apply_patch"}]})
    add({"input": "x", "tools": [ftool], "tool_choice": "required"})
    add({"input": "x", "tools": [ftool], "tool_choice": "required", "reasoning": {"effort": "none"}})
    add({"input": "x", "tools": [ftool], "tool_choice": {"type": "function", "name": "f"}, "reasoning": {"effort": "none"}})
    add({"input": "x", "tools": [ftool], "tool_choice": "none"})
    add({"input": "x", "tools": [{"type": "function", "name": "f"}]})
    add({"input": "x", "tools": [{"type": "function", "name": "f", "parameters": {"type": "string"}}]})
    add({"input": "x", "text": {"format": {"type": "json_object"}}})
    add({"input": "give json", "text": {"format": {"type": "json_object"}}})
    add({"input": "x", "text": {"format": {"type": "json_schema", "name": "n", "strict": True,
         "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}})
    add({"input": "x", "text": {"format": {"type": "json_schema", "schema": {"type": "object"}}}})
    add({"input": "x", "instructions": 5})
    add({"input": "x", "store": True, "include": ["x"], "truncation": "auto", "previous_response_id": "r"})
    return cases


def messages_cases():
    cases = []

    def add(body, options=None, models=(FLASH, PRO)):
        for m in models:
            b = copy.deepcopy(body)
            b.setdefault("model", m)
            b.setdefault("max_tokens", 1024) if "no_max" not in b else b.pop("no_max")
            cases.append({"format": "messages", "body": b, "options": options})

    mu = {"role": "user", "content": "Hello"}
    tool = {"name": "f", "description": "d", "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}
    add({"messages": [mu]})
    add({"messages": [mu], "no_max": True})
    add({"messages": [mu], "max_tokens": 0})
    add({"messages": [mu], "max_tokens": 500000})
    add({"messages": [mu], "system": "Be brief."})
    add({"messages": [mu], "system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
    add({"messages": [mu], "thinking": {"type": "disabled"}})
    add({"messages": [mu], "thinking": {"type": "enabled", "budget_tokens": 2000}})
    add({"messages": [mu], "output_config": {"effort": "max"}})
    add({"messages": [mu], "output_config": {"effort": "low"}, "thinking": {"type": "disabled"}})
    add({"messages": [mu], "temperature": 0.5, "top_p": 0.8, "top_k": 5, "thinking": {"type": "disabled"}})
    add({"messages": [mu], "temperature": 5})
    add({"messages": [mu], "stop_sequences": ["END"], "stream": True, "metadata": {"user_id": "u"}})
    add({"messages": []})
    add({"messages": [{"role": "user", "content": 5}]})
    add({"messages": [{"role": "tool", "content": "x"}]})
    add({"messages": [{"role": "system", "content": "s"}, mu]})
    add({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
        {"type": "image", "source": {"type": "url", "url": "http://x/a.png"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}}]}]})
    add({"messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "x"}}]}]})
    # Image sources are a closed, tagged set; the media type is one of five image types.
    for src in ["x", [], {}, {"type": "x"}, {"type": None}, {"type": "base64"}, {"type": "base64", "media_type": "image/png"},
                {"type": "base64", "media_type": ["a"], "data": "AAAA"}, {"type": "base64", "media_type": 1, "data": "AAAA"},
                {"type": "base64", "media_type": "text/plain", "data": "AAAA"}, {"type": "base64", "media_type": {}, "data": "AAAA"},
                {"type": "base64", "media_type": "image/gif", "data": "AAAA"}, {"type": "base64", "media_type": "image/jpg", "data": "AAAA"},
                {"type": "url"}, {"type": "url", "url": 1}, {"type": "file"}, {"type": "file", "file_id": "f"},
                ["url", "https://a/b.png"]]:
        add({"messages": [{"role": "user", "content": [{"type": "image", "source": src}]}]})
    for src in ["x", [], {}, {"type": "base64", "media_type": ["a"], "data": "x"}, ["url", "https://a"]]:
        add({"messages": [{"role": "user", "content": [{"type": "document", "source": src}]}]})
    convo = [{"role": "user", "content": "weather?"},
             {"role": "assistant", "content": [{"type": "thinking", "thinking": "T", "signature": "s"},
                                               {"type": "text", "text": "Checking"},
                                               {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1, "b": "é"}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "r"}]},
                                          {"type": "text", "text": "more"}]}]
    add({"messages": convo, "tools": [tool]})
    add({"messages": convo, "tools": [tool], "tool_choice": {"type": "any"}})
    add({"messages": convo, "tools": [tool], "tool_choice": {"type": "any"}, "thinking": {"type": "disabled"}})
    add({"messages": convo, "tools": [tool], "tool_choice": {"type": "tool", "name": "f"}, "thinking": {"type": "disabled"}})
    add({"messages": convo, "tools": [tool], "tool_choice": {"type": "none"}})
    add({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz", "content": "r"}]}]})
    add({"messages": [{"role": "user", "content": [{"type": "redacted_thinking", "data": "x"}]}]})
    add({"messages": [mu], "tools": [{"type": "web_search_20250305", "name": "web_search"}]})
    add({"messages": [mu], "tools": [{"name": "bad name", "input_schema": {"type": "object"}}]})
    add({"messages": [mu, {"role": "assistant", "content": "Sure"}]})
    return cases


def broken_body_cases():
    """Randomly broken bodies showed these rules; each is pinned by a few direct cases.

    Tool and response schemas are compiled as JSON Schemas (non-strict tools and schemas only,
    after `tool_choice: none` has dropped the tools), strict schemas have their own shape rules,
    and nested objects read from lists report the official struct sizes.
    """
    cases = []
    user = [{"role": "user", "content": "Reply in json"}]

    def chat(patch, model=PRO):
        cases.append({"format": "chat", "body": {"model": model, "messages": user, **patch}, "options": None})

    def resp(patch, model=PRO):
        cases.append({"format": "responses", "body": {"model": model, "input": "json", **patch}, "options": None})

    def msgs(patch, model=PRO):
        cases.append({"format": "messages", "body": {"model": model, "max_tokens": 10, "messages": user, **patch}, "options": None})

    def fn(name, params=None, strict=None):
        f = {"name": name}
        if params is not None:
            f["parameters"] = params
        if strict is not None:
            f["strict"] = strict
        return {"type": "function", "function": f}

    def obj(**props):
        return {"type": "object", "properties": props}

    # Non-strict schemas: the compiler's first error, per kept tool, before later checks.
    bad_schemas = [obj(a={"type": "string", "minLength": -1}), obj(a={"type": "number", "description": {"type": "x"}}),
                   obj(a={"enum": 5}), obj(a={"items": [{"type": "string"}]}), obj(a={"type": "string", "pattern": "("}),
                   obj(a={"$ref": "#/definitions/missing"}), obj(a={"$ref": "http://example.com/x.json"}),
                   {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"items": [{"type": "string"}]}}},
                   obj(a="x"), obj(a={"type": ["string", "string"]}), obj(a={"multipleOf": 0})]
    for b in bad_schemas:
        chat({"tools": [fn("f", b)]})
    bad = bad_schemas[0]
    chat({"tools": [fn("f", bad)], "tool_choice": "none"})
    chat({"tools": [fn("f", "x")], "tool_choice": "none"})
    chat({"tools": [fn("f", bad, True)]})
    chat({"tools": [fn("f", bad)], "temperature": 5})
    chat({"tools": [fn("f", bad), fn("f")]})
    chat({"tools": [fn("f"), fn("f", bad)]})
    chat({"tools": [fn("f", {"type": "string"}), fn("g", bad)]})
    chat({"tools": [fn("g", bad), fn("f", obj(a={"type": "x"}), True)]})
    chat({"tools": [fn("f", bad), fn("g")], "thinking": {"type": "disabled"}, "tool_choice": {"type": "function", "function": {"name": "g"}}})
    chat({"messages": [{"role": "tool", "tool_call_id": "x", "content": "r"}], "tools": [fn("f", bad)]})
    # Strict schemas: enum members are strings, type lists name scalar types only.
    for prop in [{"type": "string", "enum": ["a", 5]}, {"type": "string", "enum": [None]}, {"type": ["string", "object"]},
                 {"type": [5]}, {"type": ["string"], "description": 5}, {"type": []}]:
        chat({"tools": [fn("s", obj(a=prop), True)], "stream_options": {}})
    for top in [{"type": []}, {"type": ["object"]}, {"type": 5}]:
        chat({"tools": [fn("s", top, True)], "stream_options": {}})
    # Response schemas: compiled unless strict, after stop/stream_options, before the tool mix.
    js = {"type": "json_schema", "json_schema": {"name": "n", "schema": obj(a=5)}}
    chat({"response_format": js})
    chat({"response_format": js, "temperature": 5})
    chat({"response_format": js, "stream_options": {}})
    chat({"response_format": js, "tools": [fn("f", None, True)]})
    chat({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": True, "schema": obj(a={"type": "string", "minLength": -1})}}})
    chat({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": True, "schema": {"type": []}}}})
    # Shapes read in the constructor.
    for tc in [{"type": None}, {"type": 5}, {"type": {}}, {"type": "x"}, {}]:
        chat({"tool_choice": tc})
    for th in [[], ["enabled"], ["enabled", 5], {"type": "enabled", "budget_tokens": "x"}]:
        chat({"thinking": th})
    chat({"tools": [{"type": "function", "function": ["f"]}]})
    chat({"tools": [{"type": "function", "function": ["f", None, None, None]}]})
    chat({"stream_options": []})
    chat({"response_format": {"type": "json_schema", "json_schema": ["n"]}})
    chat({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": ["http://a/b.png"]}]}]}, model=FLASH)
    chat({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": []}]}]}, model=FLASH)

    rbad = {"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}}
    rjs = {"format": {"type": "json_schema", "name": "n", "schema": obj(a=5)}}
    resp({"tools": [{"type": "function", "name": "f", "parameters": rbad}]})
    resp({"tools": [{"type": "function", "name": "f", "parameters": rbad, "strict": True}]})
    resp({"tools": [{"type": "function", "name": "f", "parameters": rbad}], "tool_choice": "none"})
    resp({"tools": [{"type": "function", "name": "f", "parameters": rbad}, {"type": "custom", "name": "other"}]})
    resp({"tools": [{"type": "function", "name": "f", "strict": True, "parameters": obj(a={"type": "x"})},
                    {"type": "function", "name": "g", "parameters": rbad}]})
    resp({"text": rjs})
    resp({"text": rjs, "temperature": 5})
    resp({"text": rjs, "tools": [{"type": "function", "name": "f", "strict": True}, {"type": "function", "name": "g"}]})
    resp({"text": {"format": {"type": "json_schema", "name": "n", "strict": True, "schema": obj()}},
          "tools": [{"type": "function", "name": "f", "strict": True}, {"type": "function", "name": "g"}]})
    for tool in [["x"], [], ["function"], [5], {"type": "function", "name": "f", "strict": {}},
                 {"type": "function", "name": "f", "strict": 0}]:
        resp({"tools": [tool]})
    for inner in [{"type": 0, "name": "g"}, {"type": 1, "name": "apply_patch"}, {"type": 2, "name": "g"}, {"type": -1, "name": "g"},
                  {"type": None, "name": "g"}, ["x"], ["function"], {"type": "custom", "name": "zz"}]:
        resp({"tools": [{"type": "namespace", "name": "ns", "description": "", "tools": [inner]}]})
    for tc in [{"type": "function", "name": 0}, {"type": "function"}, {"type": True}, {"type": "web_search", "name": 0}]:
        resp({"tools": [{"type": "function", "name": "f"}], "tool_choice": tc})
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    q = {"role": "user", "content": "q"}
    for out in [{"type": "function_call_output", "output": "x"}, {"type": "function_call_output", "call_id": None, "output": "x"},
                {"type": "function_call_output", "call_id": "", "output": "x"}]:
        resp({"input": [q, call, out]})
        resp({"input": [q, out]})
    resp({"input": [q, dict(call, call_id="")]})
    # A custom tool call output looks up its call before reading its parts; a function call output reads them first.
    bad_img, a_file = {"type": "input_image", "image_url": "data:,AAE=="}, {"type": "input_file", "file_id": "f"}
    patch_call = {"type": "custom_tool_call", "call_id": "q00", "name": "apply_patch", "input": "x"}
    for kind in ("custom_tool_call_output", "function_call_output"):
        for parts in ([bad_img], [a_file, bad_img], [bad_img, a_file]):
            out = {"type": kind, "call_id": "q00", "output": parts}
            resp({"input": [out]}, model=FLASH)
            resp({"input": [q, patch_call, out], "tools": [{"type": "custom", "name": "apply_patch"}]}, model=FLASH)
    resp({"input": [q, {"type": "reasoning", "summary": []}, q]})
    resp({"input": [q, {"type": "reasoning", "summary": []}]})
    resp({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": ""}]}]}, model=FLASH)
    resp({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": ""}]}]})
    cases.append({"format": "responses", "body": {"model": PRO, "instructions": ""}, "options": None})
    for text in [{"format": None}, {}, {"verbosity": "low"}, {"verbosity": "x"}, [None, 5], []]:
        resp({"text": text})
    for reasoning in [{"effort": "high", "generate_summary": 5}, {"effort": "high", "summary": "x"}, ["high", "x"],
                      ["high", "auto", 5], []]:
        resp({"reasoning": reasoning})
    resp({"input": [q, {"role": "assistant", "content": "a"}, {"type": "x"}, {"role": "assistant", "content": "b"}]})
    resp({"input": [q, {"role": "assistant", "content": ""}, {"role": "assistant", "content": "b"}]})
    resp({"input": [q, {"role": "assistant", "content": "a"}, {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "r"}]},
                    {"role": "assistant", "content": "b"}]})
    resp({"input": [q, {"role": "assistant", "content": [{"type": "input_image"}]}]}, model=FLASH)
    r = {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "mull"}]}
    resp({"input": [q, r, {"type": "x"}, r, {"role": "assistant", "content": "a"}]})
    resp({"input": [q, {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": ""}]}, q]})
    chat({"tools": [fn("f", None, True)], "response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": True, "schema": obj()}}})

    mbad = {"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}}
    msgs({"tools": [{"name": "f", "strict": True, "input_schema": mbad}]})
    msgs({"tools": [{"name": "f", "strict": True, "input_schema": obj(a={"type": "string"})}]})
    msgs({"tools": [{"name": "f", "input_schema": mbad}], "tool_choice": {"type": "none"}})
    msgs({"tools": [{"name": "f"}]})
    msgs({"tools": [{"name": "f"}], "tool_choice": {"type": "none"}})
    for tool in [{"type": "x"}, {"type": 0}, {"name": 1.5}, {"type": "custom", "name": 1.5}, {"type": "custom"},
                 {"type": "x", "name": 5}, {"type": "web_search_20250305", "name": ["x"]}, {"name": "f", "description": 5}]:
        msgs({"tools": [tool]})
    for stop in [[""], ["a", ""], [str(i) for i in range(17)], []]:
        msgs({"stop_sequences": stop})
        msgs({"stop_sequences": stop, "temperature": 5})
    msgs({"stop_sequences": [""], "tools": [{"name": "f"}]})
    for th in [{"type": "enabled", "budget_tokens": []}, {"type": "enabled", "budget_tokens": "x"}, [], ["enabled"]]:
        msgs({"thinking": th})
    msgs({"output_config": []})
    msgs({"metadata": []})
    msgs({"messages": [q, {"role": "system", "content": ""}, {"role": "assistant", "content": "a"}]})
    msgs({"messages": [q, {"role": "system", "content": ""}, {"role": "assistant", "content": "a"}]}, model=FLASH)
    msgs({"messages": [q, {"role": "system", "content": []}], "max_tokens": 0})
    msgs({"messages": [q, {"role": "system", "content": []}], "max_tokens": 0}, model=FLASH)
    # Both penalties out of range: presence_penalty is reported, whichever comes first in the body.
    chat({"frequency_penalty": 5, "presence_penalty": 5})
    chat({"presence_penalty": -3, "frequency_penalty": 3})
    # Declared tool names: at most 128 UTF-8 bytes, checked before the name pattern (and, in Messages, before the
    # messages), in every API and in a Responses namespace and its tools.
    bad_image = [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": " data:x"}}]}]
    for name in ["x" * 128, "x" * 129, "bad name" + "x" * 200, "é" * 64, "é" * 65, "a" * 127 + "é", "😀" * 33]:
        chat({"tools": [fn(name)]})
        chat({"tools": [fn("f"), fn(name, "x")]})
        resp({"tools": [{"type": "function", "name": name}]})
        resp({"tools": [{"type": "namespace", "name": name, "description": "d", "tools": [{"type": "function", "name": "f"}]}]})
        resp({"tools": [{"type": "namespace", "name": "ns", "description": "d", "tools": [{"type": "function", "name": name}]}]})
        msgs({"tools": [{"name": name, "input_schema": {"type": "object"}}]})
        msgs({"tools": [{"name": name, "input_schema": {"type": "object"}}], "messages": bad_image}, model=FLASH)
        msgs({"tools": [{"name": "f", "input_schema": {"type": "object"}}, {"name": name, "input_schema": 5}]})
    return cases


def image_injection_cases():
    """Typed image-token spellings next to real image parts, in every message kind that holds
    images, for all three formats and both models; recorded with the rendered prompt and token IDs
    so the placeholder positions are checked, not only the conversation text."""
    tok = "<｜image｜>"
    url = "https://example.com/a.png"
    data = "data:image/png;base64,iVBORw0KGgo="
    cases = []

    def add(fmt, body):
        for m in (FLASH, PRO):
            b = copy.deepcopy(body)
            b["model"] = m
            cases.append({"format": fmt, "body": b, "options": None, "render": True})

    img = {"type": "image_url", "image_url": {"url": url}}
    img2 = {"type": "image_url", "image_url": {"url": data, "detail": "low"}}
    text = {"type": "text", "text": f"look: {tok} fake"}
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}
    add("chat", {"messages": [{"role": "user", "content": [text, img]}], "thinking": {"type": "disabled"}})
    add("chat", {"messages": [{"role": "user", "content": [img, text, img2, {"type": "text", "text": tok * 3}]}]})
    add("chat", {"messages": [{"role": "user", "content": f"plain {tok} string"}]})
    add("chat", {"messages": [{"role": "system", "content": [text, img]}, {"role": "user", "content": [img2, text]}]})
    add("chat", {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
                              {"role": "system", "content": [{"type": "text", "text": tok}, img]}, {"role": "user", "content": [text]}]})
    add("chat", {"messages": [{"role": "user", "content": "q"}, call,
                              {"role": "tool", "tool_call_id": "call_1", "content": [text, img, {"type": "text", "text": tok}]}],
                 "tools": [FN]})
    rtext = {"type": "input_text", "text": f"look: {tok} fake"}
    rimg = {"type": "input_image", "image_url": url}
    add("responses", {"input": [{"role": "user", "content": [rtext, rimg]}]})
    add("responses", {"input": [{"role": "system", "content": [rimg, rtext]}, {"role": "developer", "content": [rtext, rimg]},
                                {"role": "user", "content": [rimg, rtext, rimg]}], "instructions": f"be {tok} brief"})
    add("responses", {"input": f"text input {tok}", "instructions": tok})
    add("responses", {"input": [{"role": "user", "content": "q"},
                                {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
                                {"type": "function_call_output", "call_id": "c1", "output": [rtext, rimg]}],
                      "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]})
    mtext = {"type": "text", "text": f"look: {tok} fake"}
    mimg = {"type": "image", "source": {"type": "url", "url": url}}
    add("messages", {"max_tokens": 100, "messages": [{"role": "user", "content": [mtext, mimg, mtext]}]})
    add("messages", {"max_tokens": 100, "system": f"sys {tok}", "messages": [{"role": "user", "content": [mimg, mtext]}]})
    add("messages", {"max_tokens": 100, "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                                                     {"role": "system", "content": [mtext, mimg]}, {"role": "user", "content": "u"}]})
    add("messages", {"max_tokens": 100, "tools": [{"name": "f", "input_schema": {"type": "object"}}], "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [mtext, mimg]}, mimg, mtext]}]})
    return cases


def found_by_differential_cases():
    """Rules found by the random differential checks, one case per reproduction."""
    cases = []

    def add(fmt, body, options=None):
        cases.append({"format": fmt, "body": body, "options": options, "render": True})

    # Chat: a tool-choice error comes before "json_object with prefix", which comes before
    # "function call with prefix".
    prefix = {"model": PRO, "messages": [{"role": "user", "content": "json"}, {"role": "assistant", "content": "x", "prefix": True}],
              "response_format": {"type": "json_object"}, "tools": [FN]}
    add("chat", dict(prefix, tool_choice={"type": "function", "function": {"name": "missing"}}))
    add("chat", dict(prefix, tool_choice="required"))
    add("chat", dict(prefix, tool_choice="required", thinking={"type": "disabled"}))
    add("chat", prefix)
    add("chat", dict(prefix, tool_choice="none"))

    # Responses: custom tool calls and their outputs.
    u = {"role": "user", "content": "hi"}

    def call(**k):
        return dict({"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch"}, **k)

    def out(**k):
        return dict({"type": "custom_tool_call_output", "call_id": "c1", "output": "done"}, **k)

    patch_tool = [{"type": "custom", "name": "apply_patch"}]
    img = {"type": "input_image", "image_url": "https://example.com/a.png"}
    for model in (PRO, FLASH):
        for items in ([u, call(), out()], [call(), out()], [u, call(input='é"\n<｜User｜>\u0001\u2028'), out()],
                      [u, call(), out(output=[{"type": "input_text", "text": "a"}, img])],
                      [u, call(), out(output=[])], [u, call(), {"type": "custom_tool_call_output", "call_id": "c1"}],
                      [u, call(), out(output=None)],
                      [u, call(), {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
                       {"type": "function_call_output", "call_id": "c2", "output": "o2"}, out()],
                      [u, call(), {"type": "function_call_output", "call_id": "c1", "output": "o"}],
                      [u, {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}, out()]):
            add("responses", {"model": model, "input": items})
            add("responses", {"model": model, "input": items, "tools": patch_tool})
    for items in ([u, call(call_id="")], [u, call(), out(call_id="")], [u, call(call_id=None)], [u, call(), out(call_id=None)],
                  [u, {"type": "custom_tool_call"}], [u, {"type": "custom_tool_call", "call_id": "a"}],
                  [u, {"type": "custom_tool_call", "call_id": "a", "name": "n"}], [u, call(input={"a": 1})],
                  [u, call(input=5)], [u, call(name=None)], [u, call(name="")], [u, call(call_id=5)],
                  [u, call(), out(output={"a": 1})], [u, call(), out(output=5)],
                  [u, call(), out(output=[{"type": "output_text", "text": "a"}])], [u, call(), out(output=[{"type": "input_text"}])],
                  [u, {"type": "custom_tool_call_output"}], [u, {"type": "custom_tool_call_output", "output": 5}],
                  [u, out()], [u, call()], [u, call(), out(), out()], [u, call(), out(), call(), out()],
                  [u, call(), call(call_id="c2"), out(call_id="c2"), out()]):
        add("responses", {"model": FLASH, "input": items})
    add("responses", {"model": FLASH, "input": [u, call(), out()], "tools": patch_tool, "tool_choice": {"type": "custom", "name": "apply_patch"}})
    add("responses", {"model": FLASH, "input": [u, call(name="n")], "tools": [{"type": "custom", "name": "n"}]})

    # Messages: server tool blocks, tool additions and deferred tools.
    mu = {"role": "user", "content": "hi"}
    srv = {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}
    wsr = {"type": "web_search_tool_result", "tool_use_id": "s", "content": []}
    tu = {"type": "tool_use", "id": "x", "name": "n", "input": {}}
    th = {"type": "thinking", "thinking": "x"}
    ta = {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "n"}}
    tb = {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "m"}}
    n_tool = {"name": "n", "input_schema": {"type": "object"}}
    m_tool = {"name": "m", "description": "dm", "input_schema": {"type": "object"}}

    def msg(messages, options=None, model=FLASH, **k):
        add("messages", dict({"model": model, "max_tokens": 100, "messages": messages}, **k), options)

    def assistant(*blocks):
        return {"role": "assistant", "content": [{"type": "text", "text": "a"}, *blocks]}

    def system(*blocks):
        return [mu, {"role": "assistant", "content": "x"}, {"role": "system", "content": list(blocks)}]

    for ws in (None, "Drop", "Reject"):
        opts = None if ws is None else {"messages_web_search": ws}
        for block in (srv, wsr, ta, {"type": "server_tool_use"}, {"type": "server_tool_use", "id": "s", "name": "x"},
                      {"type": "web_search_tool_result", "tool_use_id": "s"}, dict(wsr, content=5),
                      {"type": "tool_addition", "tool": 5}, {"type": "tool_addition", "tool": {"type": "x"}},
                      {"type": "tool_addition", "tool": {"type": "tool_reference"}}):
            msg([mu, assistant(block)], opts)
            msg([{"role": "user", "content": [{"type": "text", "text": "a"}, block]}], opts)
        msg([mu, assistant(srv, wsr)], opts)
        msg([mu, assistant(wsr, tu)], opts)
        msg([mu, assistant(tu, wsr)], opts)
        msg([mu, {"role": "assistant", "content": [wsr, ta]}], opts)
        msg([mu, {"role": "assistant", "content": [ta, wsr]}], opts)
    for blocks in ([wsr, tu], [tu, wsr], [th, wsr], [wsr, th], [srv, wsr], [wsr, srv], [tu, th], [ta, tu], [tu, ta]):
        msg([{"role": "user", "content": blocks}])
        msg(system(*blocks))
    for model in (PRO, FLASH):
        msg(system(ta), model=model)
        msg(system(ta), model=model, tools=[n_tool])
        msg(system({"type": "text", "text": "s"}, ta), model=model, tools=[n_tool])
        msg(system(ta), model=model, tools=[dict(n_tool, defer_loading=True)])
        msg(system(ta), model=model, tools=[dict(n_tool, defer_loading=True), m_tool])
        msg([mu], model=model, tools=[dict(n_tool, defer_loading=True), m_tool])
        msg(system(ta, tb, ta), model=model, tools=[n_tool, m_tool])
        msg(system(ta), model=model, tools=[n_tool], tool_choice={"type": "none"})
        msg(system({"type": "text", "text": "s"}, ta), model=model, tools=[n_tool], tool_choice={"type": "none"})
        msg(system(ta, tb), model=model, tools=[n_tool, m_tool], tool_choice={"type": "tool", "name": "m"}, thinking={"type": "disabled"})
        msg(system(tb), model=model, tools=[dict(n_tool, defer_loading=True)])
        msg(system(tb), model=model, tools=[dict(n_tool, input_schema=5)])
        msg(system(ta), model=model, tools=[dict(n_tool, input_schema=5)])
        msg(system(ta, {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}), model=model, tools=[n_tool])
        msg([{"role": "system", "content": [ta]}, mu], model=model, tools=[n_tool])
        msg(system(ta), model=model, tools=[n_tool], system=[{"type": "text", "text": "top"}])
        msg(system({"type": "tool_addition", "tool": {"type": "tool_reference", "name": 5}}), model=model, tools=[n_tool])
        for flag in (None, 5, "yes", False):
            msg([mu], model=model, tools=[dict(n_tool, defer_loading=flag), m_tool])
        msg([mu], model=model, tools=[dict(n_tool, defer_loading=True, type="custom")])
        msg([mu], model=model, tools=[dict(n_tool, defer_loading=True), {"type": "web_search_20250305", "name": "web_search"}],
            options={"messages_web_search": "Drop"})

    # Chat: penalties are range-checked (after n, before temperature); parallel_tool_calls is a
    # boolean.
    chat = {"model": FLASH, "messages": [U]}
    for k in ("frequency_penalty", "presence_penalty"):
        for v in (2, -2, 2.0001, -2.5, 3, True, "x"):
            add("chat", dict(chat, **{k: v}))
        add("chat", dict(chat, **{k: 3}, temperature=5))
        add("chat", dict(chat, **{k: 3}, n=2))
        add("chat", dict(chat, **{k: 3}, stop=[""]))
    for v in (True, False, None, 1.5, "", {}, [], 0):
        add("chat", dict(chat, parallel_tool_calls=v))
    add("chat", dict(chat, parallel_tool_calls=1, max_tokens="x"))
    add("chat", dict(chat, max_tokens="x", parallel_tool_calls=1))

    # Responses: duplicate names within one namespace; a custom tool named by tool_choice.
    def fn(n, **k):
        return dict({"type": "function", "name": n}, **k)

    def ns(name, *inner):
        return {"type": "namespace", "name": name, "description": "", "tools": list(inner)}

    for tools in ([ns("ns", fn("a"), fn("a"))], [fn("x", parameters={"type": "string"}), ns("ns", fn("a"), fn("a"))],
                  [{"type": "custom", "name": "other"}, ns("ns", fn("a"), fn("a"))],
                  [ns("ns", fn("a"), fn("a")), {"type": "custom", "name": "other"}],
                  [ns("ns", fn("a"), fn("a"), fn(""))],
                  [ns("ns", fn("a"), fn(""), fn("a"))]):
        for model in (PRO, FLASH):
            add("responses", {"model": model, "input": "hi", "tools": tools})
    for effort in (None, "none"):
        for choice in ({"type": "custom", "name": "apply_patch"}, {"type": "custom", "name": "f"},
                       {"type": "function", "name": "apply_patch"}):
            body = {"model": FLASH, "input": "hi", "tools": patch_tool + [fn("f")], "tool_choice": choice}
            if effort:
                body["reasoning"] = {"effort": effort}
            add("responses", body)

    # Shapes of tools and tool_choice are reported in member order with the other fields.
    add("responses", {"model": FLASH, "input": "hi", "tools": [5], "temperature": "x"})
    add("responses", {"model": FLASH, "input": "hi", "temperature": "x", "tools": [5]})
    add("responses", {"model": FLASH, "input": "hi", "tool_choice": "bogus", "top_p": "x"})
    add("responses", {"model": FLASH, "input": "hi", "top_p": "x", "tool_choice": "bogus"})
    msg([mu], tools=[dict(n_tool, defer_loading="x")], temperature="x")
    msg([mu], temperature="x", tools=[dict(n_tool, defer_loading="x")])
    msg([mu], tools=[dict(n_tool, description=5)], stop_sequences=True)

    # A deferred tool is marked beside its function in the tool-call constraint.
    msg([mu], tools=[n_tool, dict(m_tool, defer_loading=True)])

    # Missing reasoning (with the rejecting option) is checked right after the messages, before
    # tools and options; with tools declared every assistant turn after the last user needs it.
    reject = {"reject_missing_reasoning": True}
    plain_tool = {"type": "function", "function": {"name": "f"}}
    calls = [U, {"role": "assistant", "content": "a", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "c", "content": "r"}]
    for extra in ({}, {"tools": [FN2]}, {"tools": [plain_tool] * 2}, {"tools": [plain_tool], "tool_choice": "required"},
                  {"response_format": {"type": "json_object"}}, {"stop": [""]}, {"temperature": 5}, {"n": 2},
                  {"seed": 2**63}, {"top_logprobs": 5}, {"tools": [{"type": "function", "function": {"name": "bad name"}}]}):
        add("chat", dict({"model": PRO, "messages": calls}, **extra), reject)
    final = [U, {"role": "assistant", "content": "x"}]
    for extra in ({}, {"tools": [plain_tool]}, {"tools": [plain_tool], "tool_choice": "none"}, {"tools": [plain_tool], "thinking": {"type": "disabled"}}):
        add("chat", dict({"model": FLASH, "messages": final}, **extra), reject)
        add("chat", dict({"model": FLASH, "messages": final + [U]}, **extra), reject)
        add("chat", dict({"model": FLASH, "messages": [U, {"role": "assistant", "content": "P", "prefix": True}]}, **extra), reject)
    add("responses", {"model": PRO, "input": [u, {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                                               {"type": "function_call_output", "call_id": "c", "output": "o"}]}, reject)
    add("responses", {"model": PRO, "input": [u, call(), out()], "tools": [{"type": "function", "name": "f", "parameters": {"type": "string"}}]}, reject)
    # An output's parts are read (and their errors raised) before its call is looked up.
    bad_image = [{"type": "input_image", "image_url": "ftp://x"}]
    fc = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    fco = {"type": "function_call_output", "call_id": "c", "output": "o"}
    for items in ([u, dict(fco, call_id="zz", output=bad_image)], [u, fc, fco, dict(fco, output=bad_image)],
                  [u, fc, fco, dict(fco, output=[{"type": "input_image", "file_id": "f"}])],
                  [u, fc, {"type": "function", "call_id": "a"}, dict(fco, call_id="a", output=bad_image), fco]):
        add("responses", {"model": FLASH, "input": items})
    tu_call = {"type": "tool_use", "id": "c", "name": "n", "input": {}}
    for model in (PRO, FLASH):
        msg([mu, {"role": "assistant", "content": [tu_call]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "r"}]}],
            reject, model=model, tools=[n_tool])
        msg([mu, {"role": "assistant", "content": "x"}], reject, model=model)
        msg([mu, {"role": "assistant", "content": "x"}, mu], reject, model=model, tools=[n_tool])
        msg([mu, {"role": "assistant", "content": "x"}, {"role": "system", "content": "s"}], reject, model=model)

    # Responses: an output without call_id has its parts read before the calls before it are
    # found unanswered (seed 701 mutated, input[12]).
    ftp_parts = [{"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": "ftp://bad/a.png"}]
    no_id = {"type": "function_call_output", "output": "x"}
    for model in (PRO, FLASH):
        for items in ([u, fc, dict(no_id, output=ftp_parts)], [u, fc, dict(no_id, output=[{"type": "input_image", "file_id": "f"}])],
                      [u, fc, dict(no_id, output=[{"type": "input_image"}])], [u, fc, no_id, {"role": "user", "content": ftp_parts}],
                      [u, fc, dict(fc, call_id="c2"), dict(fco, call_id="c2"), dict(no_id, output=ftp_parts)],
                      [u, fc, {"role": "user", "content": ftp_parts}]):
            add("responses", {"model": model, "input": items})
    add("responses", {"model": FLASH, "input": [
        u, {"type": "function_call", "call_id": "q10", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "a11", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "z12", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "z12", "output": "o"}, dict(no_id, output=ftp_parts),
        {"type": "function_call_output", "call_id": "a11", "output": ""}], "tools": [fn("f")]}, {"responses_web_search": "Reject"})

    # Messages: a declared server tool (dropped from the tool list) still counts as declaring
    # tools for the reasoning policy (seed 717).
    web = {"type": "web_search_20250305", "name": "web_search"}
    drop_reject = dict(reject, messages_web_search="Drop", default_thinking_mode=True)
    ma = {"role": "assistant", "content": "x"}
    ms = {"role": "system", "content": "s"}
    for model in (PRO, FLASH):
        for messages in ([mu, ma], [mu, ms, ma], [mu, ma, ms], [mu, ma, mu], [ma], [mu, ma, ms, mu]):
            msg(messages, drop_reject, model=model, tools=[web])
        msg([mu, ma], drop_reject, model=model, tools=[])
        msg([mu, ma], dict(drop_reject, default_thinking_mode=False), model=model, tools=[web])
    msg([{"role": "user", "content": "What is 2+2?"}, {"role": "user", "content": "json"}, ma,
         {"role": "user", "content": [{"type": "text", "text": "<｜image｜>"},
                                      {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}}]},
         {"role": "system", "content": "mid system"}, ma],
        dict(drop_reject, responses_web_search="Reject"), tools=[web], output_config={"effort": "minimal"})

    # Two namespaces of one name declaring the same tool: the later flattened name takes the
    # first free suffix (_1, _2, ...); plain function names are never taken by a namespace.
    for tools in ([ns("ns", fn("a")), ns("ns", fn("a"))], [ns("ns", fn("a")), ns("ns", fn("a")), ns("ns", fn("a"))],
                  [fn("ns__a"), ns("ns", fn("a"))], [ns("ns", fn("a")), fn("ns__a")],
                  [ns("ns", fn("a")), ns("ns", fn("a")), fn("ns__a_1")], [fn("ns__a_1"), ns("ns", fn("a")), ns("ns", fn("a"))],
                  [ns("ns", fn("a")), ns("ns", fn("a")), ns("ns", fn("a_1"))], [ns("ns", fn("a"), fn("b")), ns("ns", fn("b"), fn("a"))],
                  [dict(ns("ns", fn("a", description="d1")), description="N1"), dict(ns("ns", fn("a", description="d2")), description="N2")]):
        for model in (PRO, FLASH):
            add("responses", {"model": model, "input": "hi", "tools": tools})
    for name in ("ns__a_1", "ns::a_1", "ns__a"):
        add("responses", {"model": FLASH, "input": "hi", "tools": [ns("ns", fn("a")), ns("ns", fn("a"))],
                          "tool_choice": {"type": "function", "name": name}, "reasoning": {"effort": "none"}})

    # Refused web search with errors in the input: a web_search tool is refused where the tools
    # are read (before the input), a web_search tool choice after the input.
    ws_reject = {"responses_web_search": "Reject"}
    ftp_message = {"role": "user", "content": ftp_parts}
    for items in ([u, ftp_message], [u, {"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}], [u, fc], []):
        add("responses", {"model": FLASH, "input": items, "tools": [{"type": "web_search"}]}, ws_reject)
        add("responses", {"model": FLASH, "input": items, "tools": [fn("f"), {"type": "web_search_2025_08_26"}]}, ws_reject)
        add("responses", {"model": FLASH, "input": items, "tools": [fn("f")], "tool_choice": {"type": "web_search"}}, ws_reject)

    # Image URLs: a URL over 8,192 bytes is refused in a first pass over a message's parts, in
    # part order with Chat file parts and Responses images without a usable source, before any
    # other check of an image part (scheme, media type, base64) and before "Image in assistant
    # message" (conversion_random.py seeds 3-20: 37 cases). An external URL is anything that
    # starts with `http` (any case, nothing before it).
    long_url, long_e = "http://x.org/" + "a" * 8200, "https://x.org/" + "é" * 4100
    file_part = {"type": "file", "file": {"file_id": "f1"}}

    def iu(url):
        return {"type": "image_url", "image_url": {"url": url}}

    def chat_user(*parts, role="user"):
        return {"role": role, "content": list(parts)}

    for messages in ([chat_user(file_part, iu(long_url))], [chat_user(iu(long_url), file_part)],
                     [chat_user(iu(long_e), {"type": "text", "text": "t"}, file_part)],
                     [chat_user({"type": "text", "text": "t"}, file_part, iu(long_url))],
                     [chat_user(iu("ftp://x"), file_part, iu(long_url))], [chat_user(iu("ftp://x"), iu(long_url))],
                     [chat_user(iu("data:image/png;base64,@@"), iu(long_url))],
                     [chat_user(iu("data:;base64,AA"), iu("data:image/png;x;base64,AAAA===="), iu(long_url))],
                     [chat_user(iu("ftp://x")), chat_user(iu(long_url))],
                     [chat_user(iu("http://x/a.png"), iu(long_url), role="assistant")],
                     [chat_user(iu(long_url), role="assistant")], [chat_user(file_part, iu(long_url), role="assistant")],
                     [chat_user(iu(long_url), file_part, role="assistant")], [chat_user(iu("ftp://x"), role="assistant")],
                     [chat_user(iu("http://x/a.png"), role="assistant"), chat_user(iu(long_url))],
                     [chat_user(iu(" " + long_url))], [chat_user(iu("\n" + long_url))],
                     [chat_user(iu("hTTpS://x.org/" + "a" * 8200))], [chat_user(iu("http:/x.org/" + "a" * 8200))],
                     [chat_user(iu("https:" + "a" * 8200))], [chat_user(iu("ftp://x.org/" + "a" * 8200))],
                     [chat_user(iu("data:image/png;base64," + "A" * 9000))]):
        for model in (PRO, FLASH):
            add("chat", {"model": model, "messages": messages})
    for url in ("http:/x.org/a.png", "https:abc", "http:", "HTTP:x", "http", "Http", "HTTPfoo", "httpé", "httpx://a",
                "http//x", "http:\\\\x", "http\t://x", " http://x.org/a.png", "\thttp://x.org/a.png", "htt",
                " data:image/png;base64,AAAA"):
        add("chat", {"model": FLASH, "messages": [chat_user(iu(url))]})

    def ri(url=None, file_id=None):
        return {"type": "input_image", **({} if url is None else {"image_url": url}),
                **({} if file_id is None else {"file_id": file_id})}

    def rm(*parts, role="user"):
        return {"role": role, "content": list(parts)}

    call_f = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    for items in ([rm(ri(file_id="f"), ri(long_url))], [rm(ri(long_url), ri(file_id="f"))], [rm(ri(), ri(long_url))],
                  [rm(ri(""), ri(long_url))], [rm(ri(long_e), {"type": "input_text", "text": "t"}, ri(file_id="f"))],
                  [rm(ri("http://x/a"), ri(long_url), role="assistant")], [rm(ri("ftp://x"), ri(long_url), role="assistant")],
                  [rm(ri(file_id="f"), ri(long_url), role="assistant")], [rm(ri(long_url), role="assistant")],
                  [rm(ri("ftp://x"), ri(long_url))], [rm(ri("data:,iVBORw0KGgp="), ri(long_url))],
                  [rm(ri(" http://x/a.png"))], [rm(ri("httpx:a"))], [rm(ri(" " + long_url))],
                  [rm(ri("ftp://x")), rm(ri(long_url))],
                  [call_f, {"type": "function_call_output", "call_id": "c", "output": [ri("ftp://x"), ri(long_url)]}],
                  [call_f, {"type": "function_call_output", "call_id": "c", "output": [ri(file_id="f"), ri(long_url)]}]):
        for model in (PRO, FLASH):
            add("responses", {"model": model, "input": items, "tools": [fn("f")]})

    # Chat: presence_penalty is checked before frequency_penalty, whatever the body's order
    # (seed 16).
    for body in ({"frequency_penalty": 5, "presence_penalty": 5}, {"presence_penalty": 5, "frequency_penalty": 5},
                 {"frequency_penalty": 2**40, "presence_penalty": 2.5}):
        add("chat", {"model": FLASH, "messages": [{"role": "user", "content": "hi"}], **body})

    # Messages: base64 image data may end in any number of `=` (the image stage then refuses the
    # data URL, as officially); a last group of two or three symbols needs at least one.
    def b64_block(data):
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}

    for data in ("iVBORw0KGgo===", "iVBORw0KGgo====", "iVBORw0KGgo=====", "iVBORw0KGgo", "AA", "AA=", "AA===",
                 "A===", "AAAA=", "AAAA==", "=", "====", "AA=A", "A", "AAA", "AAA=", "AAA==", "AAA=====", "AB==",
                 "AQ===", "AAE==", "AAAB", "AA==AA==", "A A=", " AAAA", "AAAA\n", "-_-_", "", "AAAA=====",
                 "iVBORw0KGgp===", "iVBORw0KGgo=\n=", "%41AA", "AAAAA=", "AAAA=A=", "AAAAAA", "AAAAAA=",
                 "AAAAAQ=", "+/8="):
        msg([{"role": "user", "content": [b64_block(data)]}])
    for url in ("ftp://" + "a" * 8200, " " + long_url, "httpx://a", "http:/x", " http://x/a.png", "HTTP://x/a"):
        msg([{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": url}}]}])
    return cases


RANDOM_SEED, RANDOM_COUNT = 1, 600
# Randomly broken bodies (one node of a random body replaced or deleted).
MUTATED_SEED, MUTATED_COUNT = 7, 450


def main() -> int:
    sys.path.insert(0, str(HERE))
    from conversion_random import mutated_cases, random_cases  # noqa: E402

    cases = (chat_cases() + chat_n_cases() + responses_cases() + messages_cases() + broken_body_cases()
             + random_cases(RANDOM_SEED, RANDOM_COUNT) + mutated_cases(MUTATED_SEED, MUTATED_COUNT)
             + image_injection_cases() + found_by_differential_cases())
    from official_venv import run_in_official  # noqa: E402

    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp_in = OUT.parent / "_inputs.json"
    tmp_in.write_text(json.dumps(cases, ensure_ascii=False))
    try:
        run_in_official(str(HERE / "_record_conversion.py"), str(tmp_in), str(OUT))
    finally:
        tmp_in.unlink(missing_ok=True)
    data = json.loads(OUT.read_text())
    import fixture_json  # noqa: E402

    fixture_json.write(OUT, data)
    rejected = sum(1 for c in data if c["expected"]["outcome"] != "ok")
    print(f"{len(data)} cases, {rejected} rejected -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
