"""Never a 500 for anything a client sends: malformed and odd bodies to every endpoint, each
answered with a 4xx in that API's own envelope (or a 200 when the body happens to be valid)."""

import json

import httpx
import pytest
from deepseek_recipe.server.app import create_app
from deepseek_recipe.server.config import ServerConfig
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_support import TOK, LiveServer, Script, ScriptedBackend, ids, tool_call_text

VALID = {
    "/v1/chat/completions": {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20,
                             "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
    "/v1/responses": {"model": "tiny", "input": [{"role": "user", "content": "hi"}], "max_output_tokens": 20},
    "/v1/messages": {"model": "tiny", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]},
    "/v1/messages/count_tokens": {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]},
}
ANTHROPIC = ("/v1/messages", "/v1/messages/count_tokens")

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                    st.text(max_size=12), st.sampled_from(["user", "assistant", "system", "tool", "developer",
                                                            "function", "auto", "required", "none", "text",
                                                            "image_url", "tool_use", "thinking", "tiny", ""]))
values = st.recursive(scalars, lambda c: st.one_of(st.lists(c, max_size=3),
                                                   st.dictionaries(st.sampled_from(
                                                       ["role", "content", "type", "text", "name", "id",
                                                        "tool_calls", "function", "arguments", "image_url", "url",
                                                        "input", "tool_use_id", "thinking", "x"]), c, max_size=4)),
                      max_leaves=8)
KEYS = ["model", "messages", "input", "max_tokens", "max_output_tokens", "max_completion_tokens", "stream",
        "stream_options", "n", "temperature", "top_p", "seed", "stop", "tools", "tool_choice", "response_format",
        "thinking", "reasoning", "reasoning_effort", "logprobs", "top_logprobs", "system", "instructions", "text",
        "metadata", "user", "stop_sequences", "parallel_tool_calls"]


@st.composite
def bodies(draw, path):
    kind = draw(st.sampled_from(["mutate", "mutate", "mutate", "value", "bytes"]))
    if kind == "bytes":
        return draw(st.sampled_from([b"", b"{", b"[" * 5000, b"\xff\xfe", b"null", b"{\"model\": \"tiny\"",
                                     b"{\"model\": \"tiny\", \"messages\": [" + b"[" * 3000])) + \
            draw(st.binary(max_size=20))
    if kind == "value":
        return json.dumps(draw(values)).encode()
    body = json.loads(json.dumps(VALID[path]))
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(KEYS + list(body)))
        if draw(st.booleans()) and key in body:
            del body[key]
        else:
            body[key] = draw(values)
    if draw(st.booleans()):
        body["stream"] = True
    return json.dumps(body).encode()


def script(request):
    return Script(ids("think</think>answer" + tool_call_text("f", k="v")), logprobs=True)


@pytest.fixture(scope="module")
def server():
    with LiveServer(create_app(ScriptedBackend(script=script), ServerConfig(max_body_bytes=1 << 16),
                               tokenizer=TOK)) as s:
        s.client = httpx.Client(base_url=s.url, timeout=30)
        yield s
        s.client.close()


def check(server, path, raw):
    r = server.client.post(path, content=raw, headers={"content-type": "application/json"})
    assert r.status_code < 500 or r.status_code in (503, 529), (r.status_code, raw[:300], r.text[:300])
    if r.status_code == 200:
        return
    body = r.json()
    if path in ANTHROPIC:
        assert body["type"] == "error" and set(body["error"]) >= {"type", "message"}, body
    else:
        assert isinstance(body["error"]["message"], str), body


@pytest.mark.parametrize("path", list(VALID))
def test_odd_bodies_never_500(server, path):
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(bodies(path))
    def run(raw):
        check(server, path, raw)
    run()


def test_fixed_odd_requests(server):
    for path in VALID:
        for raw in (b"", b"[]", b"\"x\"", b"{}", json.dumps({"model": 5}).encode(),
                    json.dumps(dict(VALID[path], model="other")).encode(), b"{" * 100000):
            check(server, path, raw)
    r = server.client.get("/v1/chat/completions")
    assert r.status_code == 405 and r.headers["allow"] == "POST" and r.json()["error"]["code"] == "method_not_allowed"
    r = server.client.get("/v1/messages")  # in the API's own envelope
    assert r.status_code == 405 and r.headers["allow"] == "POST" and r.json()["type"] == "error"
    r = server.client.post("/v1/nothing", content=b"{}")
    assert r.status_code == 404 and "error" in r.json()
    r = server.client.post("/v1/chat/completions", content=json.dumps(dict(VALID["/v1/chat/completions"], n=99)))
    assert r.status_code == 400 and r.json()["error"]["param"] == "n"
