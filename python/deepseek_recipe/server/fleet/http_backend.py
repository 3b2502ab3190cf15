"""What the fleet backends share: one ``httpx.AsyncClient``, the SSE ``data:`` lines of a streamed
answer, the mapping of HTTP failures to the backend errors, and health polling."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from ..backend import (
    BackendOverloaded,
    BackendRequestError,
    BackendStats,
    BackendUnavailable,
    TokenBackend,
)


def _error_message(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")[:500]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or err)
        return str(data.get("message") or data.get("detail") or err)
    return str(data)[:500]


def status_error(status: int, body: bytes, retry_after: str | None) -> Exception:
    """The backend error for a fleet server's non-200 answer."""
    message = f"{status}: {_error_message(body)}"
    if status in (429, 503, 529):
        try:
            wait = float(retry_after) if retry_after else 1.0
        except ValueError:
            wait = 1.0
        return BackendOverloaded(f"the fleet server is overloaded ({message})", wait)
    if 400 <= status < 500 and status != 404:
        return BackendRequestError(f"the fleet server refused the request ({message})")
    return BackendUnavailable(f"the fleet server failed ({message})")


class HttpTokenBackend(TokenBackend):
    """A fleet server reached at ``base_url``; subclasses speak its generate and abort endpoints."""

    health_path = "/health"

    def __init__(self, base_url: str, model_name: str | None = None, *, client: httpx.AsyncClient | None = None,
                 health_interval_s: float = 5.0, timeout_s: float = 600.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model_name = model_name or "default"
        self._named = model_name is not None
        self.max_model_len = None
        self._client = client
        self._own_client = client is None
        self._timeout_s = timeout_s
        self._health_interval_s = health_interval_s
        self._healthy = False
        self._poller: asyncio.Task[None] | None = None
        self.running = 0

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self._timeout_s, connect=10.0),
                                             limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))
        return self._client

    async def start(self) -> None:
        await self.check_health()
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError, IndexError):
            r = await self.client.get(self.base_url + "/v1/models", timeout=10.0)
            if r.status_code == 200:
                model = r.json()["data"][0]
                if not self._named:
                    self.model_name = str(model["id"])
                if isinstance(model.get("max_model_len"), int):
                    self.max_model_len = model["max_model_len"]
        self._poller = asyncio.ensure_future(self._poll())

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self._health_interval_s)
            await self.check_health()

    async def check_health(self) -> bool:
        try:
            r = await self.client.get(self.base_url + self.health_path, timeout=5.0)
            self._healthy = r.status_code == 200
        except httpx.HTTPError:
            self._healthy = False
        return self._healthy

    async def aclose(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(BaseException):
                await self._poller
        if self._own_client and self._client is not None:
            await self._client.aclose()
        self._healthy = False

    def health(self) -> bool:
        return self._healthy

    def stats(self) -> BackendStats:
        return BackendStats(running_requests=self.running)

    async def post_json(self, path: str, body: dict[str, Any]) -> None:
        """A fire-and-check POST (abort calls): failures are swallowed, the request is gone anyway."""
        with contextlib.suppress(httpx.HTTPError):
            await self.client.post(self.base_url + path, json=body, timeout=10.0)

    async def stream_events(self, path: str, body: dict[str, Any],
                            headers: dict[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        """POST ``body`` and yield each ``data:`` JSON object of the streamed answer until ``[DONE]``."""
        try:
            async with self.client.stream("POST", self.base_url + path, json=body, headers=headers) as r:
                if r.status_code != 200:
                    raise status_error(r.status_code, await r.aread(), r.headers.get("retry-after"))
                self._healthy = True
                async for line in r.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    try:
                        event = json.loads(data)
                    except ValueError:
                        raise BackendUnavailable(f"the fleet server sent a frame that is not JSON: {data[:200]}") \
                            from None
                    if not isinstance(event, dict):
                        raise BackendUnavailable(f"the fleet server sent a frame that is not an object: {data[:200]}")
                    if "error" in event and not event.get("choices"):
                        err = event["error"]
                        message = err.get("message") if isinstance(err, dict) else err
                        code = err.get("code") if isinstance(err, dict) else None
                        if isinstance(code, int) and 400 <= code < 500:
                            raise BackendRequestError(f"the fleet server refused the request: {message}")
                        raise BackendUnavailable(f"the fleet server failed: {message}")
                    yield event
        except httpx.TimeoutException as err:
            raise BackendUnavailable(f"the fleet server timed out: {err}") from None
        except httpx.TransportError as err:
            self._healthy = False
            raise BackendUnavailable(f"the fleet server is unreachable: {err}") from None
