"""The ASGI application: routes, the request lifecycle, and the service endpoints.

One generation request goes: admission (a queue place, before anything else) -> body (at most
``max_body_bytes``) -> conversion and encoding in a worker thread (``prepare.py``) -> the prompt's
tokens counted against the queue -> submission to the backend, waiting for the first chunk (the
status line is sent only then, so a refusal is still a proper error) -> frames or one response
(``generation.py``). Everything after the body is raced against the client's disconnect
(``cancellation.py``): a client that goes away aborts its backend requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from .admission import AdmissionQueue, Ticket
from .backend import TokenBackend
from .cancellation import ClientDisconnected, until_disconnect
from .config import ServerConfig
from .errors import APIError, ErrorStyle, model_not_found
from .generation import Generation
from .metrics import Metrics
from .prepare import RequestCodec
from .protocols import CHAT, COUNT_TOKENS, MESSAGES, RESPONSES, ApiSpec
from .sse import HEADERS as SSE_HEADERS
from .sse import MEDIA_TYPE as SSE_MEDIA_TYPE
from .sse import done_frame, error_frame

logger = logging.getLogger("deepseek_recipe.server")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
#: Bodies up to this size that name no image are converted and encoded on the event loop (tens of
#: microseconds: less than the hand-off to a worker thread costs); larger ones, and any that may
#: fetch an image, in a worker thread.
INLINE_PREPARE_BYTES = 16 * 1024
#: The status recorded for a request whose client went away first (nginx's convention).
CLIENT_CLOSED = 499


class ServerState:
    """What every handler shares: the backend, the codec, the queue, the metrics."""

    def __init__(self, backend: TokenBackend, config: ServerConfig, tokenizer: Any = None) -> None:
        self.backend = backend
        self.config = config
        self.model_name = config.served_model_name or backend.model_name
        context = backend.max_model_len or config.max_model_len
        self.codec = RequestCodec(config, self.model_name, context, tokenizer,
                                  config.enforce_output_constraints and backend.enforces_output_constraints)
        self.admission = AdmissionQueue(config.max_queued_requests, config.max_queued_tokens, config.retry_after_s)
        self.metrics = Metrics()
        self.running = 0
        self.in_flight: set[str] = set()
        self.started = False

    def request_id(self, scope: dict[str, Any]) -> str:
        """The client's ``X-Request-Id`` when usable (made unique among requests in flight), else a new one.

        It never holds ``generation.CHOICE_SEPARATOR``, so the backend IDs of ``n > 1`` choices (``<id>#<i>``) never
        equal another request's ID."""
        given = None
        for name, value in scope.get("headers") or []:
            if name == b"x-request-id":
                given = value.decode("latin-1").strip()
                break
        base = given if given and _REQUEST_ID.match(given) else uuid.uuid4().hex
        rid = base
        while rid in self.in_flight:
            rid = f"{base}-{uuid.uuid4().hex[:8]}"
        return rid


async def _send_json(send: Any, status: int, body: Any, headers: dict[str, str]) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


async def read_body(scope: dict[str, Any], receive: Any, limit: int) -> bytes:
    """The request body, refusing one over ``limit`` bytes (by its length header, else as it arrives)."""
    for name, value in scope.get("headers") or []:
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                raise APIError(400, "invalid Content-Length header") from None
            if length > limit:
                raise APIError(413, f"the request body is {length} bytes; this server accepts at most {limit}",
                               "invalid_request_error", "request_too_large")
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise APIError(413, f"the request body exceeds {limit} bytes", "invalid_request_error",
                           "request_too_large")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


class _TrackedSend:
    """An ASGI ``send`` that notes whether the status line went out (``started``: an error can then no
    longer be an answer of its own); ``raw`` is the ASGI server's ``send``, which a started stream's
    frames go to directly."""

    __slots__ = ("raw", "started")

    def __init__(self, raw: Any) -> None:
        self.raw, self.started = raw, False

    async def __call__(self, message: dict[str, Any]) -> None:
        if message.get("type") == "http.response.start":
            self.started = True
        await self.raw(message)


class _Endpoint:
    """Shared plumbing of the POST endpoints (a raw ASGI app, to own receive and send)."""

    spec: ApiSpec
    #: Whether the endpoint generates (and so waits for the backend to be ready).
    needs_backend = True

    def __init__(self, state: ServerState, spec: ApiSpec) -> None:
        self.state, self.spec = state, spec

    @property
    def style(self) -> ErrorStyle:
        return self.spec.error_style

    async def send_error(self, send: Any, err: APIError, headers: dict[str, str]) -> int:
        status = err.status_for(self.style)
        await _send_json(send, status, err.encode(self.style), {**headers, **err.headers()})
        return status

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        state = self.state
        arrival = time.monotonic()
        rid = state.request_id(scope)
        headers = {"X-Request-Id": rid}
        status = 500
        ticket: Ticket | None = None
        state.in_flight.add(rid)
        send_tracked = _TrackedSend(send)
        try:
            if scope.get("method") != "POST":
                headers["Allow"] = "POST"
                raise APIError(405, f"{scope.get('method')} is not allowed here; use POST", "invalid_request_error",
                               "method_not_allowed")
            if self.needs_backend and not (state.started and state.backend.health()):
                raise APIError(503, "the model is not ready", "server_error", "service_unavailable",
                               retry_after=state.config.retry_after_s)
            # Counting tokens generates nothing: it takes no queue place.
            ticket = state.admission.admit() if self.needs_backend else None
            raw = await read_body(scope, receive, state.config.max_body_bytes)
            status = await until_disconnect(receive, self.serve(send_tracked, raw, ticket, rid, arrival, headers))
        except APIError as err:
            status = await self.send_error(send, err, headers)
        except ClientDisconnected:
            status = CLIENT_CLOSED
        except Exception as err:  # noqa: BLE001 - a server bug still answers in the API's envelope
            logger.exception("request %s failed", rid)
            if not send_tracked.started:
                status = await self.send_error(send, APIError(500, f"internal error: {type(err).__name__}: {err}",
                                                              "server_error", "internal_error"), headers)
        finally:
            if ticket is not None:
                ticket.release()
            state.in_flight.discard(rid)
            state.metrics.count_request(self.spec.name, status)

    async def serve(self, send: Any, raw: bytes, ticket: Ticket | None, rid: str, arrival: float,
                    headers: dict[str, str]) -> int:
        raise NotImplementedError


class GenerateEndpoint(_Endpoint):
    """``POST /v1/chat/completions``, ``/v1/responses``, ``/v1/messages``."""

    async def serve(self, send: Any, raw: bytes, ticket: Ticket | None, rid: str, arrival: float,
                    headers: dict[str, str]) -> int:
        state = self.state
        assert ticket is not None
        try:
            if len(raw) <= INLINE_PREPARE_BYTES and b"image" not in raw:
                prep = state.codec.prepare(self.spec, raw)
            else:
                prep = await asyncio.to_thread(state.codec.prepare, self.spec, raw)
            ticket.add(prep.prompt_tokens, prep.n)
        except APIError as err:
            return await self.send_error(send, err, headers)
        gen = Generation(state.backend, state.codec, state.metrics, prep, rid, arrival, state.config.retry_after_s)
        try:
            try:
                await gen.start()
            except APIError as err:
                return await self.send_error(send, err, headers)
            finally:
                ticket.release()
            state.running += prep.n
            try:
                if prep.stream:
                    await self.stream(send, gen, headers)
                else:
                    try:
                        body = await gen.complete()
                    except APIError as err:
                        return await self.send_error(send, err, headers)
                    await _send_json(send, 200, body, headers)
            finally:
                state.running -= prep.n
            return 200
        finally:
            await gen.close()

    async def stream(self, send: Any, gen: Generation, headers: dict[str, str]) -> None:
        raw_headers = [(b"content-type", f"{SSE_MEDIA_TYPE}; charset=utf-8".encode())]
        raw_headers += [(k.lower().encode(), v.encode()) for k, v in {**SSE_HEADERS, **headers}.items()]
        await send({"type": "http.response.start", "status": 200, "headers": raw_headers})
        send = getattr(send, "raw", send)  # started: the frames need no tracking
        done = done_frame(self.spec.sse_done)
        ended = False  # the last frame went with the end of the stream, in one write
        try:
            async for frame, last in gen.frames():
                if last and not ended:
                    ended = True
                    await send({"type": "http.response.body", "body": frame + done})
                elif not ended:
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
        except Exception as err:  # noqa: BLE001 - the status line is sent: report in the stream
            if ended:  # (after the answer is complete: only the bookkeeping after it failed)
                logger.exception("request %s failed after its stream ended", gen.request_id)
                return
            api_err = err if isinstance(err, APIError) else \
                APIError(500, f"internal error: {type(err).__name__}: {err}", "server_error", "internal_error")
            await send({"type": "http.response.body", "more_body": True,
                        "body": error_frame(api_err, self.style, self.spec.name, gen.events)})
        if not ended:
            await send({"type": "http.response.body", "body": done})


class CountTokensEndpoint(_Endpoint):
    """``POST /v1/messages/count_tokens``: the ``input_tokens`` the same Messages request is billed."""

    needs_backend = False

    async def serve(self, send: Any, raw: bytes, ticket: Ticket | None, rid: str, arrival: float,
                    headers: dict[str, str]) -> int:
        try:
            tokens = await asyncio.to_thread(self.state.codec.count_tokens, raw)
        except APIError as err:
            return await self.send_error(send, err, headers)
        await _send_json(send, 200, {"input_tokens": tokens}, headers)
        return 200


class _ServerApp(Starlette):
    """Starlette, except that requests to the POST endpoints' paths go straight to them: they answer every
    error themselves, and skipping the middleware's wrappers saves work on every streamed frame."""

    direct: dict[str, Any] = {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            endpoint = self.direct.get(scope["path"])
            if endpoint is not None:
                scope["app"] = self
                await endpoint(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(backend: TokenBackend, config: ServerConfig, *, tokenizer: Any = None) -> Starlette:
    """The server's ASGI application over ``backend``; ``tokenizer`` (a loaded ``deepseek_recipe.Tokenizer``)
    saves loading ``config.tokenizer`` again when the caller has one."""
    state = ServerState(backend, config, tokenizer)

    def model_entry(name: str, created: int) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": created, "owned_by": "deepseek-recipe",
                "root": state.model_name, "max_model_len": state.codec.context_length,
                # Anthropic's model fields, so that either SDK can list and retrieve models.
                "type": "model", "display_name": name, "lifecycle": "active",
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created)),
                "max_input_tokens": state.codec.context_length}

    async def models(request: Request) -> Response:
        state.metrics.count_request("models", 200)
        created = int(time.time())
        data = [model_entry(name, created) for name in state.codec.model_names]
        return JSONResponse({"object": "list", "data": data, "has_more": False,
                             "first_id": data[0]["id"], "last_id": data[-1]["id"]})

    async def model(request: Request) -> Response:
        name = request.path_params["model"]
        if name not in state.codec.model_names:
            state.metrics.count_request("models", 404)
            err = model_not_found(name, state.codec.model_names)
            style: ErrorStyle = "anthropic" if "anthropic-version" in request.headers else "openai"
            return Response(err.encode(style), status_code=404, media_type="application/json")
        state.metrics.count_request("models", 200)
        return JSONResponse(model_entry(name, int(time.time())))

    async def health(request: Request) -> Response:
        ok = state.started and backend.health()
        return JSONResponse({"status": "ok" if ok else "unavailable"}, status_code=200 if ok else 503)

    async def metrics(request: Request) -> Response:
        q = state.admission
        text = state.metrics.render(q.requests, q.tokens, state.running, q.rejected, backend.stats(),
                                    state.started and backend.health())
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def not_found(request: Request, exc: Exception) -> Response:
        style: ErrorStyle = "anthropic" if request.url.path.startswith("/v1/messages") else "openai"
        err = APIError(404, f"no route {request.method} {request.url.path}", "invalid_request_error", "not_found")
        return Response(err.encode(style), status_code=404, media_type="application/json")

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        err = APIError(405, f"{request.method} is not allowed on {request.url.path}", "invalid_request_error",
                       "method_not_allowed")
        return Response(err.encode("openai"), status_code=405, media_type="application/json")

    async def start_backend() -> None:
        """Load or connect the backend; the socket is open meanwhile and ``/health`` answers 503."""
        try:
            await backend.start()
        except Exception:  # noqa: BLE001 - reported, and /health stays 503
            logger.exception("the backend failed to start")
            return
        # A fleet backend learns its model's name and context length from the fleet server.
        name = config.served_model_name or backend.model_name
        context = backend.max_model_len or config.max_model_len
        if (name, context) != (state.model_name, state.codec.context_length):
            state.model_name = name
            state.codec.set_served_model(name, context)
        if config.freeze_startup_heap:
            # What loading left (the model, the tokenizer, the imported modules) lives as long as the server:
            # out of the collector's sight, the collections that serving triggers scan only what came later.
            gc.collect()
            gc.freeze()
        state.started = True

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        starting = asyncio.ensure_future(start_backend())
        try:
            yield
        finally:
            state.started = False
            if config.freeze_startup_heap:
                gc.unfreeze()
            if not starting.done():
                starting.cancel()
                with contextlib.suppress(BaseException):
                    await starting
            await backend.aclose()

    routes = [
        Route(CHAT.path, GenerateEndpoint(state, CHAT), methods=["POST"]),
        Route(RESPONSES.path, GenerateEndpoint(state, RESPONSES), methods=["POST"]),
        Route(MESSAGES.path, GenerateEndpoint(state, MESSAGES), methods=["POST"]),
        Route(COUNT_TOKENS.path, CountTokensEndpoint(state, COUNT_TOKENS), methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model:path}", model, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    app = _ServerApp(routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: method_not_allowed})
    app.direct = {route.path: route.app for route in routes[:4]}
    app.state.server = state
    return app
