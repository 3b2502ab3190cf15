"""A request's work raced against its client's ``http.disconnect``.

The handler's work runs as a task while another task waits on the ASGI ``receive`` channel (the
body has been read by then, so the next message is the disconnect). When the client goes first,
the work is cancelled: its ``finally`` blocks close the backend iterators, which aborts the
requests on the backend (the engine frees the sequence and its KV blocks, a fleet server gets
its abort call).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")
Receive = Callable[[], Awaitable[dict[str, Any]]]


class ClientDisconnected(Exception):
    """The client closed the connection before the answer was complete."""


async def until_disconnect(receive: Receive, work: Awaitable[T]) -> T:
    """``await work`` unless the client disconnects first (then ``ClientDisconnected``)."""
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while True:
            message = await receive()
            if message.get("type") == "http.disconnect":
                return

    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        watcher.cancel()
        with contextlib.suppress(BaseException):
            await task
        raise
    if task.done():
        watcher.cancel()
        with contextlib.suppress(BaseException):
            await watcher
        return task.result()
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
    raise ClientDisconnected()
