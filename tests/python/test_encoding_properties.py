"""Property tests: whatever text goes into any field, control tokens come out only where the
template put them, and decoding the token IDs gives back the rendered prompt."""

from __future__ import annotations

import deepseek_recipe as dr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CTRL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<think>", "</think>", "<｜System｜>", "<｜User｜>",
        "<｜Assistant｜>", "<｜latest_reminder｜>", "｜DSML｜", "<｜image｜>", "<｜ref｜>", "<｜/box｜>", "<｜image2｜>"]

texts = st.lists(st.one_of(st.text(max_size=12), st.sampled_from(CTRL)), max_size=5).map("".join)


@st.composite
def conversations(draw):
    calls = [dr.ToolCall(draw(texts), draw(texts), draw(st.one_of(texts, st.dictionaries(texts, texts, max_size=3).map(
        lambda d: __import__("json").dumps(d, ensure_ascii=False))))) for _ in range(draw(st.integers(0, 2)))]
    tools = [dr.ToolDefinition(draw(texts), draw(st.none() | texts), {"p": draw(texts)}) for _ in range(draw(st.integers(0, 2)))]
    msgs = [dr.SystemMessage(draw(texts)), dr.UserMessage(draw(texts)),
            dr.AssistantMessage(draw(texts), draw(st.none() | texts), calls or None),
            *[dr.ToolMessage(draw(texts), c.id) for c in calls], dr.LatestReminderMessage(draw(texts)),
            dr.UserMessage(draw(texts)), dr.AssistantMessage(draw(texts), draw(texts), prefix=draw(st.booleans()))]
    return dr.Conversation(msgs, thinking_mode=draw(st.booleans()), tools=tools,
                           tool_choice=draw(st.sampled_from(["auto", "none", "required"])),
                           response_schema=draw(st.none() | st.dictionaries(texts, texts, max_size=2)))


def check(enc, tok, conv):
    rp = enc.render_conversation(conv)
    ids = enc.with_tokenizer(tok).encode(conv)
    assert tok.decode(ids) == rp.prompt
    # Every added-vocabulary ID in the output is exactly one template-inserted token, in order.
    special_ids = [tok.encode(rp.prompt[s:e]) for s, e in rp.special_ranges]
    assert all(len(x) == 1 for x in special_ids)
    added = {i for x in special_ids for i in x} | set(range(0, 2)) | set(range(128000, 130000))
    in_output = [i for i in ids if i in added and tok.decode([i]) in CTRL + [rp.prompt[s:e] for s, e in rp.special_ranges]]
    assert in_output == [x[0] for x in special_ids]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(conv=conversations())
def test_v4_control_tokens_only_at_template_positions(tokenizer, conv):
    check(dr.DeepseekV4Encoding(), tokenizer, conv)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(conv=conversations())
def test_v41_control_tokens_only_at_template_positions(sys_tokenizer, conv):
    check(dr.DeepseekV41Encoding(), sys_tokenizer, conv)
