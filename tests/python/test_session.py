"""`EncodingSession` through the Python API: random multi-turn agent histories written as Chat
Completions, Responses and Messages requests (both model versions) are converted turn after
turn; every turn's IDs equal a cold `encode`, and the turn report matches a direct comparison
with the previous turn's IDs."""

import json

import deepseek_recipe as dr
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stream_support import tokenizer_path

MODELS = {"v4": "DeepSeek-V4-Pro", "v41": "DeepSeek-V4.1-Flash"}
TEXT = st.lists(st.sampled_from(list("ab cd\n数") + ["<｜User｜>", "</think>", "｜DSML｜", "<｜Assistant｜>"]),
                max_size=8).map("".join)
_TOKS = {}


def tokenizer(version):
    if version not in _TOKS:
        with open(tokenizer_path(), encoding="utf-8") as f:
            data = json.load(f)
        if version == "v41":
            data["added_tokens"].append({"id": 129280, "content": "<｜System｜>", "single_word": False,
                                         "lstrip": False, "rstrip": False, "normalized": False, "special": True})
        _TOKS[version] = dr.Tokenizer.from_str(json.dumps(data))
    return _TOKS[version]


# One agent round: reasoning, content, calls (list of argument strings), results in an order, a user note.
ROUND = st.tuples(TEXT, TEXT, st.lists(TEXT, min_size=0, max_size=3), st.booleans(), st.one_of(st.none(), TEXT))


def chat_body(model, system, first, rounds, thinking):
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": first}]
    for t, (reasoning, content, args, rev, note) in enumerate(rounds):
        calls = [{"id": f"c{t}_{i}", "type": "function", "function": {"name": "search", "arguments": json.dumps({"q": a})}}
                 for i, a in enumerate(args)]
        msgs.append({"role": "assistant", "content": content, "reasoning_content": reasoning,
                     **({"tool_calls": calls} if calls else {})})
        results = [{"role": "tool", "tool_call_id": c["id"], "content": f"r {a}"} for c, a in zip(calls, args)]
        msgs += results[::-1] if rev else results
        if note is not None or not calls:
            msgs.append({"role": "user", "content": note or "go on"})
    return {"model": model, "messages": msgs, "thinking": {"type": "enabled" if thinking else "disabled"},
            "tools": [{"type": "function", "function": {"name": "search", "description": "Search <｜User｜>",
                                                        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]}


def responses_body(model, system, first, rounds, thinking):
    items = [{"role": "user", "content": first}]
    for t, (reasoning, content, args, rev, note) in enumerate(rounds):
        if thinking:
            items.append({"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": reasoning or "r"}]})
        if content:
            items.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": content}]})
        calls = [{"type": "function_call", "call_id": f"c{t}_{i}", "name": "search", "arguments": json.dumps({"q": a})}
                 for i, a in enumerate(args)]
        items += calls
        outs = [{"type": "function_call_output", "call_id": c["call_id"], "output": f"r {a}"} for c, a in zip(calls, args)]
        items += outs[::-1] if rev else outs
        if note is not None or not calls:
            items.append({"role": "user", "content": note or "go on"})
    return {"model": model, "instructions": system, "input": items,
            "reasoning": {"effort": "high" if thinking else "none"},
            "tools": [{"type": "function", "name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]}


def messages_body(model, system, first, rounds, thinking):
    msgs = [{"role": "user", "content": first}]
    for t, (reasoning, content, args, rev, note) in enumerate(rounds):
        blocks = [{"type": "thinking", "thinking": reasoning or "r", "signature": "s"}] if thinking else []
        if content:
            blocks.append({"type": "text", "text": content})
        uses = [{"type": "tool_use", "id": f"c{t}_{i}", "name": "search", "input": {"q": a}} for i, a in enumerate(args)]
        msgs.append({"role": "assistant", "content": blocks + uses or [{"type": "text", "text": "ok"}]})
        results = [{"type": "tool_result", "tool_use_id": u["id"], "content": f"r {a}"} for u, a in zip(uses, args)]
        user = (results[::-1] if rev else results) + ([{"type": "text", "text": note or "go on"}]
                                                       if note is not None or not uses else [])
        msgs.append({"role": "user", "content": user})
    return {"model": model, "system": system or "s", "messages": msgs, "max_tokens": 1024,
            "thinking": {"type": "enabled", "budget_tokens": 2048} if thinking else {"type": "disabled"},
            "tools": [{"name": "search", "description": "Search", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]}


BUILDERS = {"chat": (chat_body, dr.ChatCompletionRequest), "responses": (responses_body, dr.ResponsesRequest),
            "messages": (messages_body, dr.MessagesRequest)}


@pytest.mark.parametrize("version", ["v4", "v41"])
@pytest.mark.parametrize("fmt", sorted(BUILDERS))
@settings(max_examples=12, deadline=None)
@given(system=TEXT, first=TEXT, rounds=st.lists(ROUND, min_size=1, max_size=4), thinking=st.booleans())
def test_session_turns_equal_cold_encode(version, fmt, system, first, rounds, thinking):
    build, request_cls = BUILDERS[fmt]
    enc = (dr.DeepseekV4Encoding() if version == "v4" else dr.DeepseekV41Encoding()).with_tokenizer(tokenizer(version))
    session = dr.EncodingSession(enc)
    previous = None
    for n in range(len(rounds) + 1):
        body = build(MODELS[version], system, first, rounds[:n], thinking)
        conv = request_cls(body).convert(dr.ConversionOptions()).conversation
        cold = enc.encode(conv)
        assert session.encode(conv) == cold
        turn = session.last_turn
        assert turn.tokens == len(cold)
        if previous is None:
            assert not turn.extends_previous and turn.cause is None
        else:
            common = next((i for i, (a, b) in enumerate(zip(previous, cold)) if a != b), min(len(previous), len(cold)))
            assert turn.common_prefix_tokens == common
            assert turn.extends_previous == (common == len(previous))
            assert (turn.cause is None) == turn.extends_previous
            assert turn.divergence_token == (None if turn.extends_previous else common)
        previous = cold
    assert session.memory_bytes >= 4 * len(previous)


def test_report_names_dropped_reasoning():
    enc = dr.DeepseekV41Encoding().with_tokenizer(tokenizer("v41"))
    session = dr.EncodingSession(enc)
    body = chat_body(MODELS["v41"], "sys", "hi", [("think", "", ["x"], False, None)], True)
    session.encode(dr.ChatCompletionRequest(body).convert(dr.ConversionOptions()).conversation)
    del body["messages"][2]["reasoning_content"]
    conv = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions()).conversation
    assert session.encode(conv) == enc.encode(conv)
    turn = session.last_turn
    assert (turn.extends_previous, turn.cause, turn.message_index) == (False, "reasoning_dropped_from_history", 2)
    assert turn.to_dict()["cause"] == "reasoning_dropped_from_history"
    session.reset()
    assert session.memory_bytes == 0


def test_session_argument_errors():
    with pytest.raises(TypeError):
        dr.EncodingSession(5)
    with pytest.raises(RuntimeError, match="no tokenizer"):
        dr.EncodingSession(dr.DeepseekV4Encoding()).encode(dr.Conversation([dr.UserMessage("x")]))
