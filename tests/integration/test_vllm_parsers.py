"""Our vLLM reasoning + tool parser driven the way vLLM drives them, without a server.

vLLM composes the two parsers into one `Parser` per response (`ParserManager.get_parser`) and
calls `parse_delta` with each delta's text and token IDs, then `parse` for complete outputs; its
own tool-parser tests feed token deltas the same way. Every case is checked against the codec's
own parse of the same IDs. Runs only where vLLM 0.33 is importable (`tests/integration/
vllm_render.sh` sets such a venv up); the normal suite has no vLLM and skips this module.
"""

from __future__ import annotations

import json

import pytest

vllm = pytest.importorskip("vllm", reason="vLLM is not installed (see tests/integration/vllm_render.sh)")

import deepseek_recipe as dr  # noqa: E402
from deepseek_recipe.integrations.vllm import register  # noqa: E402
from make_model_dir import main as make_model_dir  # noqa: E402
from vllm_render_check import CALL, our_parse, output_ids  # noqa: E402

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from transformers import TokenizersBackend
    from vllm.parser import ParserManager
    from vllm.tokenizers.hf import get_cached_tokenizer

    register()
    model_dir = tmp_path_factory.mktemp("model")
    make_model_dir(str(model_dir))
    hf = get_cached_tokenizer(TokenizersBackend.from_pretrained(str(model_dir)))
    parser_cls = ParserManager.get_parser(tool_parser_name="deepseek_recipe",
                                          reasoning_parser_name="deepseek_recipe",
                                          enable_auto_tools=True, tokenizer=hf)
    tok = dr.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    return hf, parser_cls, tok


def _request(body):
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    return ChatCompletionRequest(**{"model": "m", **body})


def _codec_parse(tok, body, ids):
    converted = dr.ChatCompletionRequest({"model": "DeepSeek-V4.1-Flash", **body}).convert(dr.ConversionOptions())
    prompt = list(dr.DeepseekV41Encoding().with_tokenizer(tok).encode(converted.conversation))
    return prompt, our_parse(tok, converted, ids, "m")


CASES = [
    ("reasoning_answer", {"messages": [{"role": "user", "content": "2+2?"}]},
     [("full", "Add.</think>It is 4.")]),
    ("typed_think_end", {"messages": [{"role": "user", "content": "hi"}]},
     [("full", "I write "), ("plain", "</think>"), ("full", " here.</think>Done "), ("plain", "</think>")]),
    ("tool_call_after_reasoning", {"messages": [{"role": "user", "content": "Weather?"}], "tools": [WEATHER]},
     [("full", "Need it.</think>Checking." + CALL)]),
    ("tool_call_no_thinking", {"messages": [{"role": "user", "content": "Weather?"}], "tools": [WEATHER],
                               "thinking": {"type": "disabled"}}, [("full", "Checking." + CALL)]),
    ("answer_no_thinking", {"messages": [{"role": "user", "content": "hi"}], "thinking": {"type": "disabled"}},
     [("full", "Hello 🚀 "), ("plain", "<｜User｜>")]),
]


def _vllm_body(body):
    out = {k: v for k, v in body.items() if k != "thinking"}
    if body.get("thinking") == {"type": "disabled"}:
        out["chat_template_kwargs"] = {"thinking": False}
    return out


@pytest.mark.parametrize("name,body,segments", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("step", [1, 2, 5])
def test_streamed_token_deltas_match_the_codec(env, name, body, segments, step):
    hf, parser_cls, tok = env
    ids = output_ids(tok, dr.DeepseekV4Encoding().with_tokenizer(tok), segments)
    prompt, want = _codec_parse(tok, body, ids)
    request = _request(_vllm_body(body))
    parser = parser_cls(hf, request.tools, chat_template_kwargs=_vllm_body(body).get("chat_template_kwargs", {}))
    reasoning, content, calls = "", "", {}
    for start in range(0, len(ids), step):
        delta_ids = ids[start:start + step]
        finished = start + step >= len(ids)
        delta = parser.parse_delta(hf.decode(delta_ids), delta_ids, request, prompt, finished=finished)
        if delta is None:
            continue
        reasoning += delta.reasoning or ""
        content += delta.content or ""
        for call in delta.tool_calls:
            entry = calls.setdefault(call.index, ["", ""])
            entry[0] += call.function.name or ""
            entry[1] += call.function.arguments or ""
    got = (reasoning or None, content or None,
           [(n, json.loads(a)) for _, (n, a) in sorted(calls.items())])
    assert got == want


@pytest.mark.parametrize("name,body,segments", CASES, ids=[c[0] for c in CASES])
def test_complete_output_matches_the_codec(env, name, body, segments):
    hf, parser_cls, tok = env
    ids = output_ids(tok, dr.DeepseekV4Encoding().with_tokenizer(tok), segments)
    prompt, want = _codec_parse(tok, body, ids)
    request = _request(_vllm_body(body))
    parser = parser_cls(hf, request.tools, chat_template_kwargs=_vllm_body(body).get("chat_template_kwargs", {}))
    parser.set_prompt_token_ids(prompt)
    reasoning, content, calls = parser.parse(hf.decode(ids), request, enable_auto_tools=True,
                                             model_output_token_ids=ids)
    got = (reasoning or None, content or None, [(c.name, json.loads(c.arguments)) for c in calls or []])
    assert got == want


def test_parser_flags(env):
    from vllm.tool_parsers import ToolParserManager

    tool_parser = ToolParserManager.get_tool_parser("deepseek_recipe")
    assert tool_parser.supports_required_and_named is False
    assert tool_parser.structural_tag_model == "deepseek_v4_1"


def test_both_parsers_share_one_stream_session(env):
    hf, parser_cls, _ = env
    request = _request({"messages": [{"role": "user", "content": "x"}], "tools": [WEATHER]})
    parser = parser_cls(hf, request.tools, chat_template_kwargs={})
    assert parser.reasoning_parser._session is parser.tool_parser._session
