"""HTTP serving overhead: concurrent streaming clients through the server versus the engine alone, in one run.

The server (``deepseek_recipe.server`` over ``EngineBackend``, uvicorn on 127.0.0.1 with the event loop ``serve``
runs, uvloop where installed: ``--loop``) runs in this process; the clients run in a child process (``--client``),
so their CPU time and the GIL they hold are not the server's. They are plain HTTP/1.1 clients on asyncio streams
(``--client-kind httpx`` for httpx, which spends more CPU per streamed frame than the server spends making it:
on a machine with few cores that CPU is taken from the server, and the wall-clock ratio measures the client). The
model is the tiny random DeepSeek V4 checkpoint with the real vocabulary (``.cache/`` at the repository root,
created on first use, needs ``transformers``). Three numbers, each against a baseline measured in this run:

* throughput: ``--clients`` (32) concurrent streaming Chat Completions requests (greedy, or seeded sampling,
  ``--temperature``; ``--max-tokens`` each) through HTTP, output tokens per second from the first request sent to the last stream
  closed, against the same prompts and sampling through ``LLM.generate`` offline; the ratio (goal: >= 90%);
* front-end CPU per output token: CPU seconds the server process spent outside the engine-loop thread (uvicorn,
  routing, conversion, encoding, stream parsing, SSE framing) per generated token, next to the engine thread's
  own CPU per token;
* time to first token of one request with an ``--long-prompt`` (8K) token prompt: HTTP (request sent -> first
  content frame) against the engine alone (``add_request`` -> first token), fastest of ``--repeat``, each with
  a fresh prompt (no prefix-cache hits).

A measurement, not a test: nothing asserts on time. On a shared machine wall-clock numbers swing with other
processes' load; take the fastest of ``--repeat`` runs (default 3).

    .venv/bin/python benchmarks/serve.py [--clients 32] [--max-tokens 32] [--repeat 3] [--long-prompt 8192]
                                         [--client-kind raw|httpx] [--loop auto|asyncio] [--stream-interval 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Measure this checkout's engine and server, ahead of any installed copy.
for sub in ("python", "engine", "kernels", "tests/python"):
    sys.path.insert(0, str(ROOT / sub))

MODEL = "DeepSeek-V4-Pro"


def chat_body(i: int, max_tokens: int, temperature: float, words: int = 12) -> dict:
    text = f"Request {i}: " + " ".join(f"word{(i * 31 + k) % 997}" for k in range(words))
    return {"model": MODEL, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
            "seed": 100 + i, "temperature": temperature, "stream": True, "stream_options": {"include_usage": True},
            "thinking": {"type": "disabled"}}


# -- the client side (a child process) ---------------------------------------------------------------
# A plain HTTP/1.1 client on asyncio streams (uvloop where installed): on a machine with few cores the clients'
# CPU competes with the server's, and httpx spends more CPU per streamed frame than the server does to make it.
async def stream_one(host: str, port: int, body: dict) -> dict:
    payload = json.dumps(body).encode()
    start = time.perf_counter()
    first = None
    tokens = frames = 0
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (host.encode(), len(payload), payload))
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status != 200 or b"transfer-encoding: chunked" not in head.lower():
            raise RuntimeError(f"HTTP {status}: {head + await reader.read(300)!r}")
        pending = b""
        while True:  # chunked transfer coding: "<hex size>\r\n<data>\r\n", ended by a chunk of size 0
            size = int(await reader.readuntil(b"\r\n"), 16)
            data = await reader.readexactly(size + 2)
            if size == 0:
                break
            *complete, pending = (pending + data[:-2]).split(b"\n\n")
            for frame in complete:
                if not frame.startswith(b"data: ") or frame == b"data: [DONE]":
                    continue
                if first is None:  # the first frame: sent once the engine's first token is there
                    first = time.perf_counter()
                frames += 1
                chunk = json.loads(frame[6:])
                if chunk.get("usage"):
                    tokens = chunk["usage"]["completion_tokens"]
    finally:
        writer.close()
    return {"start": start, "first": first, "end": time.perf_counter(), "tokens": tokens, "frames": frames}


async def stream_one_httpx(client, url: str, body: dict) -> dict:
    start = time.perf_counter()
    first = None
    tokens = frames = 0
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {(await r.aread())[:300]!r}")
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            if first is None:
                first = time.perf_counter()
            frames += 1
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    return {"start": start, "first": first, "end": time.perf_counter(), "tokens": tokens, "frames": frames}


async def run_clients(url: str, bodies: list[dict], kind: str) -> list[dict]:
    if kind == "raw":
        host, port = url.removeprefix("http://").rsplit(":", 1)
        return list(await asyncio.gather(*(stream_one(host, int(port), b) for b in bodies)))
    import httpx

    limits = httpx.Limits(max_connections=len(bodies) + 1, max_keepalive_connections=len(bodies) + 1)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        return list(await asyncio.gather(*(stream_one_httpx(client, url, b) for b in bodies)))


def client_main(url: str, kind: str) -> None:
    bodies = json.load(sys.stdin)
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    cpu0 = process_cpu()
    results = runner(run_clients(url, bodies, kind))
    json.dump({"results": results, "cpu": process_cpu() - cpu0}, sys.stdout)


# -- the server side ---------------------------------------------------------------------------------
def thread_cpu(thread: threading.Thread) -> float:
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def clients(url: str, bodies: list[dict], kind: str) -> tuple[list[dict], float]:
    """Each body streamed by its own client in a child process: the results, and the CPU seconds the clients took."""
    out = subprocess.run([sys.executable, __file__, "--client", url, "--client-kind", kind], input=json.dumps(bodies),
                         text=True, capture_output=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"client process failed:\n{out.stderr}")
    got = json.loads(out.stdout)
    return got["results"], got["cpu"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--client-kind", choices=["raw", "httpx"], default="raw",
                    help="raw (default): a plain HTTP/1.1 client on asyncio streams; httpx: httpx.AsyncClient")
    ap.add_argument("--loop", default="auto",
                    help="the server's event loop, uvicorn's --loop (default auto: uvloop where installed, as "
                         "`serve` runs)")
    ap.add_argument("--clients", type=int, default=32, help="concurrent streams (default 32)")
    ap.add_argument("--max-tokens", type=int, default=32, help="output tokens per stream (default 32)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side; the fastest counts (default 3)")
    ap.add_argument("--long-prompt", type=int, default=8192, help="prompt tokens of the TTFT request (default 8192)")
    ap.add_argument("--temperature", type=float, default=0.0,
                    help="0 (default): greedy, the engine's fastest steps, where the front end's share is largest; "
                         "> 0: seeded sampling (drawing from the 129280-token vocabulary dominates the steps)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--stream-interval", type=float, default=0.02,
                    help="EngineBackend's stream_interval: least seconds between two hand-overs of new tokens while "
                         "the engine is busy (default 0.02, the server's; 0: after every step)")
    ap.add_argument("--checkpoint", type=Path, help="checkpoint folder (default: .cache/tiny-deepseek-v4)")
    args = ap.parse_args(argv)
    if args.client:
        return client_main(args.client, args.client_kind)

    import torch
    from deepseek_engine import LLM
    from deepseek_engine.entrypoints.protocol_api import ProtocolEngine
    from deepseek_engine.entrypoints.server_backend import EngineBackend
    from deepseek_engine.testing.tiny_checkpoint import ensure_tiny_checkpoint
    from deepseek_recipe.server.app import create_app
    from deepseek_recipe.server.config import ServerConfig
    from server_support import TOK, LiveServer

    torch.set_num_threads(args.threads)
    folder = ensure_tiny_checkpoint(args.checkpoint or ROOT / ".cache" / "tiny-deepseek-v4")
    context = args.long_prompt + 1024
    engine_args = dict(max_model_len=context, max_num_seqs=max(32, args.clients),
                       num_kv_blocks=max(args.clients * 16, -(-context // 16) * 2))

    def engine() -> LLM:
        return LLM(folder, **engine_args)

    bodies = [chat_body(i, args.max_tokens, args.temperature) for i in range(args.clients)]
    offline = ProtocolEngine(engine())
    preps = [offline.prepare("chat.completions", b) for b in bodies]
    print(f"{args.clients} streams of {args.max_tokens} tokens, prompts of {min(len(p.prompt_ids) for p in preps)}-"
          f"{max(len(p.prompt_ids) for p in preps)} tokens; checkpoint {folder}; {args.threads} torch threads")

    # The server freezes the heap startup left (ServerConfig.freeze_startup_heap); the offline side gets the same.
    gc.collect()
    gc.freeze()

    # Offline: the same prompts and sampling through LLM.generate, a fresh engine each run.
    best_offline = offline_cpu = float("inf")
    offline_tokens = 0
    for _ in range(args.repeat):
        llm = engine()
        t0, c0 = time.perf_counter(), process_cpu()
        outs = llm.generate([p.prompt_ids for p in preps], [p.params for p in preps])
        best_offline, offline_cpu = min(best_offline, time.perf_counter() - t0), min(offline_cpu, process_cpu() - c0)
        offline_tokens = sum(len(o.token_ids) for o in outs)

    # HTTP: the server in this process, the clients in a child process.
    best_http, http_tokens, front_cpu, engine_cpu, client_cpu = float("inf"), 0, float("inf"), float("inf"), float("inf")
    for _ in range(args.repeat):
        backend = EngineBackend(engine(), "tiny", stream_interval=args.stream_interval)
        app = create_app(backend, ServerConfig(max_queued_requests=4 * args.clients), tokenizer=TOK)
        with LiveServer(app, loop=args.loop) as s:
            loop_thread = next(t for t in threading.enumerate() if t.name == "deepseek-engine-loop")
            cpu0, eng0 = process_cpu(), thread_cpu(loop_thread)
            results, cpu = clients(s.url, bodies, args.client_kind)
            client_cpu = min(client_cpu, cpu)
            cpu1, eng1 = process_cpu(), thread_cpu(loop_thread)
        frames = sum(r["frames"] for r in results)
        wall = max(r["end"] for r in results) - min(r["start"] for r in results)
        tokens = sum(r["tokens"] for r in results)
        best_http, http_tokens = min(best_http, wall), tokens
        engine_cpu, front_cpu = min(engine_cpu, eng1 - eng0), min(front_cpu, (cpu1 - cpu0) - (eng1 - eng0))
    if http_tokens != offline_tokens:
        print(f"warning: HTTP generated {http_tokens} tokens, offline {offline_tokens}")
    offline_tps, http_tps = offline_tokens / best_offline, http_tokens / best_http
    http_cpu = engine_cpu + front_cpu
    print(f"offline LLM.generate  {offline_tps:9.1f} tok/s wall, {offline_tokens / offline_cpu:9.1f} tok per CPU s "
          f"({offline_tokens} tokens in {best_offline:.2f} s, {offline_cpu:.2f} CPU s)")
    print(f"HTTP, {args.clients} streams     {http_tps:9.1f} tok/s wall, {http_tokens / http_cpu:9.1f} tok per CPU s "
          f"({http_tokens} tokens in {best_http:.2f} s, {http_cpu:.2f} CPU s in the server process)")
    print(f"throughput ratio HTTP / offline: {http_tps / offline_tps:.1%} wall-clock, "
          f"{http_tokens / http_cpu / (offline_tokens / offline_cpu):.1%} per CPU second (goal >= 90%)")
    print(f"CPU per output token: front end {front_cpu / http_tokens * 1e6:.0f} us (everything outside the engine "
          f"loop), engine loop {engine_cpu / http_tokens * 1e6:.0f} us (offline engine "
          f"{offline_cpu / offline_tokens * 1e6:.0f} us); {frames / args.clients:.1f} SSE frames per stream "
          f"(stream interval {args.stream_interval * 1e3:g} ms); the {args.client_kind} clients "
          f"{client_cpu / http_tokens * 1e6:.0f} us (their own process)")

    # Time to first token of a long prompt: the engine alone versus through HTTP (fresh prompts each time).
    def long_body(i: int) -> dict:
        body = chat_body(10_000 + i, 1, 0.0, words=1)
        words = 1
        prep = offline.prepare("chat.completions", body)
        while len(prep.prompt_ids) < args.long_prompt:  # grow the text until the prompt has the length asked
            words = int(words * args.long_prompt / max(1, len(prep.prompt_ids))) + 1
            body = chat_body(10_000 + i, 1, 0.0, words=words)
            prep = offline.prepare("chat.completions", body)
        return body

    long_bodies = [long_body(i) for i in range(2 * args.repeat)]
    long_preps = [offline.prepare("chat.completions", b) for b in long_bodies]
    llm = engine()
    engine_ttft = float("inf")
    for prep in long_preps[: args.repeat]:
        t0 = time.perf_counter()
        llm.add_request(prep.prompt_ids, prep.params)
        while not llm.step():
            pass
        engine_ttft = min(engine_ttft, time.perf_counter() - t0)
    backend = EngineBackend(engine(), "tiny")
    http_ttft = long_front_cpu = float("inf")
    with LiveServer(create_app(backend, ServerConfig(), tokenizer=TOK), loop=args.loop) as s:
        loop_thread = next(t for t in threading.enumerate() if t.name == "deepseek-engine-loop")
        for body in long_bodies[args.repeat:]:
            cpu0, eng0 = process_cpu(), thread_cpu(loop_thread)
            r = clients(s.url, [body], args.client_kind)[0][0]
            http_ttft = min(http_ttft, r["first"] - r["start"])
            long_front_cpu = min(long_front_cpu, (process_cpu() - cpu0) - (thread_cpu(loop_thread) - eng0))
    print(f"time to first token, {len(long_preps[0].prompt_ids)}-token prompt: engine alone {engine_ttft * 1e3:.0f} ms, "
          f"HTTP {http_ttft * 1e3:.0f} ms; overhead {(http_ttft - engine_ttft) * 1e3:+.0f} ms wall "
          f"({http_ttft / engine_ttft - 1:+.1%}); front-end CPU for the request {long_front_cpu * 1e3:.1f} ms")
    gc.unfreeze()


if __name__ == "__main__":
    main()
