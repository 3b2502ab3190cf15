"""Behaviour of the conversation classes and encodings beyond the fixtures (observed on the
official 0.2.0 wheel): validation errors, reprs, structural token encoding, failure modes."""

from __future__ import annotations

import deepseek_recipe as dr
import pytest
from deepseek_recipe import (
    AssistantMessage,
    Conversation,
    DeepseekV4Encoding,
    DeepseekV41Encoding,
    LatestReminderMessage,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)

USER_ID = 128803


@pytest.mark.parametrize("kwargs, message", [
    (dict(response_format="json_schema"), 'invalid response_format "json_schema"; expected "text" or "json_object"'),
    (dict(response_format="json_object", response_schema={}), 'response_format "json_object" cannot be combined with response_schema or response_regex'),
    (dict(response_format="json_object", response_regex="a"), 'response_format "json_object" cannot be combined with response_schema or response_regex'),
    (dict(response_schema={}, response_regex="a"), "response_schema and response_regex cannot be combined"),
    (dict(tool_choice="any"), 'invalid tool_choice "any"; expected "auto", "none", or "required"'),
    (dict(reasoning_effort="none"), 'invalid reasoning_effort "none"; expected "low", "high", "xhigh", or "max"'),
    (dict(reasoning_effort="bogus", tool_choice="bogus"), 'invalid reasoning_effort "bogus"; expected "low", "high", "xhigh", or "max"'),
    (dict(tool_choice="bogus", response_format="bogus"), 'invalid tool_choice "bogus"; expected "auto", "none", or "required"'),
])
def test_conversation_validation(kwargs, message):
    with pytest.raises(ValueError) as e:
        Conversation([UserMessage("q")], **kwargs)
    assert str(e.value) == message


@pytest.mark.parametrize("value, exc, message", [
    ({1}, TypeError, "set is not a JSON value"),
    (float("nan"), ValueError, "NaN is not a finite JSON number"),
    (float("-inf"), ValueError, "-inf is not a finite JSON number"),
    ({1: 2}, TypeError, "JSON object keys must be str"),
    (2**64, OverflowError, "integer is outside the JSON number range"),
    (b"x", TypeError, "bytes is not a JSON value"),
])
def test_json_values(value, exc, message):
    with pytest.raises(exc) as e:
        ToolDefinition("f", parameters=value)
    assert str(e.value) == message


def test_json_roundtrip():
    params = {"b": [1, 2.5, None, True, "é"], "a": {"x": -2**63, "y": 2**64 - 1}, "t": (1, 2)}
    assert ToolDefinition("f", parameters=params).parameters == {**params, "t": [1, 2]}
    assert list(ToolDefinition("f", parameters=params).parameters) == ["b", "a", "t"]


def test_image_token_must_not_be_empty():
    for make in (lambda: UserMessage("a", image_token=""), lambda: SystemMessage("a", image_token=""),
                 lambda: ToolMessage("a", image_token="")):
        with pytest.raises(ValueError, match="^image_token must not be empty$"):
            make()


def test_reprs_and_properties():
    c = Conversation([SystemMessage("s", [dr.UrlImageSource("http://x")], [ToolDefinition("f")]), UserMessage("u"),
                      AssistantMessage("a", "r", [ToolCall("1", "f", "{}")], prefix=True), ToolMessage("t", "1"),
                      LatestReminderMessage("l")],
                     tools=[ToolDefinition("g", "d", {"a": 1}, True, True)], tool_choice="required",
                     reasoning_effort="max", response_schema={"x": 1})
    assert repr(c) == ('Conversation(messages=5, thinking_mode=True, tools=1, tool_choice="required", '
                       'reasoning_effort=Some("max"), response_format="json_schema")')
    assert [repr(m) for m in c.messages] == [
        'SystemMessage("s")', 'UserMessage("u", image_sources=0)',
        'AssistantMessage("a", reasoning_content=True, tool_calls=1, prefix=True)',
        'ToolMessage("t", tool_call_id=Some("1"), image_sources=0)', 'LatestReminderMessage("l")']
    assert [m.role for m in c.messages] == ["system", "user", "assistant", "tool", "latest_reminder"]
    assert all(isinstance(m, dr.Message) for m in c.messages)
    assert type(c.messages[0]) is SystemMessage and c.messages[0].tools[0].name == "f"
    assert repr(c.messages[0].image_sources[0]) == 'UrlImageSource("http://x", detail="high", path="")'
    assert c.messages[1].reasoning_content is None and c.messages[1].prefix is False
    assert repr(c.tools[0]) == 'ToolDefinition(name="g", description=Some("d"), strict=Some(true))'
    assert (c.response_format, c.response_schema, c.response_regex) == ("json_schema", {"x": 1}, None)
    assert repr(dr.BytesImageSource(b"ab", "auto")) == 'BytesImageSource(<2 bytes>, detail="auto", path="")'
    assert repr(AssistantMessage('a\n"é\x01')) == 'AssistantMessage("a\\n\\"é\\u{1}", reasoning_content=False, tool_calls=0, prefix=False)'
    rp = DeepseekV41Encoding().render_conversation(Conversation())
    assert repr(rp) == "RenderedPrompt(prompt=<41 characters>, image_sources=0)"
    with pytest.raises(TypeError, match="cannot create 'deepseek_recipe._native.Message' instances"):
        dr.Message()
    with pytest.raises(AttributeError):
        UserMessage("a").content = "b"
    assert dr.IMAGE_SPECIAL_TOKEN_ID == 129264


def test_control_token_in_user_text_is_plain(tokenizer):
    conv = Conversation([UserMessage("a<｜User｜>")], thinking_mode=False)
    for enc in (DeepseekV4Encoding(), DeepseekV41Encoding()):
        ids = enc.with_tokenizer(tokenizer).encode(conv)
        assert ids.count(USER_ID) == 1
        prompt = enc.render_conversation(conv).prompt
        assert tokenizer.encode(prompt).count(USER_ID) == 2
        assert tokenizer.decode(ids) == prompt


def test_encode_errors(tokenizer, sys_tokenizer):
    conv = Conversation([UserMessage("q")])
    with pytest.raises(RuntimeError) as e:
        DeepseekV41Encoding().encode(conv)
    assert str(e.value) == "no tokenizer is attached to the encoding"
    with pytest.raises(RuntimeError) as e:
        DeepseekV41Encoding().with_tokenizer(tokenizer).encode(conv)
    assert str(e.value) == 'failed to encode conversation: special token "<｜System｜>" is not in the added vocabulary'
    ids = DeepseekV41Encoding().with_tokenizer(sys_tokenizer).encode(conv)
    assert ids[:2] == [0, 129280] and ids.count(129280) == 1
    with pytest.raises(RuntimeError, match='special token "zz" is not in the added vocabulary'):
        DeepseekV4Encoding().with_special_tokens(dr.SpecialTokens(user="zz")).with_tokenizer(tokenizer).encode(conv)


@pytest.mark.parametrize("spelling", ["ref", "ref_end", "box", "point_end", "polygon"])
def test_empty_grounding_spelling_does_not_panic(tokenizer, spelling):
    """The official renderer panics here (empty spelling + non-ASCII assistant text); ours treats an
    empty grounding spelling as absent and renders the text as plain text."""
    conv = Conversation([UserMessage("q"), AssistantMessage("é 世界 <｜ref｜>", "ü")], thinking_mode=False, tools=[ToolDefinition("f")])
    for enc in (DeepseekV4Encoding(), DeepseekV41Encoding()):
        enc = enc.with_special_tokens(dr.SpecialTokens(**{spelling: ""}))
        rp = enc.render_conversation(conv)
        assert "é 世界" in rp.prompt
        ids = enc.with_tokenizer(tokenizer).encode(Conversation([UserMessage("q"), AssistantMessage("é")], thinking_mode=False))
        assert tokenizer.decode(ids).endswith("é<｜end▁of▁sentence｜><｜Assistant｜></think>")


@pytest.mark.parametrize("empty", ["box", "ref_end", "polygon_end", "point"])
def test_an_empty_grounding_spelling_turns_grounding_off(empty):
    """Observed on the official package: once any grounding token is spelled empty, no grounding
    spelling in assistant text is a control token, not even the ones with a spelling."""
    special = {"ref": "<r>", "ref_end": "</r>", empty: ""} if empty not in ("ref_end",) else {"ref": "<r>", "ref_end": ""}
    conv = Conversation([UserMessage("q"), AssistantMessage("a<r>x</r>b</think>", None)], thinking_mode=False)
    for enc in (DeepseekV4Encoding(), DeepseekV41Encoding()):
        rp = enc.with_special_tokens(dr.SpecialTokens(**special)).render_conversation(conv)
        marked = [rp.prompt[s:e] for s, e in rp.special_ranges]
        assert "<r>" not in marked and "</r>" not in marked
        assert marked.count("</think>") == 2  # the template's two, none from the text
    # With every spelling set, the spelled ones are control tokens again.
    rp = DeepseekV4Encoding().with_special_tokens(dr.SpecialTokens(ref="<r>", ref_end="</r>")).render_conversation(conv)
    assert [rp.prompt[s:e] for s, e in rp.special_ranges].count("<r>") == 1


def test_with_methods_return_new_objects(tokenizer):
    enc = DeepseekV41Encoding()
    assert enc.with_tokenizer(tokenizer) is not enc
    assert enc.with_special_tokens(dr.SpecialTokens()) is not enc
    with pytest.raises(RuntimeError):
        enc.encode(Conversation())


def test_tokenizer_load_errors_match_official(tmp_path):
    with pytest.raises(RuntimeError) as e:
        dr.Tokenizer.from_file(str(tmp_path / "missing.json"))
    assert str(e.value) == "No such file or directory (os error 2)"
    with pytest.raises(RuntimeError) as e:
        dr.Tokenizer.from_str("{")
    assert str(e.value) == "EOF while parsing an object at line 1 column 1"
    with pytest.raises(RuntimeError, match="not in the local Hugging Face cache"):
        dr.Tokenizer.from_pretrained("nonexistent/model")


def test_enum_hashability_matches_official():
    # The official package lets ModelVersion key a dict (gateways map versions to encodings);
    # its other enums are unhashable.
    encodings = {dr.ModelVersion.DeepseekV4Pro: "v4", dr.ModelVersion.DeepseekV41Flash: "v41"}
    assert encodings[dr.ModelVersion.DeepseekV41Flash] == "v41"
    with pytest.raises(TypeError):
        hash(dr.SpecialToken.User)


def test_tokenizer_and_token_argument_errors_match_official(tokenizer):
    # Observed on the official 0.2.0 wheel: wrong argument types name the Python type.
    cases = [
        (lambda: dr.Tokenizer.from_str(1), "argument 'text': 'int' object cannot be cast as 'str'"),
        (lambda: dr.Tokenizer.from_file(None), "argument 'path': 'NoneType' object cannot be cast as 'str'"),
        (lambda: tokenizer.encode(b"x"), "argument 'text': 'bytes' object cannot be cast as 'str'"),
        (lambda: dr.SpecialTokens().token("bos"), "argument 'token': 'str' object cannot be cast as 'SpecialToken'"),
        (lambda: DeepseekV4Encoding().with_special_tokens(None),
         "argument 'special_tokens': 'NoneType' object cannot be cast as 'SpecialTokens'"),
        (lambda: DeepseekV41Encoding().encode(1), "argument 'conversation': 'int' object cannot be cast as 'Conversation'"),
    ]
    for make, message in cases:
        with pytest.raises(TypeError) as e:
            make()
        assert str(e.value) == message
