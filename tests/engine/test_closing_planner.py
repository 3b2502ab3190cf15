"""The closing planner in the engine: a constrained request whose ``max_tokens`` would cut its output inside a
call or a JSON value ends complete instead (``finish_reason`` "stop", within the budget), through the protocol
entry point, with the codec's real grammar and tokenizer and a toy model whose free output is garbage.

The planner itself is the codec's (``recipe-rs/grammar/src/closing.rs``, tested in Rust); these tests check
that the engine gives each sequence its budget, that a request with room to spare is not steered, and that
an unconstrained request is untouched.
"""

from __future__ import annotations

import json
from dataclasses import replace

import jsonschema
import pytest
from deepseek_engine.core.constraint import SequenceConstraint
from deepseek_engine.entrypoints.protocol_api import ProtocolEngine, find_tokenizer_json
from serving_toy import text_model, toy_llm

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1, "maximum": 9},
        "opts": {"type": "object", "properties": {"unit": {"enum": ["c", "f"]}, "tags": {
            "type": "array", "items": {"type": "string"}}}, "required": ["unit", "tags"]}},
    "required": ["city", "days", "opts"], "additionalProperties": False}}}]
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "words": {"type": "array", "items": {
    "type": "string"}}}, "required": ["n", "words"], "additionalProperties": False}


@pytest.fixture(scope="module")
def engine() -> ProtocolEngine:
    llm = toy_llm(text_model(), max_model_len=512, max_num_seqs=4)
    return ProtocolEngine(llm, find_tokenizer_json())


def body(max_tokens: int, seed: int, **extra) -> dict:
    return {"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "Weather in Oslo? json"}],
            "thinking": {"type": "disabled"}, "max_tokens": max_tokens, "temperature": 1.0, "seed": seed} | extra


def generate(engine: ProtocolEngine, bodies: list[dict]) -> list[tuple[dict, object]]:
    preps = [engine.prepare("chat.completions", b) for b in bodies]
    outs = engine.llm.generate([p.prompt_ids for p in preps], [p.params for p in preps])
    return [(engine.finish(p, o), o) for p, o in zip(preps, outs)]


@pytest.mark.parametrize("max_tokens", [90, 140])
def test_required_calls_end_complete_within_max_tokens(engine, max_tokens):
    bodies = [body(max_tokens, seed, tools=TOOLS, tool_choice="required") for seed in range(4)]
    for resp, out in generate(engine, bodies):
        assert out.finish_reason == "stop" and len(out.token_ids) <= max_tokens
        calls = resp["choices"][0]["message"]["tool_calls"]
        assert calls and all(c["function"]["name"] == "get_weather" for c in calls)
        for call in calls:
            jsonschema.validate(json.loads(call["function"]["arguments"]), TOOLS[0]["function"]["parameters"])


def test_json_answers_end_complete_within_max_tokens(engine):
    rf = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}
    for resp, out in generate(engine, [body(40, seed, response_format=rf) for seed in range(4)]):
        assert out.finish_reason == "stop" and len(out.token_ids) <= 40
        jsonschema.validate(json.loads(resp["choices"][0]["message"]["content"]), SCHEMA)


def test_text_answers_are_cut_as_before(engine):
    """Content with tools and ``auto`` is complete at every token: the planner does not end it early, the budget
    cuts it (``length``), and near the budget no calls block may open."""
    for resp, out in generate(engine, [body(30, seed, tools=TOOLS) for seed in range(3)]):
        assert out.finish_reason == "length" and len(out.token_ids) == 30
        assert not resp["choices"][0]["message"].get("tool_calls")


def test_each_sequence_gets_its_budget(engine, monkeypatch):
    budgets = []
    create = SequenceConstraint.create.__func__

    def spy(cls, constraint, model_vocab, end_tokens, max_tokens=None):
        budgets.append(max_tokens)
        return create(cls, constraint, model_vocab, end_tokens, max_tokens)

    monkeypatch.setattr(SequenceConstraint, "create", classmethod(spy))
    prep = engine.prepare("chat.completions", body(50, 0, tools=TOOLS, tool_choice="required"))
    engine.llm.generate([prep.prompt_ids], [prep.params])
    long = engine.prepare("chat.completions", body(100, 0, tools=TOOLS, tool_choice="required"))
    engine.llm.generate([long.prompt_ids], [replace(long.params, max_tokens=1)])
    assert budgets[0] == 50
    assert budgets[1] == 1  # the smaller of max_tokens and what the context leaves
    engine.llm.generate([long.prompt_ids], [replace(long.params, max_tokens=None)])
    assert budgets[2] == 512 - len(long.prompt_ids)


def test_a_row_with_one_allowed_token_needs_no_logits():
    import numpy as np
    from deepseek_engine.core.constraint import only_token

    row = np.zeros(8, dtype=np.uint32)
    assert only_token(row) is None
    row[3] = 1 << 7
    assert only_token(row) == 3 * 32 + 7
    row[3] |= 1
    assert only_token(row) is None
    row[3], row[5] = 1 << 31, 1
    assert only_token(row) is None
    row[5] = 0
    assert only_token(row) == 3 * 32 + 31
