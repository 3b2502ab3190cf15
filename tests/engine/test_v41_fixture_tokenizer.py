"""The tiny V4.1 checkpoint with the released control tokens (``write_tiny_v41(..., special_tokens=True)``): the
codec encodes V4.1 prompts with its tokenizer (``<｜System｜>`` header, turns, thinking), every ID fits the tiny
model, and a chat request runs end to end through the protocol engine and the served V4.1 model."""

from __future__ import annotations

import json

import deepseek_recipe as dr
import pytest
from deepseek_engine import LLM, SamplingParams
from deepseek_engine.entrypoints.protocol_api import ProtocolEngine
from deepseek_engine.testing.tiny_checkpoint_v41 import real_control_tokens, write_tiny_v41

MODEL = "DeepSeek-V4.1-Flash"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_tiny_v41(tmp_path_factory.mktemp("v41_specials") / "ckpt", vocab_size=1024, special_tokens=True)


def test_the_tokenizer_holds_the_released_control_tokens(checkpoint):
    released = real_control_tokens()
    specials = [t["content"] for t in released]
    data = json.loads((checkpoint / "tokenizer.json").read_text(encoding="utf-8"))
    ids = {t["content"]: t["id"] for t in data["added_tokens"]}
    assert sorted(ids) == sorted(specials)
    flags = {t["content"]: t["special"] for t in data["added_tokens"]}
    assert all(flags[t["content"]] == t["special"] for t in released)  # the released flags
    # BOS / EOS / pad where the released file and the config have them; the rest at the top, in released order.
    assert [ids[t] for t in specials[:3]] == [0, 1, 2]
    assert [ids[t] for t in specials[3:]] == list(range(1024 - len(specials) + 3, 1024))
    for kind in (dr.SpecialToken.Bos, dr.SpecialToken.Eos, dr.SpecialToken.System, dr.SpecialToken.User,
                 dr.SpecialToken.Assistant, dr.SpecialToken.ThinkingStart, dr.SpecialToken.ThinkingEnd,
                 dr.SpecialToken.Dsml, dr.SpecialToken.LatestReminder):
        assert kind.default_str() in ids, kind


def test_a_v41_prompt_encodes_with_it(checkpoint):
    tok = dr.Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    body = {"model": MODEL, "reasoning_effort": "high",
            "messages": [{"role": "system", "content": "mat"}, {"role": "user", "content": "cat"}]}
    conv = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())
    ids = list(dr.DeepseekV41Encoding().with_tokenizer(tok).encode(conv.conversation))
    assert ids[0] == 0 and max(ids) < 1024
    text = tok.decode(ids)
    for spelling in ("<｜System｜>", "<｜User｜>", "<｜Assistant｜>", "<think>"):
        assert spelling in text
    order = [text.index(t) for t in ("<｜System｜>", "<｜User｜>", "<｜Assistant｜>", "<think>")]
    assert order == sorted(order)  # header, user turn, assistant turn opening its thinking


def test_a_v41_chat_request_runs_end_to_end(checkpoint):
    llm = LLM(checkpoint, dtype="float32", max_model_len=256, max_num_seqs=2)
    engine = ProtocolEngine(llm)
    body = {"model": MODEL, "max_tokens": 4, "temperature": 0,
            "messages": [{"role": "user", "content": "the cat sat"}]}
    prep = engine.prepare("chat.completions", body)
    greedy = llm.generate([prep.prompt_ids], SamplingParams(temperature=0, max_tokens=4))[0]
    resp = engine.chat_completions(body)
    assert resp["object"] == "chat.completion" and resp["model"] == MODEL
    assert resp["usage"]["prompt_tokens"] == len(prep.prompt_ids)
    assert resp["usage"]["completion_tokens"] == len(greedy.token_ids)
    assert resp["choices"][0]["finish_reason"] in ("length", "stop")
