"""Random outputs through the server: for random model outputs (reasoning, text, DSML tool calls),
random backend chunkings and each API, the streamed answer (read with the official SDK's stream
helpers, strictly validated) equals the non-streamed one, and ``n = 3`` choices each equal their
single-choice request; random early disconnects abort the backend request and leave the queue
empty."""

import json
import random
import socket
import time

import anthropic
import httpx
import openai
import pytest
from deepseek_recipe.server.app import create_app
from deepseek_recipe.server.config import ServerConfig
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_support import TOK, LiveServer, Script, ScriptedBackend, ids, tool_call_text

PIECES = ["Hello", " world", ".", "\n", " 数", "🦀", " a</b>", " <｜User｜>x", "{\"k\": 1}", " done"]
TOOLS_CHAT = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
TOOLS_RESP = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
TOOLS_MSG = [{"name": "f", "input_schema": {"type": "object"}}]
SCRIPTS: dict[int, Script] = {}


@st.composite
def outputs(draw):
    reasoning = "".join(draw(st.lists(st.sampled_from(PIECES), max_size=4)))
    text = "".join(draw(st.lists(st.sampled_from(PIECES), max_size=5)))
    calls = "".join(tool_call_text("f", k=draw(st.sampled_from(["v", "数", "a b"])))
                    for _ in range(draw(st.integers(0, 2))))
    return reasoning, text + calls, draw(st.integers(1, 4)), draw(st.booleans())


def script(request):
    return SCRIPTS[request.sampling.seed or 0]


@pytest.fixture(scope="module")
def server():
    with LiveServer(create_app(ScriptedBackend(script=script), ServerConfig(), tokenizer=TOK)) as s:
        s.oai = openai.OpenAI(base_url=s.url + "/v1", api_key="x", _strict_response_validation=True, max_retries=0)
        s.claude = anthropic.Anthropic(base_url=s.url, api_key="x", _strict_response_validation=True, max_retries=0)
        yield s


def strip(items):
    """Output items without what differs between two responses (IDs) or what the SDK's stream
    helper adds (``parsed``)."""
    def clean(v):
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()
                    if k not in ("id", "call_id", "encrypted_content") and not k.startswith("parsed")}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v
    return [clean(o.model_dump()) for o in items]


def chat_message(m):
    return {"content": m.content or "", "reasoning": (m.model_extra or {}).get("reasoning_content") or "",
            "calls": [(c.function.name, c.function.arguments) for c in m.tool_calls or []]}


def chat_stream(stream):
    got: dict[int, dict] = {}
    for chunk in stream:
        for c in chunk.choices:
            g = got.setdefault(c.index, {"content": "", "reasoning": "", "calls": {}, "finish": None})
            g["content"] += c.delta.content or ""
            g["reasoning"] += (c.delta.model_extra or {}).get("reasoning_content") or ""
            for tc in c.delta.tool_calls or []:
                name, args = g["calls"].get(tc.index, ("", ""))
                g["calls"][tc.index] = (name + (tc.function.name or ""), args + (tc.function.arguments or ""))
            g["finish"] = c.finish_reason or g["finish"]
    return {i: ({"content": g["content"], "reasoning": g["reasoning"], "calls": [g["calls"][k] for k in sorted(g["calls"])]},
                g["finish"]) for i, g in got.items()}


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(out=outputs(), seed=st.integers(1, 10**6))
def test_stream_equals_non_stream(server, out, seed):
    reasoning, answer, chunk, thinking = out
    text = (reasoning + "</think>" if thinking else "") + answer
    for i in range(3):
        SCRIPTS[seed + i] = Script(ids(text), chunk_size=chunk + i)
    think = {"thinking": {"type": "enabled" if thinking else "disabled"}}
    body = dict(model="tiny", messages=[{"role": "user", "content": "q"}], tools=TOOLS_CHAT, seed=seed,
                extra_body=think)
    whole = server.oai.chat.completions.create(**body)
    streamed = chat_stream(server.oai.chat.completions.create(**body, stream=True))
    assert streamed == {0: (chat_message(whole.choices[0].message), whole.choices[0].finish_reason)}
    several = server.oai.chat.completions.create(**body, n=3)
    assert [chat_message(c.message) for c in several.choices] == [chat_message(whole.choices[0].message)] * 3
    assert several.usage.completion_tokens == 3 * whole.usage.completion_tokens
    streamed3 = chat_stream(server.oai.chat.completions.create(**body, n=3, stream=True,
                                                               stream_options={"include_usage": True}))
    assert streamed3 == {i: streamed[0] for i in range(3)}

    SCRIPTS[0] = SCRIPTS[seed]
    rbody = dict(model="tiny", input="q", tools=TOOLS_RESP,
                 reasoning={"effort": "high"} if thinking else None, extra_body=think)
    rbody = {k: v for k, v in rbody.items() if v is not None}
    whole = server.oai.responses.create(**rbody)
    with server.oai.responses.stream(**rbody) as s:
        final = s.get_final_response()
    assert strip(final.output) == strip(whole.output) and final.usage == whole.usage

    mbody = dict(model="tiny", max_tokens=500, messages=[{"role": "user", "content": "q"}], tools=TOOLS_MSG,
                 thinking={"type": "enabled", "budget_tokens": 100} if thinking else {"type": "disabled"})
    whole = server.claude.messages.create(**mbody)
    with server.claude.messages.stream(**mbody) as s:
        final = s.get_final_message()
    dump = lambda m: [b.model_dump(exclude={"signature", "id"}) for b in m.content]  # noqa: E731
    assert dump(final) == dump(whole) and final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens


def test_random_early_disconnects(server):
    rng = random.Random(7)
    SCRIPTS[0] = Script(ids(" word" * 300), delay_s=0.002)
    backend = server.app.state.server.backend
    bodies = [("/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "q"}]}),
              ("/v1/responses", {"model": "tiny", "input": "q"}),
              ("/v1/messages", {"model": "tiny", "max_tokens": 1000, "messages": [{"role": "user", "content": "q"}]})]
    for k in range(9):
        path, body = bodies[k % 3]
        data = json.dumps(dict(body, stream=k % 2 == 0)).encode()
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\nX-Request-Id: cut-{k}\r\n\r\n".encode() + data)
        time.sleep(rng.uniform(0.0, 0.1))
        sock.close()
    # A connection cut within microseconds may end before the server has read its request (under load,
    # say): that request never reaches the backend, which is fine. What must hold: every request the
    # backend was given ended (finished or aborted), the admission queue drained, nothing runs.
    deadline = time.monotonic() + 30
    state = server.app.state.server
    cut = {f"cut-{k}" for k in range(9)}

    def settled() -> bool:
        given = {r.request_id for r in backend.requests} & cut
        return (given <= set(backend.aborted + backend.finished)
                and state.admission.requests == 0 and backend.running == 0)

    time.sleep(0.5)
    while not settled():
        assert time.monotonic() < deadline, (backend.aborted, state.admission.requests, backend.running)
        time.sleep(0.02)
    assert cut & set(backend.aborted)
    assert httpx.post(server.url + "/v1/chat/completions", json=bodies[0][1] | {"max_tokens": 5}).status_code == 200
