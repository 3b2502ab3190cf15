"""Agent sessions: the encoding-session cache gives the same prompt IDs as a cold encode and reuses
the previous turn; ``restore_reasoning`` puts back the reasoning of the server's own turns that a
client dropped, so the next prompt equals the one with the reasoning kept (and metrics count it)."""

import copy
import json

import deepseek_recipe as dr
import httpx
import pytest
from deepseek_recipe.server.app import create_app
from deepseek_recipe.server.config import ServerConfig
from deepseek_recipe.server.reasoning_restore import ReasoningStore
from server_support import TOK, LiveServer, Script, ScriptedBackend, ids, tool_call_text

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
REASONING = "The user wants weather; call the tool."


def script(request):
    return Script(ids(REASONING + "</think>Checking." + tool_call_text("get_weather", city="Paris")))


def cold_ids(api_cls, body):
    options = dr.ConversionOptions().with_model_alias("tiny", dr.ModelVersion.DeepseekV4Pro)
    conv = api_cls(copy.deepcopy(body)).convert(options)
    return list(dr.DeepseekV4Encoding().with_tokenizer(TOK).encode(conv.conversation))


def metric(url, name):
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(name)


@pytest.fixture(params=[False, True], ids=["plain", "restore"])
def server(request):
    backend = ScriptedBackend(script=script)
    with LiveServer(create_app(backend, ServerConfig(restore_reasoning=request.param), tokenizer=TOK)) as s:
        s.backend, s.restore = backend, request.param
        yield s


def test_chat_agent_turns(server):
    url = server.url
    turn1 = {"model": "tiny", "messages": [{"role": "system", "content": "You are terse."},
                                           {"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS}
    r = httpx.post(url + "/v1/chat/completions", json=turn1).json()
    message = r["choices"][0]["message"]
    assert message["reasoning_content"] == REASONING
    p1 = list(server.backend.requests[-1].prompt_token_ids)
    assert p1 == cold_ids(dr.ChatCompletionRequest, turn1)
    call = message["tool_calls"][0]
    kept = dict(turn1, messages=turn1["messages"] + [
        {"role": "assistant", "content": message["content"], "reasoning_content": REASONING, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}])
    dropped = copy.deepcopy(kept)
    del dropped["messages"][2]["reasoning_content"]  # what many gateways send back
    httpx.post(url + "/v1/chat/completions", json=dropped)
    p2 = list(server.backend.requests[-1].prompt_token_ids)
    assert p2 == cold_ids(dr.ChatCompletionRequest, kept if server.restore else dropped)
    assert p2[:len(p1)] == p1
    assert metric(url, "deepseek_server_session_reused_tokens_total") > 0
    assert metric(url, "deepseek_server_restored_reasoning_total") == (1 if server.restore else 0)
    if server.restore:
        # The reasoning is in the prompt: it extends the first turn's prompt and output.
        assert TOK.decode(p2).count(REASONING) == 1


def test_messages_and_responses_restore(server):
    url = server.url
    tools = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    first = {"model": "tiny", "max_tokens": 200, "messages": [{"role": "user", "content": "Weather?"}],
             "tools": tools, "thinking": {"type": "enabled", "budget_tokens": 100}}
    r = httpx.post(url + "/v1/messages", json=first).json()
    use = next(b for b in r["content"] if b["type"] == "tool_use")
    text = [b for b in r["content"] if b["type"] == "text"]
    follow = dict(first, messages=first["messages"] + [
        {"role": "assistant", "content": text + [use]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "sunny"}]}])
    httpx.post(url + "/v1/messages", json=follow)
    prompt = TOK.decode(list(server.backend.requests[-1].prompt_token_ids))
    assert (REASONING in prompt) == server.restore
    counted = httpx.post(url + "/v1/messages/count_tokens", json={k: v for k, v in follow.items() if k != "max_tokens"})
    assert counted.json()["input_tokens"] == len(server.backend.requests[-1].prompt_token_ids)

    rtools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    first = {"model": "tiny", "input": [{"role": "user", "content": "Weather?"}], "tools": rtools}
    r = httpx.post(url + "/v1/responses", json=first).json()
    call = next(o for o in r["output"] if o["type"] == "function_call")
    follow = dict(first, input=first["input"] + [
        {"type": "function_call", "call_id": call["call_id"], "name": call["name"], "arguments": call["arguments"]},
        {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}])
    httpx.post(url + "/v1/responses", json=follow)
    prompt = TOK.decode(list(server.backend.requests[-1].prompt_token_ids))
    assert (REASONING in prompt) == server.restore


def test_reasoning_store_bounds():
    store = ReasoningStore(entries=3, max_bytes=20)
    for i in range(5):
        store.remember(f"r{i}", f"text{i}", [f"call{i}"])
    assert len(store) <= 3 and store.lookup(None, ["call0"]) is None and store.lookup("text4", []) == "r4"
    store.remember("x" * 30, "big", [])  # larger than the byte bound: not kept
    assert store.bytes <= 20
    body = {"messages": [{"role": "assistant", "content": "text4"}, {"role": "user", "content": "text4"}]}
    assert store.restore("chat.completions", body) == 1
    assert body["messages"][0]["reasoning_content"] == "r4" and "reasoning_content" not in body["messages"][1]
    odd = {"messages": [None, 5, {"role": "assistant", "content": [{"type": "text"}], "tool_calls": "x"}]}
    assert store.restore("chat.completions", json.loads(json.dumps(odd))) == 0
    assert store.restore("messages", {"messages": [{"role": "assistant", "content": 7}]}) == 0
    assert store.restore("responses", {"input": "just text"}) == 0


def test_session_cache_bounds():
    from deepseek_recipe.server.sessions import SessionCache
    enc = dr.DeepseekV4Encoding().with_tokenizer(TOK)

    def conv(first, turns):
        msgs = [{"role": "user", "content": first}]
        for i in range(turns):
            msgs += [{"role": "assistant", "content": f"a{i}"}, {"role": "user", "content": f"u{i}"}]
        options = dr.ConversionOptions().with_model_alias("tiny", dr.ModelVersion.DeepseekV4Pro)
        return dr.ChatCompletionRequest({"model": "tiny", "messages": msgs}).convert(options).conversation

    cache = SessionCache(enc, entries=3, max_cached_tokens=1 << 20, max_bytes=1 << 30)
    for k in range(5):
        ids, reused = cache.encode(conv(f"start {k}", 0))
        assert ids == list(enc.encode(conv(f"start {k}", 0))) and reused == 0
    assert len(cache) == 3
    ids, reused = cache.encode(conv("start 4", 2))
    assert ids == list(enc.encode(conv("start 4", 2))) and reused > 0
    small = SessionCache(enc, entries=100, max_cached_tokens=1 << 20, max_bytes=1)
    small.encode(conv("x", 1))
    assert len(small) == 0 and small.bytes == 0
