"""Protocol-level calls wired through a stand-in codec (``fake_codec``) and the toy model."""

from __future__ import annotations

import json

import pytest

import fake_codec
from deepseek_engine import SamplingParams
from deepseek_engine.protocol_api import ProtocolEngine, ProtocolError, find_tokenizer_json
from serving_toy import ToyCausalLM, toy_llm

MODEL = ToyCausalLM(seed=0)
TOK = fake_codec.Tokenizer()


@pytest.fixture
def tokenizer_json(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text("{}")
    return path


def engine(tokenizer_json, **kw) -> ProtocolEngine:
    return ProtocolEngine(toy_llm(MODEL, **kw), tokenizer_json, codec=fake_codec)


def chat(text: str, **kw) -> dict:
    return {"model": "DeepSeek-V4.1-Flash", "messages": [{"role": "user", "content": text}], **kw}


def test_chat_response_holds_the_decoded_generation(tokenizer_json):
    eng = engine(tokenizer_json)
    resp = eng.chat_completions(chat("Hello there", max_tokens=9, temperature=0))
    prompt = [0, 3] + TOK.encode("Hello there")
    ref = MODEL.reference_greedy(prompt, 9)
    assert resp["object"] == "ChatCompletionResponse" and resp["id"].startswith("chatcmpl-")
    assert resp["model"] == "DeepSeek-V4.1-Flash"
    assert resp["content"] == TOK.decode(ref)
    assert resp["finish_reason"] == "length"
    assert resp["ready"]["prompt_tokens"] == resp["prompt_tokens"] == len(prompt)
    assert resp["ready"]["api"] == "ChatCompletionRequest"
    assert resp["completion_tokens"] == 9


def test_encoding_follows_the_model_version(tokenizer_json):
    eng = engine(tokenizer_json)
    v4 = eng.prepare("chat.completions", {**chat("ab"), "model": "DeepSeek-V4-Pro"})
    v41 = eng.prepare("chat.completions", chat("ab"))
    assert v4.prompt_ids == [0, 2] + TOK.encode("ab")
    assert v41.prompt_ids == [0, 3] + TOK.encode("ab")


def test_sampling_parameters_come_from_the_request(tokenizer_json):
    eng = engine(tokenizer_json, max_model_len=64)
    prep = eng.prepare("chat.completions", chat("xy", temperature=0.7, top_p=0.8, seed=5, logprobs=True,
                                                top_logprobs=3))
    p = prep.params
    assert (p.temperature, p.top_p, p.seed, p.logprobs) == (0.7, 0.8, 5, 3)
    # No max_tokens in the request: the codec resolves it against the engine's context length.
    assert p.max_tokens == 8
    assert eng.prepare("chat.completions", chat("xy", max_tokens=3)).params.logprobs is None


def test_eos_ends_the_answer_and_is_not_text(tokenizer_json):
    prompt_text = "Stop here"
    ref = MODEL.reference_greedy([0, 3] + TOK.encode(prompt_text), 20)
    eos = ref[4]
    eng = engine(tokenizer_json, eos_token_id=eos)
    resp = eng.chat_completions(chat(prompt_text, max_tokens=20, temperature=0))
    cut = ref.index(eos)
    assert resp["content"] == TOK.decode(ref[:cut])
    assert resp["finish_reason"] == "stop"
    assert resp["completion_tokens"] == cut


def test_stop_sequence_ends_generation_early(tokenizer_json):
    ref = MODEL.reference_greedy([0, 3] + TOK.encode("abc"), 30)
    text = TOK.decode(ref)
    stop = text[5:7]
    eng = engine(tokenizer_json)
    steps = []
    step = eng.llm.step
    eng.llm.step = lambda: steps.append(1) or step()
    resp = eng.chat_completions(chat("abc", max_tokens=30, temperature=0, stop=[stop]))
    assert resp["finish_reason"] == "stop_sequence"
    assert resp["content"] == text[: text.index(stop)]
    # Generation stopped at the token completing the stop sequence, not at max_tokens.
    assert len(steps) == text.index(stop) + len(stop)
    assert resp["completion_tokens"] == len(steps)
    # The offline path (generate everything, then parse) gives the same answer.
    prep = eng.prepare("chat.completions", chat("abc", max_tokens=30, temperature=0, stop=[stop]))
    offline = eng.finish(prep, eng.llm.generate([prep.prompt_ids], prep.params)[0])
    assert {k: v for k, v in offline.items() if k not in ("id", "created", "ready")} == \
        {k: v for k, v in resp.items() if k not in ("id", "created", "ready")}


def test_parser_failure_is_a_per_request_error(tokenizer_json):
    eng = engine(tokenizer_json)
    results = eng.run([("chat.completions", chat("boom", max_tokens=20, temperature=0, explode=3)),
                       ("chat.completions", chat("fine", max_tokens=5, temperature=0))])
    assert isinstance(results[0], ProtocolError)
    assert results[0].status_code == 500 and results[0].code == "parsing_error"
    assert "failed to decode" in results[0].message
    assert results[1]["completion_tokens"] == 5
    assert not eng.llm.has_unfinished_requests()


def test_logprobs_reach_the_stream_processor(tokenizer_json):
    eng = engine(tokenizer_json)
    resp = eng.chat_completions(chat("log", max_tokens=4, temperature=0, logprobs=True, top_logprobs=2))
    out = eng.llm.generate([[0, 3] + TOK.encode("log")], SamplingParams(temperature=0, max_tokens=4, logprobs=2))[0]
    assert len(resp["logprobs"]) == 4
    for (lp, top), ref in zip(resp["logprobs"], out.logprobs):
        assert lp == pytest.approx(ref.logprob, abs=1e-5)
        assert [t for t, _ in top] == [t for t, _ in ref.top]


def test_responses_and_messages_use_their_own_classes(tokenizer_json):
    eng = engine(tokenizer_json)
    r = eng.responses({"model": "DeepSeek-V4.1-Flash", "input": "hi", "max_output_tokens": 3, "temperature": 0})
    assert r["object"] == "ResponsesResponse" and r["id"].startswith("resp_")
    assert r["ready"]["api"] == "ResponsesRequest"
    assert r["ready"]["extras"] == {"ns": {"ns::f": ["ns", "f"]}, "echo": {"max_output_tokens": 3}}
    m = eng.messages(chat("hi", max_tokens=3, temperature=0))
    assert m["object"] == "MessagesResponse" and m["id"].startswith("msg_")
    assert m["ready"]["api"] == "MessagesRequest"
    assert r["content"] == m["content"] == TOK.decode(MODEL.reference_greedy([0, 3] + TOK.encode("hi"), 3))


def test_repeated_prompt_reports_cached_tokens(tokenizer_json):
    eng = engine(tokenizer_json, block_size=4)
    body = chat("a fairly long shared prompt", max_tokens=2, temperature=0)
    first, second = eng.chat_completions(body), eng.chat_completions(body)
    assert first["cached"] == 0
    assert second["cached"] == (first["prompt_tokens"] - 1) // 4 * 4 > 0


def test_bad_items_get_errors_and_the_rest_is_served(tokenizer_json):
    eng = engine(tokenizer_json, max_model_len=40)
    items = [
        ("chat.completions", chat("good one", max_tokens=3, temperature=0)),
        ("chat.completions", "{not json"),
        ("chat.completions", {"model": "DeepSeek-V4.1-Flash"}),
        ("chat.completions", {**chat("x"), "model": "gpt-4"}),
        ("chat.completions", chat("picture", image=True)),
        ("chat.completions", chat("snow \N{SNOWMAN}")),
        ("chat.completions", chat("y" * 30, max_tokens=20)),
        ("completions", chat("x")),
        ("messages", chat("good two", max_tokens=3, temperature=0)),
    ]
    seen = []
    results = eng.run(items, on_result=lambda i, r: seen.append(i))
    assert sorted(seen) == list(range(len(items)))
    ok = [i for i, r in enumerate(results) if not isinstance(r, ProtocolError)]
    assert ok == [0, 8]
    errs = {i: r for i, r in enumerate(results) if isinstance(r, ProtocolError)}
    assert "invalid JSON" in errs[1].message and errs[1].status_code == 400
    assert "missing field `messages`" in errs[2].message
    assert errs[3].message == "unsupported model gpt-4" and errs[3].code == "invalid_request_error"
    assert "image" in errs[4].message
    assert errs[5].status_code == 500 and errs[5].code == "encoding_error"
    assert "maximum context length" in errs[6].message
    assert errs[7].code == "unsupported_api"
    assert json.dumps(errs[6].to_dict())
    with pytest.raises(ProtocolError, match="unsupported model"):
        eng.chat_completions({**chat("x"), "model": "gpt-4"})


def test_llm_protocol_methods_find_the_codec_and_tokenizer(tokenizer_json, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "deepseek_recipe", fake_codec)
    monkeypatch.setenv("DEEPSEEK_TOKENIZER_JSON", str(tokenizer_json))
    llm = toy_llm(MODEL)
    resp = llm.chat_completions(chat("via llm", max_tokens=2, temperature=0))
    assert resp["content"] == TOK.decode(MODEL.reference_greedy([0, 3] + TOK.encode("via llm"), 2))
    assert fake_codec.Tokenizer.loaded_from[-1] == str(tokenizer_json)
    assert llm.protocol() is llm.protocol()


def test_missing_tokenizer_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPSEEK_TOKENIZER_JSON", str(tmp_path / "nope.json"))
    with pytest.raises(FileNotFoundError, match="tokenizer.json not found at"):
        find_tokenizer_json(tmp_path / "missing.json")
    (tmp_path / "tokenizer.json").write_text("{}")
    # A checkpoint's own tokenizer.json wins over the environment.
    assert find_tokenizer_json(model_dir=tmp_path) == tmp_path / "tokenizer.json"
