"""The entry points generate under a request's output constraint by default (protocol API, batch CLI, HTTP
server with the engine backend), a body field and a flag turn it off, and a codec build without grammars
answers a constrained request with a clear 501 instead of generating unconstrained.

The codec's grammar (``OutputGrammar.compile``) is stood in for by ``ForcedText``: it records the calls and
returns a token DFA that forces one text, so each test can tell from the answer whether the constraint was
applied. (The grammar itself is tested with the codec; the soak script ``soak_grammar.py`` runs both.)
"""

from __future__ import annotations

import asyncio
import json

import deepseek_recipe as dr
import pytest
from deepseek_engine.entrypoints.protocol_api import (
    ProtocolEngine,
    ProtocolError,
    find_tokenizer_json,
)
from deepseek_engine.entrypoints.server_backend import EngineBackend
from deepseek_engine.testing.token_dfa import TokenDFA
from deepseek_recipe import _native
from deepseek_recipe.output_constraints import ENFORCE_FIELD, take_enforce_field
from deepseek_recipe.server.backend import GenerateRequest, SamplingOptions
from deepseek_recipe.server.config import ServerConfig
from deepseek_recipe.server.prepare import RequestCodec
from deepseek_recipe.server.protocols import CHAT
from serving_toy import text_model, toy_llm

MODEL = text_model()
TOKENIZER = dr.Tokenizer.from_file(str(find_tokenizer_json()))
FORCED = '{"answer": 42}'


class ForcedText:
    """Stands in for ``OutputGrammar``: ``compile`` records its arguments and returns a DFA forcing ``FORCED``
    (then the output ends: the last state is terminal)."""

    calls: list[tuple] = []

    @classmethod
    def compile(cls, request, tokenizer, *, thinking_budget=None):
        cls.calls.append((request, tokenizer, thinking_budget))
        if request.inference_options.output_constraint is None:
            return None
        ids = list(tokenizer.encode(FORCED))
        return TokenDFA.chain(MODEL.vocab_size, [{t} for t in ids])


@pytest.fixture
def grammar(monkeypatch):
    ForcedText.calls = []
    monkeypatch.setattr(_native, "OutputGrammar", ForcedText, raising=False)
    return ForcedText


def chat(**kw) -> dict:
    return {"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "Answer in json, please."}],
            "thinking": {"type": "disabled"}, "max_tokens": 12, "temperature": 0, **kw}


JSON = {"response_format": {"type": "json_object"}}


def content(resp: dict) -> str:
    return resp["choices"][0]["message"]["content"]


def test_protocol_engine_generates_under_the_grammar_by_default(grammar):
    eng = ProtocolEngine(toy_llm(MODEL))
    resp = eng.chat_completions(chat(**JSON))
    assert content(resp) == FORCED and resp["choices"][0]["finish_reason"] == "stop"
    assert len(grammar.calls) == 1 and grammar.calls[0][1] is eng.tokenizer
    free = eng.chat_completions(chat())  # no constraint: nothing compiled, the model's own text
    assert len(grammar.calls) == 1 and content(free) != FORCED
    # The request's own switch, and the engine-wide one, generate without the grammar.
    body = chat(**JSON, **{ENFORCE_FIELD: False})
    off = eng.chat_completions(body)
    assert ENFORCE_FIELD in body  # (the caller's body is left as it was)
    off_engine = ProtocolEngine(toy_llm(MODEL), enforce_output_constraints=False).chat_completions(chat(**JSON))
    assert off["choices"][0]["finish_reason"] == off_engine["choices"][0]["finish_reason"] == "length"
    assert content(off) == content(off_engine) != FORCED
    assert len(grammar.calls) == 1
    with pytest.raises(ProtocolError) as err:
        eng.chat_completions(chat(**JSON, **{ENFORCE_FIELD: "no"}))
    assert err.value.status_code == 400 and ENFORCE_FIELD in err.value.message


def test_batch_cli_applies_the_grammar_unless_no_grammar(grammar, tmp_path, monkeypatch):
    from deepseek_engine.entrypoints import batch_cli

    lines = [{"custom_id": "c", "url": "/v1/chat/completions", "body": chat(**JSON)},
             {"custom_id": "free", "url": "/v1/chat/completions", "body": chat()}]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    monkeypatch.setattr("deepseek_engine.llm.LLM", lambda *a, **k: toy_llm(MODEL))
    answers = {}
    for flag in ([], ["--no-grammar"]):
        out = tmp_path / f"out{len(flag)}.jsonl"
        assert batch_cli.main(["model-dir", str(src), str(out), "--no-progress", *flag]) == 0
        answers[bool(flag)] = {r["custom_id"]: content(r["response"]["body"])
                               for r in map(json.loads, out.read_text().splitlines())}
    assert answers[False]["c"] == FORCED != answers[True]["c"] and answers[True]["free"] == answers[False]["free"]
    assert batch_cli.build_parser().parse_args(["m", "i", "o"]).no_grammar is False


def test_server_codec_compiles_the_grammar_for_a_backend_that_enforces(grammar):
    codec = RequestCodec(ServerConfig(), "tiny", 4096, TOKENIZER, enforce_output_constraints=True)
    prep = codec.prepare(CHAT, json.dumps(chat(model="tiny", **JSON)).encode())
    assert isinstance(prep.grammar, TokenDFA) and len(grammar.calls) == 1
    off = codec.prepare(CHAT, json.dumps(chat(model="tiny", **JSON, **{ENFORCE_FIELD: False})).encode())
    assert off.grammar is None and len(grammar.calls) == 1
    plain = RequestCodec(ServerConfig(), "tiny", 4096, TOKENIZER)  # a fleet backend's front end
    assert plain.prepare(CHAT, json.dumps(chat(model="tiny", **JSON)).encode()).grammar is None


def test_server_flag_and_backend_capability_decide(grammar):
    import argparse

    from deepseek_recipe.server.app import ServerState
    from deepseek_recipe.server.config import add_server_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    assert config_from_args(parser.parse_args([])).enforce_output_constraints is True
    off = config_from_args(parser.parse_args(["--no-grammar"]))
    assert off.enforce_output_constraints is False
    backend = EngineBackend(toy_llm(MODEL), "tiny")
    assert ServerState(backend, ServerConfig(), TOKENIZER).codec.enforce_output_constraints
    assert not ServerState(backend, off, TOKENIZER).codec.enforce_output_constraints


def test_engine_backend_gives_each_choice_its_own_matcher():
    ids = list(TOKENIZER.encode(FORCED))
    dfa = TokenDFA.chain(MODEL.vocab_size, [{t} for t in ids])
    prompt = list(TOKENIZER.encode("hello there, a prompt"))

    async def main():
        backend = EngineBackend(toy_llm(MODEL), "toy")
        await backend.start()
        reqs = [GenerateRequest(f"n#{i}", prompt, SamplingOptions(max_tokens=20, temperature=1.0, seed=i), dfa)
                for i in range(3)]
        reqs.append(GenerateRequest("free", prompt, SamplingOptions(max_tokens=len(ids), temperature=0)))
        async def collect(r):
            return [c async for c in backend.generate(r)]

        outs = await asyncio.gather(*(collect(r) for r in reqs))
        await backend.aclose()
        return outs

    outs = asyncio.run(asyncio.wait_for(main(), timeout=120))
    for chunks in outs[:3]:
        assert [t for c in chunks for t in c.token_ids] == ids and chunks[-1].finish_reason == "stop"
    assert [t for c in outs[3] for t in c.token_ids] != ids


def test_take_enforce_field():
    body = {ENFORCE_FIELD: False, "model": "m"}
    assert take_enforce_field(body) is False and body == {"model": "m"}
    assert take_enforce_field({}) is True and take_enforce_field({ENFORCE_FIELD: None}) is True
    with pytest.raises(ValueError, match="must be a boolean"):
        take_enforce_field({ENFORCE_FIELD: 0})


def test_http_server_generates_under_the_grammar(grammar, monkeypatch):
    import httpx
    from deepseek_recipe.server.app import create_app
    from server_support import LiveServer

    backend = EngineBackend(toy_llm(MODEL), "tiny")
    with LiveServer(create_app(backend, ServerConfig(), tokenizer=TOKENIZER)) as live:
        def post(body: dict) -> httpx.Response:
            return httpx.post(live.url + "/v1/chat/completions", json=body, timeout=60)

        forced = post(chat(model="tiny", n=2, **JSON)).json()
        assert [c["message"]["content"] for c in forced["choices"]] == [FORCED, FORCED]
        assert len(grammar.calls) == 1  # compiled once for the request, a matcher per choice
        off = post(chat(model="tiny", **JSON, **{ENFORCE_FIELD: False})).json()
        assert off["choices"][0]["message"]["content"] != FORCED
