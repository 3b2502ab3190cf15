"""Protocol-level calls through the real codec (``deepseek_recipe``, real tokenizer) and a toy model.

The toy model has the real vocabulary size and only ever prefers ordinary text tokens (its head is zero
outside IDs 1000-1999), so greedy answers are plain text the codec parses into ``content``; its
cache-free ``reference_greedy`` says which tokens the engine must have generated.
"""

from __future__ import annotations

import json

import deepseek_recipe as dr
import pytest
from deepseek_engine import SamplingParams
from deepseek_engine.entrypoints.protocol_api import (
    ProtocolEngine,
    ProtocolError,
    find_tokenizer_json,
)
from serving_toy import TEXT_IDS, text_model, toy_llm

MODEL = text_model()
TOKENIZER = dr.Tokenizer.from_file(str(find_tokenizer_json()))


def engine(**kw) -> ProtocolEngine:
    return ProtocolEngine(toy_llm(MODEL, **kw))


def chat(text: str, model: str = "DeepSeek-V4.1-Flash", **kw) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": text}], "thinking": {"type": "disabled"}, **kw}


def prompt_ids(body: dict) -> list[int]:
    conv = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())
    enc = dr.DeepseekV4Encoding() if conv.model_version == dr.ModelVersion.DeepseekV4Pro else dr.DeepseekV41Encoding()
    return list(enc.with_tokenizer(TOKENIZER).encode(conv.conversation))


def answer(resp: dict) -> str:
    return resp["choices"][0]["message"]["content"]


def test_chat_response_holds_the_decoded_generation():
    eng = engine()
    body = chat("Hello there", max_tokens=9, temperature=0)
    resp = eng.chat_completions(body)
    prompt = prompt_ids(body)
    ref = MODEL.reference_greedy(prompt, 9)
    assert all(TEXT_IDS[0] <= t < TEXT_IDS[1] for t in ref)
    assert resp["object"] == "chat.completion" and resp["id"].startswith("chatcmpl-")
    assert resp["model"] == "DeepSeek-V4.1-Flash"
    assert answer(resp) == TOKENIZER.decode(ref)
    assert resp["choices"][0]["finish_reason"] == "length"
    assert resp["usage"]["prompt_tokens"] == len(prompt)
    assert resp["usage"]["completion_tokens"] == 9


def test_encoding_follows_the_model_version():
    eng = engine()
    for model in ("DeepSeek-V4-Pro", "DeepSeek-V4.1-Flash"):
        body = chat("ab", model=model)
        assert eng.prepare("chat.completions", body).prompt_ids == prompt_ids(body)
    versions = {m: eng.prepare("chat.completions", chat("ab", model=m)).request.model_version
                for m in ("DeepSeek-V4-Pro", "DeepSeek-V4.1-Flash")}
    assert versions["DeepSeek-V4-Pro"] == dr.ModelVersion.DeepseekV4Pro != versions["DeepSeek-V4.1-Flash"]


def test_sampling_parameters_come_from_the_request():
    eng = engine(max_model_len=256)
    prep = eng.prepare("chat.completions", chat("xy", temperature=0.7, top_p=0.8, seed=5, logprobs=True,
                                                top_logprobs=3))
    p, opts = prep.params, prep.request.inference_options
    assert (p.temperature, p.top_p, p.seed, p.logprobs) == (opts.temperature, opts.top_p, 5, 3)
    assert p.temperature == pytest.approx(0.7)
    # No max_tokens in the request: the codec resolves it against the engine's context length.
    assert p.max_tokens == 256 - len(prep.prompt_ids)
    assert eng.prepare("chat.completions", chat("xy", max_tokens=3)).params.logprobs is None


def test_eos_ends_the_answer_and_is_not_text():
    body = chat("Stop here", max_tokens=20, temperature=0)
    ref = MODEL.reference_greedy(prompt_ids(body), 20)
    eos = ref[4]
    resp = ProtocolEngine(toy_llm(MODEL, eos_token_id=eos)).chat_completions(body)
    cut = ref.index(eos)
    assert answer(resp) == TOKENIZER.decode(ref[:cut])
    assert resp["choices"][0]["finish_reason"] == "stop"
    assert resp["usage"]["completion_tokens"] == cut  # the end token ends the answer and is not counted


def test_stop_sequence_ends_generation_early():
    eng = engine()
    base = chat("abc", max_tokens=30, temperature=0)
    text = TOKENIZER.decode(MODEL.reference_greedy(prompt_ids(base), 30))
    stop = text[len(text) // 2: len(text) // 2 + 3]
    steps = []
    step = eng.llm.step
    eng.llm.step = lambda: steps.append(1) or step()
    body = {**base, "stop": [stop]}
    resp = eng.chat_completions(body)
    assert answer(resp) == text[: text.index(stop)]
    assert resp["choices"][0]["finish_reason"] == "stop"
    assert len(steps) < 30  # generation stopped at the token completing the stop sequence
    # The offline path (generate everything, then parse) gives the same answer.
    prep = eng.prepare("chat.completions", body)
    offline = eng.finish(prep, eng.llm.generate([prep.prompt_ids], prep.params)[0])
    assert offline["choices"] == resp["choices"]


def test_logprobs_reach_the_stream_processor():
    eng = engine()
    body = chat("log", max_tokens=4, temperature=0, logprobs=True, top_logprobs=2)
    resp = eng.chat_completions(body)
    out = eng.llm.generate([prompt_ids(body)], SamplingParams(temperature=0, max_tokens=4, logprobs=2))[0]
    content = resp["choices"][0]["logprobs"]["content"]
    assert len(content) == 4
    for item, ref in zip(content, out.logprobs):
        assert item["logprob"] == pytest.approx(ref.logprob, abs=1e-5)
        assert len(item["top_logprobs"]) == 2


def test_responses_and_messages_use_their_own_shapes():
    eng = engine()
    # Reasoning effort "none" (thinking off) for both APIs: in thinking mode the codec samples at temperature 1
    # whatever the request says, and an unseeded sample may end on EOS before three tokens.
    r = eng.responses({"model": "DeepSeek-V4-Pro", "input": "hi", "max_output_tokens": 3, "temperature": 0,
                       "reasoning": {"effort": "none"}})
    assert r["object"] == "response" and r["id"].startswith("resp_")
    assert r["usage"]["output_tokens"] == 3
    m = eng.messages({"model": "DeepSeek-V4-Pro", "max_tokens": 3, "temperature": 0,
                      "thinking": {"type": "disabled"}, "messages": [{"role": "user", "content": "hi"}]})
    assert m["type"] == "message" and m["id"].startswith("msg_")
    assert m["usage"]["output_tokens"] == 3


def test_repeated_prompt_reports_cached_tokens():
    eng = engine(block_size=4)
    body = chat("a fairly long shared prompt", max_tokens=2, temperature=0)
    first, second = eng.chat_completions(body), eng.chat_completions(body)
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == (first["usage"]["prompt_tokens"] - 1) // 4 * 4


def test_bad_items_get_errors_and_the_rest_is_served():
    eng = engine(max_model_len=64)
    image = {"model": "DeepSeek-V4.1-Flash", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]}
    items = [
        ("chat.completions", chat("good one", max_tokens=3, temperature=0)),
        ("chat.completions", "{not json"),
        ("chat.completions", {"model": "DeepSeek-V4.1-Flash"}),
        ("chat.completions", {**chat("x"), "model": "gpt-4"}),
        ("chat.completions", image),
        ("chat.completions", chat("y " * 80, max_tokens=20)),
        ("completions", chat("x")),
        ("chat.completions", chat("good two", max_tokens=3, temperature=0)),
    ]
    seen = []
    results = eng.run(items, on_result=lambda i, r: seen.append(i))
    assert sorted(seen) == list(range(len(items)))
    errs = {i: r for i, r in enumerate(results) if isinstance(r, ProtocolError)}
    assert sorted(set(range(len(items))) - set(errs)) == [0, 7]
    assert all(e.status_code == 400 for e in errs.values())
    assert errs[6].code == "unsupported_api"
    assert "image" in errs[4].message or errs[4].status_code == 400
    assert json.dumps(errs[5].to_dict())
    with pytest.raises(ProtocolError) as err:
        eng.chat_completions({**chat("x"), "model": "gpt-4"})
    assert err.value.status_code == 400


def test_missing_tokenizer_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPSEEK_TOKENIZER_JSON", str(tmp_path / "nope.json"))
    with pytest.raises(FileNotFoundError, match="tokenizer.json not found at"):
        find_tokenizer_json(tmp_path / "missing.json")
    (tmp_path / "tokenizer.json").write_text("{}")
    # A checkpoint's own tokenizer.json wins over the environment.
    assert find_tokenizer_json(model_dir=tmp_path) == tmp_path / "tokenizer.json"
