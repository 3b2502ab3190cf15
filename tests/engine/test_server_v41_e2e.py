"""The HTTP server over a DeepSeek V4.1 checkpoint, end to end through all three APIs with the official SDKs.

uvicorn on 127.0.0.1 (a random port) serves a tiny seeded V4.1 checkpoint (``write_tiny_v41``) through
``EngineBackend`` with the V4.1 prompt encoding and output parser (``ServerConfig(model_version="v41")``). The
checkpoint's word-level tokenizer carries the released control tokens plus V4.1's ``<｜System｜>``
(``write_tiny_v41(special_tokens=True)``), so the codec encodes and parses real V4.1 prompts with it. Chat Completions and Responses go through ``openai``, Messages and ``count_tokens``
through ``anthropic`` (both validating every response strictly), streaming and not, thinking on and off, and
each answer equals the same request run offline (``ProtocolEngine.prepare`` -> ``LLM.generate`` ->
``ProtocolEngine.finish``) on a second engine over the same checkpoint.
"""

from __future__ import annotations

import anthropic
import deepseek_recipe as dr
import openai
import pytest
import torch
from deepseek_engine import LLM
from deepseek_engine.entrypoints.protocol_api import ProtocolEngine
from deepseek_engine.entrypoints.serve import detect_model_version
from deepseek_engine.entrypoints.server_backend import EngineBackend
from deepseek_engine.testing.tiny_checkpoint_v41 import write_tiny_v41
from deepseek_recipe.server.app import create_app
from deepseek_recipe.server.config import ServerConfig
from server_support import LiveServer

torch.set_num_threads(1)

MODEL = "DeepSeek-V4.1-Flash"
MAX_TOKENS = 3


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_tiny_v41(tmp_path_factory.mktemp("v41_server") / "ckpt", special_tokens=True, seed=3)


@pytest.fixture(scope="module")
def offline(checkpoint):
    return ProtocolEngine(LLM(str(checkpoint), max_model_len=512), checkpoint / "tokenizer.json")


@pytest.fixture(scope="module")
def server(checkpoint):
    assert detect_model_version(checkpoint) == "v41"
    backend = EngineBackend(LLM(str(checkpoint), max_model_len=512), "tiny-v41")
    tokenizer = dr.Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    with LiveServer(create_app(backend, ServerConfig(model_version="v41"), tokenizer=tokenizer)) as live:
        yield live


def expected(offline: ProtocolEngine, api: str, body: dict) -> dict:
    prep = offline.prepare(api, body)
    out = offline.llm.generate([prep.prompt_ids], prep.params)[0]
    return offline.finish(prep, out)


def chat_body(**extra) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": "Name a prime number."}],
            "max_tokens": MAX_TOKENS, "seed": 7, "temperature": 1.0, **extra}


def test_chat_completions_v41(server, offline):
    oai = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, _strict_response_validation=True)
    for thinking in ("enabled", "disabled"):
        body = chat_body(thinking={"type": thinking})
        want = expected(offline, "chat.completions", body)["choices"][0]
        r = oai.chat.completions.create(**{k: v for k, v in body.items() if k != "thinking"},
                                        extra_body={"thinking": body["thinking"]})
        got = r.choices[0]
        assert got.message.content == want["message"].get("content"), thinking
        assert getattr(got.message, "reasoning_content", None) == want["message"].get("reasoning_content")
        assert got.finish_reason == want["finish_reason"] and r.usage.completion_tokens > 0
        text, reasoning, usage = "", "", None
        stream = oai.chat.completions.create(**{k: v for k, v in body.items() if k != "thinking"}, stream=True,
                                             stream_options={"include_usage": True},
                                             extra_body={"thinking": body["thinking"]})
        for chunk in stream:
            usage = chunk.usage or usage
            for c in chunk.choices:
                text += c.delta.content or ""
                reasoning += getattr(c.delta, "reasoning_content", None) or ""
        assert (text, reasoning) == (want["message"].get("content") or "",
                                     want["message"].get("reasoning_content") or "")
        assert usage.prompt_tokens == r.usage.prompt_tokens and usage.completion_tokens == r.usage.completion_tokens


def test_responses_v41(server, offline):
    oai = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, _strict_response_validation=True)
    # Greedy, so the server and the offline engine must agree token for token: a reasoning effort turns thinking
    # on, and thinking samples at temperature 1 whatever the request says, and Responses has no seed (the two
    # sides then drew different samples: one completed, the other stopped at max_output_tokens).
    body = {"model": MODEL, "input": "Say something short.", "max_output_tokens": 16, "temperature": 0,
            "reasoning": {"effort": "none"}}
    want = expected(offline, "responses", body)
    r = oai.responses.create(**body)
    assert r.status == want["status"] and r.usage.output_tokens == want["usage"]["output_tokens"]
    assert [item.type for item in r.output] == [item["type"] for item in want["output"]]
    assert r.output_text == "".join(c.get("text", "") for item in want["output"] if item["type"] == "message"
                                    for c in item["content"])
    events = list(oai.responses.create(**body, stream=True))
    final = events[-1].response  # response.completed, or response.incomplete at max_output_tokens
    assert events[-1].type == f"response.{r.status}" and final.status == r.status
    assert final.output_text == r.output_text and final.usage.output_tokens == r.usage.output_tokens


def blocks(content) -> list[tuple[str, str | None]]:
    return [(b["type"], b.get("text") or b.get("thinking")) if isinstance(b, dict) else
            (b.type, getattr(b, "text", None) or getattr(b, "thinking", None)) for b in content]


@pytest.mark.parametrize("thinking", [{"type": "disabled"}, {"type": "enabled", "budget_tokens": 1024}])
def test_messages_and_count_tokens_v41(server, offline, thinking):
    """With thinking on the codec samples Messages at temperature 1 whatever the request says, and Messages
    has no seed: then only the shape and the usage are checked."""
    claude = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0, _strict_response_validation=True)
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "temperature": 0, "thinking": thinking,
            "messages": [{"role": "user", "content": "What is two plus two?"}]}
    want = expected(offline, "messages", body)
    extra = {"temperature": body["temperature"]}  # (this SDK's create() and stream() no longer take it)
    sdk_args = {k: v for k, v in body.items() if k != "temperature"}
    r = claude.messages.create(**sdk_args, extra_body=extra)
    with claude.messages.stream(**sdk_args, extra_body=extra) as stream:
        final = stream.get_final_message()
    # (Anthropic's input_tokens leave out what was read from the prefix cache)
    prompt = want["usage"]["input_tokens"] + (want["usage"].get("cache_read_input_tokens") or 0)
    assert [u.input_tokens + (u.cache_read_input_tokens or 0) for u in (r.usage, final.usage)] == [prompt, prompt]
    if thinking["type"] == "disabled":
        assert blocks(r.content) == blocks(final.content) == blocks(want["content"])
        assert r.stop_reason == final.stop_reason == want["stop_reason"]
    else:  # unseeded sampling: a thinking block first (the prompt opens the thinking), whatever comes after
        for message in (r, final):
            kinds = [t for t, _ in blocks(message.content)]
            assert kinds[:1] == ["thinking"] and set(kinds) <= {"thinking", "text"}, kinds
            assert 0 < message.usage.output_tokens <= MAX_TOKENS
    counted = claude.messages.count_tokens(**{k: v for k, v in body.items() if k not in ("max_tokens", "temperature")})
    assert counted.input_tokens == prompt
