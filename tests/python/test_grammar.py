"""Output grammars through the Python API: compile from a converted request, then a matcher
that fills int32 bitmask rows, accepts, rejects and rolls back tokens.

The grammar itself (every mode, the fixture and mutation corpora) is tested in Rust
(`recipe-rs/grammar/tests/`); these tests check the binding: shapes, the bitmask layout,
errors, and that the answers agree with the Rust side's on a few outputs.
"""

import json

import deepseek_recipe as dr
import numpy as np
import pytest

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]}}},
]
CALL = ("\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n"
        "<｜DSML｜ parameter name=\"city\" string=\"true\">Oslo</｜DSML｜ parameter>\n"
        "<｜DSML｜ parameter name=\"days\" string=\"false\">2</｜DSML｜ parameter>\n"
        "</｜DSML｜ invoke>\n</｜DSML｜ calls>")
EOS = 1


def convert(**extra):
    body = {"model": "DeepSeek-V4.1-Flash", "messages": [{"role": "user", "content": "weather? json"}],
            "thinking": {"type": "disabled"}} | extra
    return dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())


def allowed(row: np.ndarray, token: int) -> bool:
    return bool((int(row[token // 32]) >> (token % 32)) & 1)


def test_no_constraint_compiles_to_none(tokenizer):
    assert dr.OutputGrammar.compile(convert(), tokenizer) is None


def test_mask_and_accept_agree_token_by_token(tokenizer):
    grammar = dr.OutputGrammar.compile(convert(tools=TOOLS), tokenizer)
    assert grammar is not None and grammar.vocab_size >= 129280
    matcher = grammar.matcher()
    mask = np.zeros((3, (grammar.vocab_size + 31) // 32), dtype=np.int32)
    for token in tokenizer.encode("Let me check." + CALL) + [EOS]:
        matcher.fill_bitmask(mask, 2)
        assert allowed(mask[2], token)
        assert matcher.accept_token(token)
    assert matcher.is_terminated() and matcher.is_accepting()
    assert not mask[:2].any()  # other rows untouched
    matcher.fill_bitmask(mask, 0)
    assert not mask[0].any()  # nothing after EOS


def test_fill_bitmasks_fills_each_matchers_row_in_one_call(tokenizer):
    grammar = dr.OutputGrammar.compile(convert(tools=TOOLS), tokenizer)
    words = (grammar.vocab_size + 31) // 32
    output = tokenizer.encode("Let me check." + CALL) + [EOS]
    prefixes = [[], output[:6], output[:14], output]
    batch, single = [grammar.matcher() for _ in prefixes], [grammar.matcher() for _ in prefixes]
    for b, s_, prefix in zip(batch, single, prefixes):
        assert b.accept_tokens(prefix) == s_.accept_tokens(prefix) == len(prefix)
    budgets = [None, 40, None, 8]
    got = np.full((4, words), -1, dtype=np.int32)
    accepting = dr.GrammarMatcher.fill_bitmasks(batch, got, budgets)
    want = np.full((4, words), -1, dtype=np.int32)
    for i, (m, budget) in enumerate(zip(single, budgets)):
        m.fill_bitmask(want, i, max_tokens=budget)
    assert np.array_equal(got, want)
    assert accepting == [m.is_accepting() for m in single] == [True, False, False, True]
    with pytest.raises(ValueError, match="2 matchers but 1 budgets"):
        dr.GrammarMatcher.fill_bitmasks(batch[:2], got, [None])
    with pytest.raises(ValueError, match="outside the bitmask"):
        dr.GrammarMatcher.fill_bitmasks(batch, got[:3], budgets)


def test_rejected_tokens_leave_the_matcher_unchanged(tokenizer):
    grammar = dr.OutputGrammar.compile(convert(tools=TOOLS, tool_choice="required"), tokenizer)
    matcher = grammar.matcher()
    body = CALL.split("calls>\n", 1)[1]
    ids = tokenizer.encode(body)
    assert matcher.accept_tokens(tokenizer.encode("Sure")) == 0
    assert not matcher.accept_token(EOS)
    assert matcher.accept_tokens(ids) == len(ids)
    assert matcher.num_accepted == len(ids)
    matcher.rollback(3)
    assert matcher.accept_tokens(ids[-3:]) == 3
    assert matcher.accept_token(EOS) and matcher.is_terminated()
    # A second call to an unknown tool after the first is refused at the tool name.
    matcher.rollback(1 + len(tokenizer.encode("\n</｜DSML｜ calls>")))
    rest = tokenizer.encode("\n<｜DSML｜ invoke name=\"nope\">")
    assert matcher.accept_tokens(rest) < len(rest)


def test_json_schema_answer_after_reasoning(tokenizer):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    request = convert(thinking={"type": "enabled"},
                      response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": schema}})
    grammar = dr.OutputGrammar.compile(request, tokenizer, thinking_budget=64)
    matcher = grammar.matcher()
    ids = tokenizer.encode('Thinking.</think>{"n": 7}')
    assert matcher.accept_tokens(ids) == len(ids)
    assert matcher.is_accepting()
    bad = grammar.matcher()
    ids = tokenizer.encode('Thinking.</think>{"n": "7"}')
    assert bad.accept_tokens(ids) < len(ids)


def test_caller_lark_and_structural_tag(tokenizer):
    grammar = dr.OutputGrammar.compile(convert(), tokenizer, lark='start: "yes" | "no"')
    matcher = grammar.matcher()
    assert matcher.accept_tokens(tokenizer.encode("yes") + [EOS]) == 2
    tag = json.loads(dr.OutputGrammar.compile(convert(tools=TOOLS), tokenizer).structural_tag_json())
    assert tag["type"] == "structural_tag"
    text = json.dumps(tag, ensure_ascii=False)
    assert ' invoke name=\\"get_weather\\">\\n' in text
    assert '{"type": "token", "token": 128825}' in text  # the marker by ID, never as a string


def test_errors_are_value_errors(tokenizer):
    with pytest.raises(dr.GrammarError):
        dr.OutputGrammar.compile(convert(), tokenizer, lark="start: (")
    with pytest.raises(dr.GrammarError):
        dr.OutputGrammar.compile(convert(response_format={"type": "regex", "regex": "(a"}), tokenizer)
    many = {f"p{i}": {"type": "string"} for i in range(70)}
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": many}}}]
    with pytest.raises(dr.UnsupportedSchemaError, match="at most 64"):
        dr.OutputGrammar.compile(convert(tools=tools), tokenizer)
    assert issubclass(dr.UnsupportedSchemaError, dr.GrammarError) and issubclass(dr.GrammarError, ValueError)
    matcher = dr.OutputGrammar.compile(convert(tools=TOOLS), tokenizer).matcher()
    with pytest.raises(dr.GrammarError):
        matcher.rollback(1)
    with pytest.raises(dr.GrammarError):
        matcher.accept_token(10**9)
    with pytest.raises(TypeError):
        matcher.fill_bitmask(np.zeros((1, 4041), dtype=np.float32))
    with pytest.raises(ValueError):
        matcher.fill_bitmask(np.zeros((1, 4041), dtype=np.int32), 1)
    readonly = np.zeros((1, 4041), dtype=np.int32)
    readonly.flags.writeable = False
    with pytest.raises(ValueError):
        matcher.fill_bitmask(readonly)


# -- parallel_tool_calls, from each API --------------------------------------------------------------------
PARALLEL_OFF = {
    "chat": (dr.ChatCompletionRequest, lambda off: {
        "messages": [{"role": "user", "content": "weather?"}], "thinking": {"type": "disabled"}, "tools": TOOLS}
        | ({} if off is None else {"parallel_tool_calls": not off})),
    "responses": (dr.ResponsesRequest, lambda off: {
        "input": "weather?",
        "tools": [{"type": "function", "name": "get_weather", "parameters": TOOLS[0]["function"]["parameters"]}]}
        | ({} if off is None else {"parallel_tool_calls": not off})),
    "messages": (dr.MessagesRequest, lambda off: {
        "max_tokens": 100, "messages": [{"role": "user", "content": "weather?"}], "thinking": {"type": "disabled"},
        "tools": [{"name": "get_weather", "input_schema": TOOLS[0]["function"]["parameters"]}],
        "tool_choice": {"type": "auto"} | ({} if off is None else {"disable_parallel_tool_use": off})}),
}
ONE_CALL = CALL.split("\n</｜DSML｜ calls>")[0]
SECOND_CALL = ONE_CALL.split("calls>", 1)[1]  # "\n<｜DSML｜ invoke …>…</｜DSML｜ invoke>"


NO_THINKING = dr.ConversionOptions().with_default_thinking_mode(False)


def convert_api(api: str, off: bool | None):
    cls, body = PARALLEL_OFF[api]
    return cls({"model": "DeepSeek-V4.1-Flash"} | body(off)).convert(NO_THINKING)


@pytest.mark.parametrize("api", sorted(PARALLEL_OFF))
def test_parallel_tool_calls_off_allows_one_call_in_every_api(api, tokenizer, sys_tokenizer):
    """Chat ``parallel_tool_calls: false``, Responses ``parallel_tool_calls: false`` and Messages
    ``tool_choice.disable_parallel_tool_use: true`` all reach the grammar: one call, then the block closes. Not
    saying, or saying the opposite, allows two. The prompt is the same in every case (only the constraint
    reads the field, as the official package, which drops it, renders the prompt)."""
    enc = dr.DeepseekV41Encoding().with_tokenizer(sys_tokenizer)
    prompts = set()
    for off in (None, False, True):
        cr = convert_api(api, off)
        prompts.add(tuple(enc.encode(cr.conversation)))
        matcher = dr.OutputGrammar.compile(cr, tokenizer).matcher()
        first = tokenizer.encode("Sure." + ONE_CALL)
        assert matcher.accept_tokens(first) == len(first)
        second = tokenizer.encode(SECOND_CALL)
        taken = matcher.accept_tokens(second)
        assert (taken < len(second)) == bool(off), (api, off)
        if not off:
            close = tokenizer.encode("\n</｜DSML｜ calls>")
            assert matcher.accept_tokens(close) == len(close) and matcher.accept_token(EOS)
    assert len(prompts) == 1


def test_parallel_tool_calls_field_types_follow_the_official_package():
    """The official package types Chat ``parallel_tool_calls`` and Messages ``disable_parallel_tool_use`` as
    booleans (anything else is a 400-class error) and ignores Responses ``parallel_tool_calls`` whatever its
    type: so do we (a non-boolean there leaves calls parallel)."""
    for api, patch in (("chat", {"parallel_tool_calls": "no"}),
                       ("messages", {"tool_choice": {"type": "auto", "disable_parallel_tool_use": "yes"}})):
        cls, body = PARALLEL_OFF[api]
        with pytest.raises(ValueError):
            cls({"model": "DeepSeek-V4.1-Flash"} | body(None) | patch).convert(NO_THINKING)
    cls, body = PARALLEL_OFF["responses"]
    cr = cls({"model": "DeepSeek-V4.1-Flash"} | body(None) | {"parallel_tool_calls": "no"}).convert(NO_THINKING)
    assert cr is not None

