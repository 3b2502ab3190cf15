"""The HTTP server over the engine, end to end: uvicorn on 127.0.0.1 (a random port) serving the tiny V4
checkpoint through ``EngineBackend``, driven by the official ``openai`` and ``anthropic`` SDKs.

Each answer is compared with the same request run offline (``ProtocolEngine.prepare`` -> ``LLM.generate`` ->
``ProtocolEngine.finish``) on a second engine over the same checkpoint: same seeds, same text. Also: a client
that goes away frees the engine's slot and blocks, a full queue is a 503 / 529 with ``Retry-After``, the engine's
gauges are in ``/metrics``, the choices of ``n > 1`` share the prompt's cache blocks, and the ``deepseek-engine
serve`` command serves the checkpoint.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
import torch
from deepseek_engine import LLM
from deepseek_engine.entrypoints.cli import main
from deepseek_engine.entrypoints.protocol_api import ProtocolEngine
from deepseek_engine.entrypoints.serve import (
    build_parser,
    detect_model_version,
    engine_backend,
    server_config,
)
from deepseek_engine.entrypoints.server_backend import EngineBackend
from deepseek_recipe.server.app import create_app
from deepseek_recipe.server.config import ServerConfig
from server_support import TOK, LiveServer

torch.set_num_threads(1)

MODEL = "DeepSeek-V4-Pro"
CONTEXT = 1024
DATA = Path(__file__).resolve().parent / "data"


def wait_for(predicate, what: str, timeout: float = 60.0) -> None:
    """Wait for a condition the server reaches on its own time (a disconnect noticed, say); no timing asserted."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class RecordingBackend(EngineBackend):
    """``EngineBackend`` that keeps each request's first chunk (its ``cached_tokens``)."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.firsts: dict[str, object] = {}

    async def generate(self, request):
        first = True
        async for chunk in super().generate(request):
            if first:
                self.firsts[request.request_id] = chunk
                first = False
            yield chunk


def engine(checkpoint) -> LLM:
    return LLM(checkpoint, max_model_len=CONTEXT)


@pytest.fixture(scope="module")
def offline(tiny_v4_checkpoint):
    return ProtocolEngine(engine(tiny_v4_checkpoint))


def expected(offline: ProtocolEngine, api: str, body: dict) -> dict:
    """The response the offline engine gives ``body``: the same prompt and sampling through ``LLM.generate``."""
    prep = offline.prepare(api, body)
    out = offline.llm.generate([prep.prompt_ids], prep.params)[0]
    return offline.finish(prep, out)


@pytest.fixture(scope="module")
def server(tiny_v4_checkpoint):
    llm = engine(tiny_v4_checkpoint)
    backend = RecordingBackend(llm, "tiny")
    with LiveServer(create_app(backend, ServerConfig(), tokenizer=TOK)) as live:
        live.llm, live.backend = llm, backend
        yield live


def chat_body(i: int, **extra) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": f"Question number {i}: what is {i} + {i}?"}],
            "max_tokens": 5, "seed": 1000 + i, "temperature": 1.0, **extra}


def messages_body(i: int) -> dict:
    # (with thinking on, the codec samples Messages at temperature 1 whatever the request says)
    return {"model": MODEL, "max_tokens": 5, "temperature": 0, "thinking": {"type": "disabled"},
            "messages": [{"role": "user", "content": f"Tell me about the number {i}."}]}


def engine_is_idle(live) -> bool:
    llm = live.llm
    return not llm.has_unfinished_requests() and llm.block_manager.num_free_blocks == len(llm.block_manager.blocks)


def test_32_concurrent_streams_equal_offline_generation(server, offline):
    oai = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    claude = anthropic.AsyncAnthropic(base_url=server.url, api_key="x", max_retries=0)

    async def chat(i: int):
        text = {"content": "", "reasoning_content": ""}
        finish, usage = None, None
        stream = await oai.chat.completions.create(stream=True, stream_options={"include_usage": True},
                                                   **chat_body(i))
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                for key in text:
                    text[key] += getattr(choice.delta, key, None) or ""
                finish = choice.finish_reason or finish
        return text, finish, usage

    async def message(i: int):
        body = messages_body(i)
        extra = {"temperature": body.pop("temperature")}  # (the SDK's stream() no longer takes it)
        async with claude.messages.stream(**body, extra_body=extra) as stream:
            final = await stream.get_final_message()
        return final

    async def main():
        return await asyncio.gather(*(chat(i) for i in range(24)), *(message(i) for i in range(8)))

    results = asyncio.run(main())
    for i, (text, finish, usage) in enumerate(results[:24]):
        want = expected(offline, "chat.completions", chat_body(i))
        message_ = want["choices"][0]["message"]
        assert text == {"content": message_.get("content") or "",
                        "reasoning_content": message_.get("reasoning_content") or ""}, i
        assert finish == want["choices"][0]["finish_reason"]
        assert usage.completion_tokens == want["usage"]["completion_tokens"]
        assert usage.prompt_tokens == want["usage"]["prompt_tokens"]
    for i, final in enumerate(results[24:]):
        want = expected(offline, "messages", messages_body(i))
        got = [(b.type, getattr(b, "text", None) or getattr(b, "thinking", None)) for b in final.content]
        assert got == [(b["type"], b.get("text") or b.get("thinking")) for b in want["content"]], i
        assert final.stop_reason == want["stop_reason"]
        assert final.usage.output_tokens == want["usage"]["output_tokens"]
    assert sum(u.completion_tokens for _, _, u in results[:24]) > 24  # real streams of several tokens
    wait_for(lambda: engine_is_idle(server), "the engine to finish")


def test_a_client_that_goes_away_frees_the_engine_slot_and_blocks(server, monkeypatch):
    llm, backend = server.llm, server.backend
    aborted = backend.stats().extra["aborted_requests_total"]
    # Each step waits 10 ms, so the 900 tokens take 9 s or more: the request is still running when the client reads its
    # first line and goes away, however slowly this machine serves that line (on a loaded 2-core machine the tiny
    # model once generated all 900 tokens before the client's first read returned).
    step = llm.step

    def slow_step():
        time.sleep(0.01)
        return step()

    monkeypatch.setattr(llm, "step", slow_step)
    body = chat_body(7, max_tokens=900, stream=True)
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, headers={"X-Request-Id": "gone-1"},
                      timeout=60) as r:
        assert r.status_code == 200  # sent once the first token is there: the request is running
        next(r.iter_lines())
        assert llm.has_unfinished_requests()
    wait_for(lambda: engine_is_idle(server), "the engine to free the request")
    wait_for(lambda: backend.stats().extra["aborted_requests_total"] == aborted + 1, "the abort to be counted")
    stats = backend.stats()
    assert stats.running_requests == 0 and stats.free_kv_blocks == stats.total_kv_blocks
    metrics = httpx.get(server.url + "/metrics").text
    assert "deepseek_server_aborted_requests_total 1" in metrics


def test_metrics_hold_the_engine_gauges(server):
    text = httpx.post(server.url + "/v1/chat/completions", json=chat_body(3)).raise_for_status()
    metrics = httpx.get(server.url + "/metrics").text
    values = dict(line.rsplit(" ", 1) for line in metrics.splitlines() if line and not line.startswith("#"))
    total = len(server.llm.block_manager.blocks)
    assert values["deepseek_server_total_kv_blocks"] == str(total)
    assert int(values["deepseek_server_free_kv_blocks"]) <= total
    assert values["deepseek_server_running_sequences"] == "0"
    assert values["deepseek_server_backend_queued_requests"] == "0"
    assert values["deepseek_server_healthy"] == "1"
    for name in ("steps_total", "generated_tokens_total", "preemptions_total", "aborted_requests_total"):
        assert f"deepseek_server_backend_{name}" in values
    assert float(values["deepseek_server_backend_generated_tokens_total"]) > 0
    assert text.status_code == 200


def test_n_choices_share_the_prompt_blocks_and_equal_separate_requests(server, offline):
    oai = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    body = chat_body(11, n=3, seed=500, logprobs=True)
    r = oai.chat.completions.create(**body, extra_headers={"X-Request-Id": "multi"})
    assert [c.index for c in r.choices] == [0, 1, 2]
    for i, choice in enumerate(r.choices):
        alone = expected(offline, "chat.completions", chat_body(11, seed=500 + i, logprobs=True))["choices"][0]
        # The same tokens and the same log probability floats: every product over a step's rows is row_linear,
        # so a row's bits never depend on the other choices sharing the step (nor on a cached prefix).
        got = [(t["token"], t["logprob"]) for key in ("reasoning_content", "content")
               for t in choice.logprobs.model_dump().get(key) or []]
        want = [(t["token"], t["logprob"]) for key in ("reasoning_content", "content")
                for t in alone["logprobs"].get(key) or []]
        assert got == want and got
        assert choice.message.content == alone["message"].get("content")
        assert getattr(choice.message, "reasoning_content", None) == alone["message"].get("reasoning_content")
        assert choice.finish_reason == alone["finish_reason"]
    prompt = r.usage.prompt_tokens
    cached = [server.backend.firsts[f"multi#{i}"].cached_tokens for i in range(3)]
    # The first choice computes the prompt; the other two find its full blocks cached.
    assert cached[1] == cached[2] == (prompt - 1) // 16 * 16 > 0
    assert len({c.message.reasoning_content for c in r.choices}) > 1  # different seeds, different samples


def test_an_agent_turn_reports_the_engine_prefix_cache_hits_in_each_api(server):
    """An agent's next turn (the history, the model's answer, a new message) starts with the previous turn's prompt:
    the engine finds that prompt's full blocks in its prefix cache, and usage reports them in each API's own field,
    validated strictly by the SDKs."""
    oai = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, _strict_response_validation=True)
    claude = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0, _strict_response_validation=True)
    off = {"thinking": {"type": "disabled"}}

    def full_blocks(prompt_tokens: int) -> int:  # at least the last prompt token is always computed
        return (prompt_tokens - 1) // 16 * 16

    system = "You are agent C. Work step by step and say what you did. " * 4
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Turn one: list the files."}]
    first = oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=4, temperature=0, extra_body=off)
    messages += [{"role": "assistant", "content": first.choices[0].message.content or "Done."},
                 {"role": "user", "content": "Turn two: open the first one."}]
    second = oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=4, temperature=0, extra_body=off)
    # (a first turn may hit too: on a prompt opening that earlier requests shared)
    assert second.usage.prompt_tokens_details.cached_tokens >= full_blocks(first.usage.prompt_tokens) \
        > first.usage.prompt_tokens_details.cached_tokens

    system = "You are agent M. Work step by step and say what you did. " * 4
    messages = [{"role": "user", "content": "Turn one: list the files."}]
    first_m = claude.messages.create(model=MODEL, system=system, messages=messages, max_tokens=4,
                                     thinking={"type": "disabled"})
    text = "".join(b.text for b in first_m.content if b.type == "text") or "Done."
    messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "Turn two: open the first one."}]
    second_m = claude.messages.create(model=MODEL, system=system, messages=messages, max_tokens=4,
                                      thinking={"type": "disabled"})
    prompt_m = first_m.usage.input_tokens + (first_m.usage.cache_read_input_tokens or 0)
    assert second_m.usage.cache_read_input_tokens >= full_blocks(prompt_m) > (first_m.usage.cache_read_input_tokens or 0)

    system = "You are agent R. Work step by step and say what you did. " * 4
    items = [{"role": "user", "content": "Turn one: list the files."}]
    first_r = oai.responses.create(model=MODEL, instructions=system, input=items, max_output_tokens=4, temperature=0)
    items += [{"role": "assistant", "content": first_r.output_text or "Done."},
              {"role": "user", "content": "Turn two: open the first one."}]
    second_r = oai.responses.create(model=MODEL, instructions=system, input=items, max_output_tokens=4, temperature=0)
    prompt_r = first_r.usage.input_tokens  # (Responses' input_tokens counts the cached ones too)
    assert second_r.usage.input_tokens_details.cached_tokens >= full_blocks(prompt_r) \
        > first_r.usage.input_tokens_details.cached_tokens
    assert second_r.usage.input_tokens_details.cache_write_tokens == 0
    wait_for(lambda: engine_is_idle(server), "the engine to finish")


def test_a_full_queue_answers_503_and_529_with_retry_after(tiny_v4_checkpoint):
    llm = engine(tiny_v4_checkpoint)
    opened, entered = threading.Event(), threading.Event()
    step = llm.step

    def held_step():  # the engine loop waits here: the first request stays queued (no first chunk)
        entered.set()
        opened.wait()
        return step()

    llm.step = held_step
    config = ServerConfig(max_queued_requests=1, retry_after_s=7)
    with LiveServer(create_app(EngineBackend(llm, "tiny"), config, tokenizer=TOK)) as live:
        with httpx.Client(base_url=live.url, timeout=60) as client:
            first = threading.Thread(target=lambda: client.post("/v1/chat/completions", json=chat_body(1)))
            first.start()
            assert entered.wait(60)
            metrics = client.get("/metrics").text
            chat = client.post("/v1/chat/completions", json=chat_body(2))
            message = client.post("/v1/messages", json=messages_body(2))
            oai = openai.OpenAI(base_url=live.url + "/v1", api_key="x", max_retries=0)
            with pytest.raises(openai.APIStatusError) as oai_err:
                oai.chat.completions.create(**chat_body(3))
            claude = anthropic.Anthropic(base_url=live.url, api_key="x", max_retries=0)
            with pytest.raises(anthropic.APIStatusError) as claude_err:
                claude.messages.create(**{k: v for k, v in messages_body(3).items() if k != "temperature"})
            opened.set()
            first.join(60)
            after = client.post("/v1/chat/completions", json=chat_body(4))
    # While it waited for its first token, the queue gauges held its prompt (the front end's and the engine's).
    values = dict(line.rsplit(" ", 1) for line in metrics.splitlines() if line and not line.startswith("#"))
    prompt = len(ProtocolEngine(llm).prepare("chat.completions", chat_body(1)).prompt_ids)
    assert values["deepseek_server_queued_requests"] == "1"
    assert values["deepseek_server_queued_prompt_tokens"] == str(prompt)
    assert values["deepseek_server_backend_queued_prompt_tokens"] == str(prompt)
    assert chat.status_code == 503 and chat.headers["retry-after"] == "7"
    assert message.status_code == 529 and message.headers["retry-after"] == "7"
    assert message.json()["error"]["type"] == "overloaded_error"
    assert oai_err.value.status_code == 503 and claude_err.value.status_code == 529
    assert after.status_code == 200


def test_a_prompt_longer_than_the_context_is_a_400(server):
    body = chat_body(5, max_tokens=None)
    body["messages"][0]["content"] = "word " * 1500
    r = httpx.post(server.url + "/v1/chat/completions", json=body)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def test_serve_options_become_the_server_config():
    args = build_parser().parse_args([str(DATA / "tiny_v41"), "--port", "9", "--max-queued-requests", "3",
                                      "--max-queued-tokens", "99", "--restore-reasoning"])
    config = server_config(args)
    assert (config.port, config.max_queued_requests, config.max_queued_tokens) == (9, 3, 99)
    assert config.restore_reasoning and config.served_model_name is None  # the backend's name then
    assert engine_backend(args).model_name == "tiny_v41" and engine_backend(args).stream_interval == 0.02
    every_step = build_parser().parse_args([str(DATA / "tiny_v41"), "--stream-interval", "0"])
    assert engine_backend(every_step).stream_interval == 0
    with pytest.raises(ValueError, match="stream-interval"):
        engine_backend(build_parser().parse_args([str(DATA / "tiny_v41"), "--stream-interval", "-1"]))
    assert config.model_version == "v41" and Path(config.tokenizer) == DATA / "tiny_v41" / "tokenizer.json"
    assert detect_model_version(DATA / "tiny_v4") == "v4"
    explicit = server_config(build_parser().parse_args([str(DATA / "tiny_v4"), "--model-version", "v41",
                                                        "--served-model-name", "mine"]))
    assert explicit.model_version == "v41" and explicit.served_model_name == "mine"


def test_the_serve_command_serves_a_checkpoint(tiny_v4_checkpoint, monkeypatch):
    """``deepseek-engine serve`` as the console script runs it, with uvicorn started on a random port here
    instead of ``--port`` (``run_server`` is the front end's; a subprocess would cost a second torch import)."""
    import deepseek_recipe.server.run as run

    served = {}

    def run_server(backend, config, log_level="info"):
        served.update(config=config, log_level=log_level, backend=backend)
        with LiveServer(create_app(backend, config)) as live:
            wait_for(lambda: httpx.get(live.url + "/health").status_code == 200, "the checkpoint to load")
            models = httpx.get(live.url + "/v1/models").json()
            served["models"] = [(m["id"], m["max_model_len"]) for m in models["data"]]
            served["chat"] = httpx.post(live.url + "/v1/chat/completions", json={**chat_body(0), "model": "tiny"},
                                        timeout=60)
            served["other"] = httpx.post(live.url + "/v1/chat/completions", json={**chat_body(0), "model": "other"})

    monkeypatch.setattr(run, "run_server", run_server)
    argv = ["serve", str(tiny_v4_checkpoint), "--port", "8123", "--served-model-name", "tiny", "--max-model-len",
            str(CONTEXT), "--max-queued-requests", "5", "--log-level", "warning"]
    assert main(argv) == 0
    config = served["config"]
    assert (config.port, config.max_queued_requests, config.model_version) == (8123, 5, "v4")
    assert served["models"][0] == ("tiny", CONTEXT)
    assert served["chat"].status_code == 200 and served["chat"].json()["usage"]["completion_tokens"] >= 1
    assert served["other"].status_code == 404
    assert not served["backend"].health()  # the server stopped, and the engine with it


def test_the_serve_command_refuses_a_missing_checkpoint(tmp_path, capsys):
    assert main(["serve", str(tmp_path / "nothing")]) == 2
    assert "no config.json" in capsys.readouterr().err
    assert main(["serve", str(DATA / "tiny_v4"), "--max-queued-requests", "0"]) == 2
    assert "--max-queued-requests must be at least 1" in capsys.readouterr().err
