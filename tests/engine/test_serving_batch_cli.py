"""Batch CLI: JSONL in, one response or error per line out, resumable."""

from __future__ import annotations

import json

import deepseek_recipe as dr
import pytest
from deepseek_engine.entrypoints.batch_cli import main, run_batch
from deepseek_engine.entrypoints.protocol_api import ProtocolEngine, find_tokenizer_json
from serving_toy import text_model, toy_llm

MODEL = text_model()


def line(custom_id, url="/v1/chat/completions", body=None, **extra) -> str:
    body = body if body is not None else {"model": "DeepSeek-V4.1-Flash", "max_tokens": 3, "temperature": 0,
                                          "thinking": {"type": "disabled"},
                                          "messages": [{"role": "user", "content": f"hello {custom_id}"}]}
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body, **extra})


@pytest.fixture
def protocol():
    return ProtocolEngine(toy_llm(MODEL))


def read(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_every_line_gets_a_response_or_an_error(protocol, tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_bytes("\n".join([
        line("chat"),
        line("resp", "/v1/responses", {"model": "DeepSeek-V4-Pro", "input": "hi", "max_output_tokens": 2}),
        line("msg", "/v1/messages"),
        "{not json",
        json.dumps({"method": "POST", "url": "/v1/chat/completions", "body": {}}),
        line("bad-url", "/v1/completions"),
        line("bad-method", method="GET"),
        line("bad-body", body=[1, 2]),
        line("chat"),  # duplicate id
        line("unknown-model", body={"model": "gpt-x", "messages": [{"role": "user", "content": "x"}]}),
        "",
        line("last"),
    ]).encode() + b"\n" + b'{"custom_id": "\xff\xfe"}\n')
    counts = run_batch(protocol, src, dst, progress=True)
    assert counts == {"ok": 4, "errors": 8, "skipped": 0}
    recs = read(dst)
    assert len(recs) == 12
    by_id = {r["custom_id"]: r for r in recs if r["custom_id"] and "line" not in r}
    for cid, kind in [("chat", "chat.completion"), ("resp", "response"),
                      ("msg", "message"), ("last", "chat.completion")]:
        r = by_id[cid]
        assert r["error"] is None and r["response"]["status_code"] == 200
        got = r["response"]["body"]
        assert got.get("object", got.get("type")) == kind
        assert r["response"]["request_id"] == r["response"]["body"]["id"]
        assert r["id"].startswith("batch_req_")
    errors = {r.get("line", r["custom_id"]): r["error"] for r in recs if r["error"]}
    assert all(r["response"] is None for r in recs if r["error"])
    assert errors[4]["code"] == "invalid_json"
    assert "custom_id" in errors[5]["message"]
    assert errors[6]["code"] == "invalid_url"
    assert "POST" in errors[7]["message"]
    assert "body" in errors[8]["message"]
    assert errors[9]["code"] == "duplicate_custom_id"
    assert errors[13]["code"] == "invalid_json"  # not UTF-8
    assert "you passed gpt-x" in errors["unknown-model"]["message"]
    # The content of a good line is the decoded greedy continuation of its prompt.
    body = json.loads(line("chat"))["body"]
    tokenizer = dr.Tokenizer.from_file(str(find_tokenizer_json()))
    conv = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())
    prompt = list(dr.DeepseekV41Encoding().with_tokenizer(tokenizer).encode(conv.conversation))
    content = by_id["chat"]["response"]["body"]["choices"][0]["message"]["content"]
    assert content == tokenizer.decode(MODEL.reference_greedy(prompt, 3))


def test_rerun_skips_what_is_already_written(protocol, tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join([line("a"), line("b"), "garbage", line("c"), line("a")]) + "\n")
    # A previous run answered "a" and the garbage line, then died while writing "b".
    dst.write_text(
        json.dumps({"id": "batch_req_0", "custom_id": "a", "response": {"status_code": 200}, "error": None}) + "\n"
        + json.dumps({"id": "batch_req_1", "custom_id": None, "response": None, "line": 3,
                      "error": {"status_code": 400, "code": "invalid_json", "message": "x"}}) + "\n"
        + '{"custom_id": "b", "resp'
    )
    again = run_batch(protocol, src, dst, progress=False)
    assert again == {"ok": 2, "errors": 1, "skipped": 2}
    recs = [json.loads(x) for x in dst.read_text().splitlines() if x.strip().endswith("}")]
    assert sorted(r["custom_id"] for r in recs if r["error"] is None) == ["a", "b", "c"]
    assert [r["line"] for r in recs if r["error"] and r["error"]["code"] == "duplicate_custom_id"] == [5]
    # Nothing is left to do on another run.
    assert run_batch(protocol, src, dst, progress=False) == {"ok": 0, "errors": 0, "skipped": 5}


def test_missing_input_file_is_a_usage_error(tmp_path, capsys):
    assert main([str(tmp_path), str(tmp_path / "nope.jsonl"), str(tmp_path / "out.jsonl")]) == 2
    assert "not found" in capsys.readouterr().err
