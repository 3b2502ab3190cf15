"""No text a client sends can add a control token: for every token of the real tokenizer's added
vocabulary (read from tokenizer.json), typed into any text field of any request format, with or
without images next to it, each added-vocabulary ID appears exactly as often as in the same
request with that text replaced by a plain word (which is what the template itself inserts)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import deepseek_recipe as dr
from encoding_spec import tokenizer_path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ADDED = json.loads(Path(tokenizer_path()).read_text(encoding="utf-8"))["added_tokens"]
SPELLINGS = [t["content"] for t in ADDED]
ADDED_IDS = {t["id"] for t in ADDED} | {129280}  # plus <｜System｜> of the test tokenizer
IMAGE = "https://example.com/a.png"

texts = st.lists(st.one_of(st.sampled_from(SPELLINGS), st.sampled_from(["a", " ", "\n", "é", "{"])),
                 min_size=1, max_size=4).map("".join)


def _chat(t, images, model):
    def content(x):
        return [{"type": "text", "text": x}] + ([{"type": "image_url", "image_url": {"url": IMAGE}}] if images else [])
    return dr.ChatCompletionRequest({
        "model": model,
        "messages": [
            {"role": "system", "content": content(t[0])},
            {"role": "user", "content": content(t[1])},
            {"role": "assistant", "content": t[2], "reasoning_content": t[3], "tool_calls": [
                {"id": t[4], "type": "function", "function": {"name": "f", "arguments": json.dumps({t[5]: t[6]})}}]},
            {"role": "tool", "tool_call_id": t[4], "content": content(t[7])},
            {"role": "user", "content": t[8]},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "description": t[9],
                                                     "parameters": {"type": "object", "properties": {t[10]: {"type": "string", "description": t[11]}}}}}],
    })


def _responses(t, images, model):
    def content(x):
        return [{"type": "input_text", "text": x}] + ([{"type": "input_image", "image_url": IMAGE}] if images else [])
    return dr.ResponsesRequest({
        "model": model,
        "instructions": t[0],
        "input": [
            {"role": "developer", "content": content(t[1])},
            {"role": "user", "content": content(t[2])},
            {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": t[3]}]},
            {"type": "function_call", "call_id": t[4], "name": "f", "arguments": json.dumps({t[5]: t[6]})},
            {"type": "function_call_output", "call_id": t[4], "output": content(t[7])},
            {"role": "assistant", "content": [{"type": "output_text", "text": t[8]}]},
            {"role": "user", "content": t[9]},
        ],
        "tools": [{"type": "function", "name": "f", "description": t[10], "parameters": {"type": "object", "properties": {t[11]: {"type": "string"}}}}],
    })


def _messages(t, images, model):
    def content(x):
        return [{"type": "text", "text": x}] + ([{"type": "image", "source": {"type": "url", "url": IMAGE}}] if images else [])
    return dr.MessagesRequest({
        "model": model, "max_tokens": 100, "system": t[0],
        "messages": [
            {"role": "user", "content": content(t[1])},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": t[2], "signature": "s"}, {"type": "text", "text": t[3]},
                                              {"type": "tool_use", "id": t[4], "name": "f", "input": {t[5]: t[6]}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": t[4], "content": content(t[7])}]},
            {"role": "assistant", "content": t[8]},
            {"role": "system", "content": content(t[9])},
            {"role": "user", "content": t[10]},
        ],
        "tools": [{"name": "f", "description": t[11], "input_schema": {"type": "object"}}],
    })


BUILD = {"chat": _chat, "responses": _responses, "messages": _messages}
# Fields that land in assistant content or reasoning, where the template (as the official one)
# turns the grounding spellings into control tokens; they get the other spellings only, and
# `test_grounding_spellings_in_assistant_text` covers the grounding ones.
ASSISTANT_FIELDS = {"chat": (2, 3), "responses": (3, 8), "messages": (2, 3, 8)}
_T = dr.SpecialToken
GROUNDING = [dr.SpecialTokens().token(t) for t in (_T.Ref, _T.RefEnd, _T.Box, _T.BoxEnd, _T.Point,
                                                    _T.PointEnd, _T.Polygon, _T.PolygonEnd)]


def _without_grounding(text):
    for g in GROUNDING:
        text = text.replace(g, "g")
    return text


def _control_counts(fmt, fields, images, model, tok):
    cr = BUILD[fmt](fields, images, model).convert(dr.ConversionOptions())
    enc = dr.DeepseekV41Encoding() if "V41" in str(cr.model_version) else dr.DeepseekV4Encoding()
    ids = enc.with_tokenizer(tok).encode(cr.conversation)
    return Counter(i for i in ids if i in ADDED_IDS)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(sorted(BUILD)), model=st.sampled_from(["DeepSeek-V4-Pro", "DeepSeek-V4.1-Flash"]),
       images=st.booleans(), fields=st.lists(texts, min_size=12, max_size=12))
def test_typed_spellings_never_add_control_tokens(sys_tokenizer, fmt, model, images, fields):
    # Call IDs and JSON keys must stay distinct and non-empty; plain words keep the structure.
    fields[4] = fields[4] + "#id"
    for k in ASSISTANT_FIELDS[fmt]:
        fields[k] = _without_grounding(fields[k])
    plain = ["w"] * 12
    plain[4] = "w#id"
    assert _control_counts(fmt, fields, images, model, sys_tokenizer) == \
        _control_counts(fmt, plain, images, model, sys_tokenizer)


def test_every_added_token_is_text_in_a_user_message(sys_tokenizer):
    enc = dr.DeepseekV41Encoding().with_tokenizer(sys_tokenizer)
    base = Counter(i for i in enc.encode(dr.Conversation([dr.UserMessage("w")])) if i in ADDED_IDS)
    joined = "".join(SPELLINGS)
    ids = enc.encode(dr.Conversation([dr.UserMessage(joined)]))
    assert Counter(i for i in ids if i in ADDED_IDS) == base


def test_grounding_spellings_in_assistant_text(sys_tokenizer):
    enc = dr.DeepseekV41Encoding().with_tokenizer(sys_tokenizer)
    ids = enc.encode(dr.Conversation([dr.UserMessage("q"), dr.AssistantMessage("".join(GROUNDING)), dr.UserMessage("q")]))
    for g in GROUNDING:
        assert ids.count(_id(g)) == 1


def _id(spelling):
    return next(t["id"] for t in ADDED if t["content"] == spelling)
