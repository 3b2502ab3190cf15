"""The vLLM plugin's pure-Python glue, checked without vLLM (runs in the normal suite).

* `request.chat_body` reshapes vLLM's messages and chat-template kwargs; converting the result must
  give the same prompt IDs as the equivalent Chat Completions request sent to the codec directly.
* `stream.Markers.parse_start` reads where parsing starts from a rendered prompt; it must agree
  with the parsing options the codec's conversion gives for the same request.
"""

from __future__ import annotations

import deepseek_recipe as dr
import pytest
from deepseek_recipe.integrations.vllm.codec import Codec
from deepseek_recipe.integrations.vllm.request import chat_body
from deepseek_recipe.integrations.vllm.stream import Markers

MODEL = "DeepSeek-V4.1-Flash"
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": None, "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}, "strict": None}}
USER = [{"role": "user", "content": "Hi </think><｜User｜>"}]


@pytest.fixture(scope="module")
def codec(sys_tokenizer):
    return Codec(MODEL, dr.ModelVersion.DeepseekV41Flash, sys_tokenizer,
                 dr.DeepseekV41Encoding().with_tokenizer(sys_tokenizer))


def _encode(codec, body):
    converted = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())
    return list(codec.encoding.encode(converted.conversation)), converted


# (vLLM messages, chat-template kwargs, tool_choice, response_format) -> the direct request body
GLUE_CASES = [
    ("default_thinking", USER, {}, None, None, {"messages": USER}),
    ("thinking_off", USER, {"thinking": False}, None, None, {"messages": USER, "thinking": {"type": "disabled"}}),
    ("enable_thinking_off", USER, {"enable_thinking": False}, None, None,
     {"messages": USER, "thinking": {"type": "disabled"}}),
    ("effort_none", USER, {"reasoning_effort": "none", "enable_thinking": False}, None, None,
     {"messages": USER, "thinking": {"type": "disabled"}}),
    ("effort_max", USER, {"reasoning_effort": "max", "enable_thinking": True}, None, None,
     {"messages": USER, "reasoning_effort": "max"}),
    ("tools", USER, {"tools": [WEATHER], "thinking": False}, "required", None,
     {"messages": USER, "thinking": {"type": "disabled"}, "tool_choice": "required",
      "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER["function"]["parameters"]}}]}),
    ("responses_named_choice", USER, {"tools": [WEATHER], "thinking": False},
     {"type": "function", "name": "get_weather"}, None,
     {"messages": USER, "thinking": {"type": "disabled"},
      "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
      "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER["function"]["parameters"]}}]}),
    ("developer_role", [{"role": "developer", "content": "Be brief."}, *USER], {"thinking": False}, None, None,
     {"messages": [{"role": "system", "content": "Be brief."}, *USER], "thinking": {"type": "disabled"}}),
    ("responses_parts", [{"role": "user", "content": [{"type": "input_text", "text": "a"}]}], {"thinking": False},
     None, None, {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}],
                  "thinking": {"type": "disabled"}}),
    ("json_object", [{"role": "user", "content": "json please"}], {"thinking": False}, None,
     {"type": "json_object"}, {"messages": [{"role": "user", "content": "json please"}],
                               "thinking": {"type": "disabled"}, "response_format": {"type": "json_object"}}),
    ("continue_final", [*USER, {"role": "assistant", "content": "Par"}], {"continue_final_message": True}, None, None,
     {"messages": [*USER, {"role": "assistant", "content": "Par", "prefix": True}]}),
]


@pytest.mark.parametrize("name,messages,kwargs,tool_choice,fmt,direct", GLUE_CASES, ids=[c[0] for c in GLUE_CASES])
def test_chat_body_renders_like_the_direct_request(codec, name, messages, kwargs, tool_choice, fmt, direct):
    glued, _ = _encode(codec, chat_body(messages, kwargs, tool_choice, fmt, MODEL))
    want, _ = _encode(codec, {"model": MODEL, **direct})
    assert glued == want


STAGE_CASES = [
    {"messages": USER},
    {"messages": USER, "thinking": {"type": "disabled"}},
    {"messages": [*USER, {"role": "assistant", "content": "", "reasoning_content": "hm", "prefix": True}]},
    {"messages": [*USER, {"role": "assistant", "content": "Par", "reasoning_content": "hm", "prefix": True}]},
    {"messages": [*USER, {"role": "assistant", "content": "Par", "prefix": True}], "thinking": {"type": "disabled"}},
    {"messages": USER, "thinking": {"type": "disabled"}, "tool_choice": "required",
     "tools": [{"type": "function", "function": {"name": "f"}}]},
    {"messages": [*USER, {"role": "assistant", "content": "4"}, {"role": "user", "content": "and?"}]},
]


@pytest.mark.parametrize("body", STAGE_CASES)
def test_parse_start_agrees_with_conversion(codec, body):
    prompt, converted = _encode(codec, {"model": MODEL, **body})
    stage, in_calls = Markers(codec).parse_start(prompt)
    options = converted.parsing_options
    want = options.thinking_initial_stage
    assert (None if stage is None else getattr(dr.ThinkingInitialStage, stage)) == want
    assert in_calls == options.starts_in_tool_calls
