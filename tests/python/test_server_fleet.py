"""Fleet backends against local servers that speak the vLLM 0.33 ``--tokens-only`` and SGLang
0.5.23 wire shapes (``fleet_fakes.py``): request fields, streamed token IDs and log probabilities,
stop tokens, cached tokens, errors, aborts; and the whole front end over each one."""

import asyncio
import time

import httpx
import openai
import pytest
from deepseek_recipe.server.app import create_app
from deepseek_recipe.server.backend import (
    BackendOverloaded,
    BackendRequestError,
    BackendUnavailable,
    GenerateRequest,
    SamplingOptions,
)
from deepseek_recipe.server.config import ServerConfig
from deepseek_recipe.server.fleet import SglangBackend, VllmBackend, make_fleet_backend
from fleet_fakes import FleetScript, sglang_app, vllm_app
from server_support import EOS, TOK, LiveServer, ids

OUT = ids("Hello from the fleet.")


def request(rid="r1", max_tokens=100, logprobs=None, seed=5):
    return GenerateRequest(rid, [1, 2, 3, 4], SamplingOptions(max_tokens=max_tokens, temperature=0.5, seed=seed,
                                                               stop_token_ids=(EOS,), logprobs=logprobs))


async def collect(backend, req, take=None):
    await backend.start()
    chunks = []
    try:
        it = backend.generate(req)
        async for c in it:
            chunks.append(c)
            if take is not None and len(chunks) >= take:
                await it.aclose()
                break
    finally:
        await backend.aclose()
    return chunks


def check_chunks(chunks, expect_ids, finish, stop=True):
    got = [t for c in chunks for t in c.token_ids]
    assert got == expect_ids
    assert [c.finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1].finish_reason == finish
    assert chunks[-1].stop_token_id == (EOS if stop else None)
    assert all(c.prompt_tokens == 4 for c in chunks if c.token_ids or c.finish_reason)


KINDS = [("vllm", vllm_app, VllmBackend), ("sglang", sglang_app, SglangBackend)]


@pytest.mark.parametrize("kind,app,cls", KINDS)
def test_stream_ids_logprobs_stop(kind, app, cls):
    script = FleetScript(OUT, EOS, cached_tokens=3, chunk=3)
    with LiveServer(app(script)) as s:
        backend = cls(s.url)
        chunks = asyncio.run(collect(backend, request(logprobs=2)))
        check_chunks(chunks, OUT + [EOS], "stop")
        assert all(c.logprobs is not None and len(c.logprobs) == len(c.token_ids) for c in chunks if c.token_ids)
        first = next(c for c in chunks if c.token_ids)
        assert first.logprobs[0][0] == -0.25 and first.logprobs[0][1][0] == (OUT[0], -0.25)
        assert chunks[-1].cached_tokens == 3
        assert backend.model_name == f"{kind}-model" and backend.max_model_len == 4096
        body = script.requests[0]["body"]
        if kind == "vllm":
            assert body["token_ids"] == [1, 2, 3, 4] and body["request_id"] == "r1" and body["stream"] is True
            assert body["sampling_params"]["seed"] == 5 and body["sampling_params"]["stop_token_ids"] == [EOS]
            assert script.requests[0]["x_request_id"] == "r1"
        else:
            assert body["input_ids"] == [1, 2, 3, 4] and body["rid"] == "r1" and body["stream"] is True
            assert body["sampling_params"]["sampling_seed"] == 5 and body["sampling_params"]["max_new_tokens"] == 100
            assert body["return_logprob"] is True and body["top_logprobs_num"] == 2


@pytest.mark.parametrize("kind,app,cls", KINDS)
def test_length_finish(kind, app, cls):
    script = FleetScript(OUT, EOS, chunk=2)
    with LiveServer(app(script)) as s:
        chunks = asyncio.run(collect(cls(s.url), request(max_tokens=3)))
        check_chunks(chunks, OUT[:3], "length", stop=False)


@pytest.mark.parametrize("incremental,trim", [(False, False), (True, False), (False, True), (True, True)])
def test_sglang_output_modes(incremental, trim):
    script = FleetScript(OUT, EOS, chunk=2, incremental=incremental, trim_stop=trim)
    with LiveServer(sglang_app(script)) as s:
        chunks = asyncio.run(collect(SglangBackend(s.url), request(logprobs=1)))
        check_chunks(chunks, OUT + [EOS], "stop")
        assert all(len(c.logprobs) == len(c.token_ids) for c in chunks if c.token_ids)


@pytest.mark.parametrize("kind,app,cls", KINDS)
def test_close_aborts_on_the_server(kind, app, cls):
    script = FleetScript(OUT * 20, EOS, chunk=1, delay_s=0.02)
    with LiveServer(app(script)) as s:
        chunks = asyncio.run(collect(cls(s.url), request(rid="gone"), take=2))
        assert len(chunks) == 2
        assert "gone" in script.aborts
        if kind == "vllm":
            assert "generate-tokens-gone" in script.aborts


@pytest.mark.parametrize("kind,app,cls", KINDS)
def test_errors_map_to_backend_errors(kind, app, cls):
    script = FleetScript(OUT, EOS)
    with LiveServer(app(script)) as s:
        for status, err in ((503, BackendOverloaded), (429, BackendOverloaded), (400, BackendRequestError),
                            (500, BackendUnavailable)):
            script.status = status
            with pytest.raises(err):
                asyncio.run(collect(cls(s.url), request()))
    backend = cls("http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(BackendUnavailable):
        asyncio.run(collect(backend, request()))
    assert not backend.health()


def test_make_fleet_backend():
    assert isinstance(make_fleet_backend("vllm=http://h:1"), VllmBackend)
    assert isinstance(make_fleet_backend("sglang=http://h:1/", "m"), SglangBackend)
    for bad in ("vllm", "tgi=http://h", "vllm="):
        with pytest.raises(ValueError):
            make_fleet_backend(bad)


@pytest.mark.parametrize("kind,app,cls", KINDS)
def test_front_end_over_fleet(kind, app, cls):
    script = FleetScript(ids("Hi there.") , EOS, cached_tokens=6, chunk=2)
    with LiveServer(app(script)) as fleet:
        backend = cls(fleet.url, model_name="served")
        with LiveServer(create_app(backend, ServerConfig(), tokenizer=TOK)) as s:
            client = openai.OpenAI(base_url=s.url + "/v1", api_key="x", _strict_response_validation=True,
                                   max_retries=0)
            body = dict(model="served", messages=[{"role": "user", "content": "hi"}],
                        extra_body={"thinking": {"type": "disabled"}})
            r = client.chat.completions.create(**body)
            assert r.choices[0].message.content == "Hi there."
            if kind == "sglang":
                assert r.usage.prompt_tokens_details.cached_tokens == 6
            text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(**body, stream=True)
                           if c.choices)
            assert text == "Hi there."
            assert httpx.get(s.url + "/health").status_code == 200
            script.healthy = False
            asyncio.run_coroutine_threadsafe(backend.check_health(), s.loop).result(5)
            assert httpx.get(s.url + "/health").status_code == 503


@pytest.mark.parametrize("kind,app,cls", KINDS)
def test_client_disconnect_aborts_fleet_request(kind, app, cls):
    script = FleetScript(OUT * 50, EOS, chunk=1, delay_s=0.02)
    with LiveServer(app(script)) as fleet:
        with LiveServer(create_app(cls(fleet.url, model_name="served"), ServerConfig(), tokenizer=TOK)) as s:
            body = {"model": "served", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
            with httpx.stream("POST", s.url + "/v1/chat/completions", json=body,
                              headers={"X-Request-Id": "bye"}) as r:
                next(r.iter_bytes())
            deadline = time.monotonic() + 20
            while "bye" not in script.aborts:
                assert time.monotonic() < deadline, "the fleet request was not aborted"
                time.sleep(0.02)


def test_cli_serve_over_vllm(tmp_path):
    """`deepseek-recipe serve --backend vllm=URL` as a user starts it, driven by the openai SDK."""
    import os
    import socket
    import subprocess
    import sys

    script = FleetScript(ids("Served."), EOS)
    with LiveServer(vllm_app(script)) as fleet:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        proc = subprocess.Popen([sys.executable, "-m", "deepseek_recipe", "serve", "--backend", f"vllm={fleet.url}",
                                 "--port", str(port), "--log-level", "warning"], env=os.environ.copy())
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, "the server exited"
                assert time.monotonic() < deadline, "the server did not become healthy"
                try:
                    if httpx.get(url + "/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            client = openai.OpenAI(base_url=url + "/v1", api_key="x", _strict_response_validation=True, max_retries=0)
            assert [m.id for m in client.models.list()][0] == "vllm-model"  # the fleet's own name
            r = client.chat.completions.create(model="vllm-model", messages=[{"role": "user", "content": "hi"}],
                                               extra_body={"thinking": {"type": "disabled"}})
            assert r.choices[0].message.content == "Served."
        finally:
            proc.terminate()
            proc.wait(20)
