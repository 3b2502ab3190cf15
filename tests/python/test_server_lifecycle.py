"""The server's limits and lifecycle over a real socket: client disconnects abort the backend
request, a full queue answers 503 / 529 with Retry-After, body limits, health, metrics."""

import asyncio
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import anthropic
import httpx
import openai
import pytest
from deepseek_recipe.server.app import create_app
from deepseek_recipe.server.backend import (
    BackendOverloaded,
    BackendRequestError,
    BackendUnavailable,
)
from deepseek_recipe.server.config import ServerConfig
from server_support import TOK, LiveServer, Script, ScriptedBackend, ids

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "thinking": {"type": "disabled"}}
MESSAGES = {"model": "tiny", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}


def wait_for(predicate, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def slow_script(request):
    return Script(ids(" word" * 400), delay_s=0.01)


@pytest.mark.parametrize("http", ["h11", "httptools"])
@pytest.mark.parametrize("stream", [True, False])
def test_disconnect_aborts_backend_request(stream, http):
    pytest.importorskip(http)
    backend = ScriptedBackend(script=slow_script)
    with LiveServer(create_app(backend, ServerConfig(), tokenizer=TOK), http=http) as s:
        body = dict(CHAT, stream=stream)
        if stream:
            with httpx.stream("POST", s.url + "/v1/chat/completions", json=body,
                              headers={"X-Request-Id": "gone-1"}) as r:
                assert r.status_code == 200
                next(r.iter_bytes())
        else:
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(s.url + "/v1/chat/completions", json=body, headers={"X-Request-Id": "gone-1"},
                           timeout=httpx.Timeout(5.0, read=0.3))
        wait_for(lambda: "gone-1" in backend.aborted, "the backend request to be aborted")
        wait_for(lambda: backend.running == 0, "the backend to free the request")
        assert "gone-1" not in backend.finished
        metrics = httpx.get(s.url + "/metrics").text
        assert 'deepseek_server_requests_total{api="chat.completions",status="499"} 1' in metrics
        assert "deepseek_server_aborted_requests_total 1" in metrics


def test_disconnect_while_queued_before_first_chunk():
    backend = ScriptedBackend()
    backend.gate = asyncio.Event()
    with LiveServer(create_app(backend, ServerConfig(), tokenizer=TOK)) as s:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(s.url + "/v1/messages", json=MESSAGES, headers={"X-Request-Id": "q-1"},
                       timeout=httpx.Timeout(5.0, read=0.3))
        wait_for(lambda: "q-1" in backend.aborted, "the queued request to be aborted")
        wait_for(lambda: s.call(lambda: s.server.config.app.state.server.admission.requests) == 0,
                 "the queue place to be released")


def test_overload_answers_503_and_529_with_retry_after():
    backend = ScriptedBackend()
    backend.gate = asyncio.Event()
    config = ServerConfig(max_queued_requests=2, retry_after_s=3)
    with LiveServer(create_app(backend, config, tokenizer=TOK)) as s, ThreadPoolExecutor(4) as pool:
        held = [pool.submit(httpx.post, s.url + "/v1/chat/completions", json=CHAT, timeout=30) for _ in range(2)]
        wait_for(lambda: len(backend.requests) == 2, "two requests to reach the backend")
        r = httpx.post(s.url + "/v1/chat/completions", json=CHAT)
        assert r.status_code == 503 and r.headers["retry-after"] == "3"
        assert r.json()["error"]["code"] == "server_overloaded"
        r = httpx.post(s.url + "/v1/responses", json={"model": "tiny", "input": "hi"})
        assert r.status_code == 503 and r.headers["retry-after"] == "3"
        r = httpx.post(s.url + "/v1/messages", json=MESSAGES)
        assert r.status_code == 529 and r.headers["retry-after"] == "3"
        counted = httpx.post(s.url + "/v1/messages/count_tokens", json={k: v for k, v in MESSAGES.items()
                                                                          if k != "max_tokens"})
        assert counted.status_code == 200  # counting takes no queue place
        assert r.json() == {"type": "error", "error": {"type": "overloaded_error", "message": r.json()["error"]["message"]}}
        metrics = httpx.get(s.url + "/metrics").text
        assert "deepseek_server_queued_requests 2" in metrics
        assert "deepseek_server_rejected_requests_total 3" in metrics
        with pytest.raises(openai.InternalServerError) as e:
            openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0).chat.completions.create(
                model="tiny", messages=CHAT["messages"])
        assert e.value.status_code == 503 and e.value.response.headers["retry-after"] == "3"
        with pytest.raises(anthropic.OverloadedError) as e:
            anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0).messages.create(**MESSAGES)
        assert e.value.status_code == 529 and e.value.body["error"]["type"] == "overloaded_error"
        s.call(backend.gate.set)
        assert [f.result().status_code for f in held] == [200, 200]
        assert httpx.post(s.url + "/v1/chat/completions", json=CHAT).status_code == 200
        metrics = httpx.get(s.url + "/metrics").text
        assert "deepseek_server_queued_requests 0" in metrics and "deepseek_server_queued_prompt_tokens 0" in metrics


def test_request_ids_never_collide_and_queued_prompt_tokens_are_gauged():
    """The backend IDs of ``n > 1`` choices never equal another request's ``X-Request-Id`` (nor each other's),
    and ``/metrics`` counts the waiting prompts (an ``n > 1`` prompt once)."""
    backend = ScriptedBackend()
    backend.gate = asyncio.Event()
    given = ["abc-0", "abc", "abc-1", "abc#0", "abc-0"]
    with LiveServer(create_app(backend, ServerConfig(), tokenizer=TOK)) as s, ThreadPoolExecutor(6) as pool:
        multi = pool.submit(httpx.post, s.url + "/v1/chat/completions", json=dict(CHAT, n=3),
                            headers={"X-Request-Id": "abc"}, timeout=30)
        wait_for(lambda: len(backend.requests) == 3, "the three choices to reach the backend")
        others = [pool.submit(httpx.post, s.url + "/v1/chat/completions", json=CHAT, headers={"X-Request-Id": rid},
                              timeout=30) for rid in given]
        wait_for(lambda: len(backend.requests) == 8, "every request to reach the backend")
        metrics = httpx.get(s.url + "/metrics").text
        s.call(backend.gate.set)
        answers = [multi.result()] + [f.result() for f in others]
        after = httpx.get(s.url + "/metrics").text
    ids_sent = [r.request_id for r in backend.requests]
    assert len(set(ids_sent)) == len(ids_sent), ids_sent
    assert all(r.status_code == 200 for r in answers)
    echoed = [r.headers["x-request-id"] for r in answers]
    assert len(set(echoed)) == len(echoed) and echoed[0] == "abc" and "#" not in "".join(echoed)
    assert "abc-0" in echoed and "abc-1" in echoed
    prompt = answers[1].json()["usage"]["prompt_tokens"]
    assert f"deepseek_server_queued_requests {3 + len(given)}" in metrics
    assert f"deepseek_server_queued_prompt_tokens {(1 + len(given)) * prompt}" in metrics
    assert "deepseek_server_queued_requests 0" in after and "deepseek_server_queued_prompt_tokens 0" in after


def test_token_bound_refuses_when_others_queue():
    backend = ScriptedBackend()
    backend.gate = asyncio.Event()
    config = ServerConfig(max_queued_tokens=100)
    long = dict(CHAT, messages=[{"role": "user", "content": "word " * 80}])
    with LiveServer(create_app(backend, config, tokenizer=TOK)) as s, ThreadPoolExecutor(2) as pool:
        first = pool.submit(httpx.post, s.url + "/v1/chat/completions", json=long, timeout=30)
        wait_for(lambda: len(backend.requests) == 1, "the first request to reach the backend")
        r = httpx.post(s.url + "/v1/chat/completions", json=long)
        assert r.status_code == 503 and "retry-after" in r.headers
        s.call(backend.gate.set)
        assert first.result().status_code == 200  # alone in the queue, a long prompt is admitted


@pytest.mark.parametrize("err,status,kind", [
    (BackendOverloaded("full", retry_after=2), 503, "overloaded_error"),
    (BackendRequestError("prompt too long"), 400, "invalid_request_error"),
    (BackendUnavailable("engine died"), 503, "overloaded_error"),
])
def test_backend_refusals(err, status, kind):
    backend = ScriptedBackend(fail_with=err)
    with LiveServer(create_app(backend, ServerConfig(), tokenizer=TOK)) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=dict(CHAT, stream=True))
        assert r.status_code == status and "error" in r.json()
        r = httpx.post(s.url + "/v1/messages", json=MESSAGES)
        assert r.status_code == (529 if isinstance(err, BackendOverloaded) else status)
        assert r.json()["type"] == "error"
        if isinstance(err, BackendOverloaded):
            assert r.json()["error"]["type"] == kind and r.headers["retry-after"] == "2"


def test_body_limit_health_and_metrics():
    backend = ScriptedBackend(script=lambda r: Script(ids("Hi there."), cached_tokens=5))
    with LiveServer(create_app(backend, ServerConfig(max_body_bytes=2000), tokenizer=TOK)) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=dict(CHAT, messages=[{"role": "user", "content": "x" * 5000}]))
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
        r = httpx.post(s.url + "/v1/messages", json=dict(MESSAGES, messages=[{"role": "user", "content": "x" * 5000}]))
        assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"

        def chunks():
            yield b'{"model": "tiny", "messages": ['
            for _ in range(100):
                yield b'{"role": "user", "content": "xxxxxxxxxxxxxxxxxxxxxxxx"},'
        r = httpx.post(s.url + "/v1/chat/completions", content=chunks())  # no Content-Length
        assert r.status_code == 413
        r = httpx.post(s.url + "/v1/chat/completions", json=CHAT)
        assert r.status_code == 200 and r.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 5
        r = httpx.post(s.url + "/v1/messages", json=MESSAGES)
        assert r.json()["usage"]["cache_read_input_tokens"] == 5
        assert httpx.get(s.url + "/health").json() == {"status": "ok"}
        text = httpx.get(s.url + "/metrics").text
        for line in ('deepseek_server_requests_total{api="chat.completions",status="200"} 1',
                     'deepseek_server_requests_total{api="chat.completions",status="413"} 2',
                     'deepseek_server_requests_total{api="messages",status="200"} 1',
                     "deepseek_server_cached_tokens_total 10", "deepseek_server_free_kv_blocks 100",
                     "deepseek_server_time_to_first_token_seconds_count 2", "deepseek_server_running_sequences 0"):
            assert line in text, line
        backend.healthy = False
        assert httpx.get(s.url + "/health").status_code == 503
        r = httpx.post(s.url + "/v1/chat/completions", json=CHAT)
        assert r.status_code == 503 and "retry-after" in r.headers


def test_raw_socket_half_request_and_garbage():
    backend = ScriptedBackend()
    with LiveServer(create_app(backend, ServerConfig(), tokenizer=TOK)) as s:
        sock = socket.create_connection(("127.0.0.1", s.port))
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"model\"")
        sock.close()  # the body never arrives
        r = httpx.post(s.url + "/v1/chat/completions", json=CHAT)
        assert r.status_code == 200
        wait_for(lambda: s.call(lambda: s.server.config.app.state.server.admission.requests) == 0,
                 "the half request's queue place to be released")
        assert json.loads(httpx.get(s.url + "/v1/models").text)["data"][0]["id"] == "tiny"


def seeded_script(request):
    seed = request.sampling.seed
    words = " ".join(f"w{(seed * 7 + i) % 13}" for i in range(8 + seed % 5))
    return Script(ids(f"Answer {seed}: {words}."), chunk_size=1 + seed % 3, delay_s=0.001)


def test_concurrent_streams_equal_single_requests():
    """32 seeded streams at once, chunked differently, each equal the same request alone."""
    backend = ScriptedBackend(script=seeded_script)

    async def run(url):
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            async def one(seed):
                path, data = "/v1/chat/completions", dict(CHAT, seed=seed, stream=True)
                text = ""
                async with client.stream("POST", path, json=data) as r:
                    assert r.status_code == 200
                    async for line in r.aiter_lines():
                        if line.startswith("data: {"):
                            for c in json.loads(line[6:])["choices"]:
                                text += c["delta"].get("content") or ""
                alone = (await client.post(path, json=dict(data, stream=False))).json()
                return text, alone["choices"][0]["message"]["content"]
            return await asyncio.gather(*(one(seed) for seed in range(32)))

    with LiveServer(create_app(backend, ServerConfig(), tokenizer=TOK)) as s:
        results = asyncio.run(run(s.url))
    for seed, (streamed, alone) in enumerate(results):
        words = " ".join(f"w{(seed * 7 + i) % 13}" for i in range(8 + seed % 5))
        assert streamed == alone == f"Answer {seed}: {words}."


class SlowStart(ScriptedBackend):
    """A backend that loads until told to finish (or fails to load)."""

    def __init__(self, fail=False):
        super().__init__()
        self.loaded = asyncio.Event()
        self.fail = fail
        self.up = False

    async def start(self):
        await self.loaded.wait()
        if self.fail:
            raise RuntimeError("no weights")
        self.up = True

    def health(self):
        return self.up


@pytest.mark.parametrize("fail", [False, True])
def test_health_503_until_loaded(fail):
    backend = SlowStart(fail)
    app = create_app(backend, ServerConfig(), tokenizer=TOK)
    live = LiveServer(app)
    live.app = None  # do not wait for the backend: the socket must answer while it loads
    with live as s:
        assert httpx.get(s.url + "/health").status_code == 503
        r = httpx.post(s.url + "/v1/chat/completions", json=CHAT)
        assert r.status_code == 503 and "retry-after" in r.headers
        r = httpx.post(s.url + "/v1/messages", json=MESSAGES)
        assert r.status_code == 503 and r.json()["type"] == "error"
        s.call(backend.loaded.set)
        wait_for(lambda: httpx.get(s.url + "/health").status_code == (503 if fail else 200) and
                 (fail or app.state.server.started), "the backend to load")
        assert httpx.post(s.url + "/v1/chat/completions", json=CHAT).status_code == (503 if fail else 200)


def test_unparseable_backend_output_is_502_not_500():
    backend = ScriptedBackend(script=lambda r: Script([10**9]))  # an ID outside the vocabulary
    with LiveServer(create_app(backend, ServerConfig(), tokenizer=TOK)) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=CHAT)
        assert r.status_code == 502 and r.json()["error"]["code"] == "backend_error"
        r = httpx.post(s.url + "/v1/messages", json=dict(MESSAGES, stream=True))
        assert r.status_code == 200 and "event: error" in r.text
        assert httpx.post(s.url + "/v1/chat/completions", json=dict(CHAT, stream=True)).text.endswith("data: [DONE]\n\n")


def test_official_responses_usage_option():
    """``responses_cache_write_tokens=False`` sends the codec's (official) usage unchanged."""
    for patched in (True, False):
        with LiveServer(create_app(ScriptedBackend(), ServerConfig(responses_cache_write_tokens=patched),
                                   tokenizer=TOK)) as s:
            body = {"model": "tiny", "input": "hi"}
            details = httpx.post(s.url + "/v1/responses", json=body).json()["usage"]["input_tokens_details"]
            assert ("cache_write_tokens" in details) == patched
            events = [json.loads(line[6:]) for line in
                      httpx.post(s.url + "/v1/responses", json=dict(body, stream=True)).text.splitlines()
                      if line.startswith("data: ")]
            done = next(e for e in events if e["type"] == "response.completed")
            assert ("cache_write_tokens" in done["response"]["usage"]["input_tokens_details"]) == patched
