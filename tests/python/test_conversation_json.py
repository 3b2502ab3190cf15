"""`Conversation.to_json` / `Conversation.from_json`: the canonical conversation JSON round-trips
(random conversations, and every conversation the conversion fixtures produce), and invalid
input raises `ValueError`."""

from __future__ import annotations

import json
from pathlib import Path

import deepseek_recipe as dr
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

CASES = Path(__file__).resolve().parents[1] / "conformance" / "conversion" / "cases.json"

TEXT = st.text(alphabet="ab <>｜/é\n", max_size=8) | st.just("<｜image｜>") | st.just("[i]")
DETAIL = st.sampled_from(["low", "high", "original", "auto"])
IMAGE = st.one_of(
    st.builds(dr.DataUrlImageSource, TEXT, DETAIL, path=TEXT),
    st.builds(dr.UrlImageSource, TEXT, DETAIL, path=TEXT),
    st.builds(dr.BytesImageSource, st.binary(max_size=6), DETAIL, path=TEXT),
)
IMAGES = st.none() | st.lists(IMAGE, max_size=2)
JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | TEXT,
                    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(TEXT, inner, max_size=2),
                    max_leaves=4)
TOOL = st.builds(dr.ToolDefinition, TEXT, st.none() | TEXT, JSON, st.none() | st.booleans(), st.booleans())
TOKEN = st.sampled_from(["<｜image｜>", "[i]"])
MESSAGE = st.one_of(
    st.builds(dr.SystemMessage, TEXT, IMAGES, st.none() | st.lists(TOOL, max_size=2), image_token=TOKEN),
    st.builds(dr.UserMessage, TEXT, IMAGES, image_token=TOKEN),
    st.builds(dr.AssistantMessage, TEXT, st.none() | TEXT,
              st.none() | st.lists(st.builds(dr.ToolCall, TEXT, TEXT, TEXT), max_size=2), st.booleans()),
    st.builds(dr.ToolMessage, TEXT, st.none() | TEXT, IMAGES, image_token=TOKEN),
    st.builds(dr.LatestReminderMessage, TEXT),
)
FORMAT = st.sampled_from([{}, {"response_format": "json_object"}, {"response_schema": {"type": "object"}},
                          {"response_regex": "a+"}])


@st.composite
def conversations(draw):
    return dr.Conversation(
        draw(st.lists(MESSAGE, max_size=4)),
        thinking_mode=draw(st.booleans()),
        tools=draw(st.lists(TOOL, max_size=2)),
        tool_choice=draw(st.sampled_from(["auto", "none", "required"])),
        reasoning_effort=draw(st.sampled_from([None, "low", "high", "xhigh", "max"])),
        **draw(FORMAT),
    )


def _view(c):
    """Everything the Python API shows of a conversation."""
    def image(s):
        return (s.kind, s.detail, s.data_url, s.url, s.data, s.path)

    def tool(t):
        return (t.name, t.description, json.dumps(t.parameters), t.strict, t.defer_loading)

    def message(m):
        calls = None if m.tool_calls is None else [(t.id, t.name, t.arguments) for t in m.tool_calls]
        tools = getattr(m, "tools", None)
        return (type(m).__name__, m.role, m.content, m.reasoning_content, calls, m.tool_call_id,
                [image(s) for s in m.image_sources], m.prefix, None if tools is None else [tool(t) for t in tools])

    return ([message(m) for m in c.messages], c.thinking_mode, [tool(t) for t in c.tools], c.tool_choice,
            c.reasoning_effort, c.response_format, json.dumps(c.response_schema), c.response_regex)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(conversations())
def test_round_trip(conv):
    text = conv.to_json()
    back = dr.Conversation.from_json(text)
    assert back.to_json() == text
    assert _view(back) == _view(conv)


def test_converted_conversations_round_trip_and_encode_alike():
    """Every conversation the conversion fixtures produce, image placeholders placed by the
    request structure included, reads back with the same prompt and token IDs."""
    checked = 0
    for case in json.loads(CASES.read_text(encoding="utf-8")):
        if case["expected"].get("outcome") != "ok":
            continue
        cls = {"chat": dr.ChatCompletionRequest, "responses": dr.ResponsesRequest,
               "messages": dr.MessagesRequest}[case["format"]]
        try:
            conv = cls(case["body"]).convert(dr.ConversionOptions()).conversation
        except (dr.ConversionError, ValueError, TypeError):
            continue  # a case that needs its recorded options; covered by test_conversion.py
        back = dr.Conversation.from_json(conv.to_json())
        assert back.to_json() == conv.to_json()
        enc = dr.DeepseekV41Encoding()
        assert enc.render_conversation(back).prompt == enc.render_conversation(conv).prompt
        checked += 1
    assert checked > 300


def test_placeholders_survive_where_a_rescan_would_differ():
    # The typed spelling before the image part is text; only the structural one is a placeholder.
    body = {"model": "DeepSeek-V4.1-Flash", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "typed <｜image｜> "},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]}
    conv = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions()).conversation
    spec = json.loads(conv.to_json())
    user = spec["messages"][0]
    content, token = user["content"].encode(), "<｜image｜>".encode()  # offsets count UTF-8 bytes
    assert user["placeholders"] == [content.rindex(token)]
    assert content.index(token) < content.rindex(token)
    enc = dr.DeepseekV41Encoding()
    assert enc.render_conversation(dr.Conversation.from_json(conv.to_json())).prompt == \
        enc.render_conversation(conv).prompt


@pytest.mark.parametrize("text, message", [
    ("{", "EOF"),
    ('{"tool_choice": "sometimes"}', "sometimes"),
    ('{"messages": [{"role": "robot", "content": ""}]}', "robot"),
    ('{"messages": [{"role": "user", "content": "x", "image_token": ""}]}', "image_token must not be empty"),
    ('{"messages": [{"role": "user", "content": "ab", "image_token": "b", "placeholders": [0],'
     ' "image_sources": [{"kind": "url", "value": "u"}]}]}', "placeholder offset 0"),
    ('{"response_schema": {}, "response_regex": "a"}', "cannot be combined"),
    ('{"response_schema": ' + "[" * 10_000 + "]" * 10_000 + "}", "recursion limit"),
    # An array never stands for an object (serde would read one as the fields in order).
    ("[]", "expected a JSON object"),
    ('{"messages": [["assistant", "hi"]]}', "expected a JSON object"),
])
def test_invalid_json_raises_value_error(text, message):
    with pytest.raises(ValueError, match="invalid conversation JSON") as e:
        dr.Conversation.from_json(text)
    assert message in str(e.value)


def test_from_json_takes_only_str():
    with pytest.raises(TypeError):
        dr.Conversation.from_json(b"{}")  # type: ignore[arg-type]


def test_encoding_fixture_specs_read_as_the_constructors_build_them():
    """The encoding fixture specs are canonical conversation JSON: `from_json` builds what the
    constructor-based fixture builder (shared with the official package) builds, or both fail."""
    from encoding_spec import build_conversation

    fixtures = sorted((CASES.parents[1] / "encoding").glob("cases_*.json"))
    checked = 0
    for path in fixtures:
        for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
            if "conversation" not in case:
                continue
            spec = case["conversation"]
            try:
                want = build_conversation(dr, spec).to_json()
            except (ValueError, TypeError):
                if spec.get("response_format") == "json_schema":
                    # The one difference, for a lossless round trip: JSON names every format the
                    # constructor derives, and `json_schema` without a schema is a null schema.
                    assert dr.Conversation.from_json(json.dumps(spec)).response_format == "json_schema"
                    continue
                with pytest.raises(ValueError):
                    dr.Conversation.from_json(json.dumps(spec))
                continue
            assert dr.Conversation.from_json(json.dumps(spec)).to_json() == want, case["name"]
            checked += 1
    assert checked > 300
