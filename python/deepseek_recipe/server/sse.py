"""Server-sent-event framing: what the codec's chunks become on the wire, and the frames the
server adds itself (the end of a stream, an error after the status line was sent).

OpenAI Chat chunks are unnamed ``data: …`` frames and the stream ends with ``data: [DONE]``;
Responses and Messages events are named by their ``type`` and have no end frame.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import APIError, ErrorStyle

MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

#: Responses events that carry the whole response object (and so its usage).
RESPONSE_OBJECT_EVENTS = frozenset({"response.created", "response.in_progress", "response.completed",
                                    "response.incomplete", "response.failed", "response.queued"})


def data_frame(data: str) -> bytes:
    return f"data: {data}\n\n".encode()


def event_frame(name: str, data: str) -> bytes:
    return f"event: {name}\ndata: {data}\n\n".encode()


def done_frame(done: str | None) -> bytes:
    """The codec's end-of-stream message (``sse_done_message``: a whole frame, or ``None``)."""
    return b"" if done is None else done.encode()


def add_cache_write_tokens(response: Any) -> None:
    """Responses usage: add ``input_tokens_details.cache_write_tokens = 0`` (the current ``openai``
    SDK's models require it; nothing is written to a cache on a client's behalf)."""
    usage = response.get("usage") if isinstance(response, dict) else None
    if isinstance(usage, dict):
        details = usage.get("input_tokens_details")
        if not isinstance(details, dict):
            details = usage["input_tokens_details"] = {"cached_tokens": 0}
        details.setdefault("cache_write_tokens", 0)


def error_frame(err: APIError, style: ErrorStyle, api: str, sequence_number: int) -> bytes:
    """An error after the stream started, in the API's own streaming shape."""
    if style == "anthropic":
        return event_frame("error", json.dumps(err.body("anthropic"), ensure_ascii=False))
    if api == "responses":
        return event_frame("error", json.dumps({"type": "error", "code": err.code or err.type, "message": err.message,
                                                "param": err.param, "sequence_number": sequence_number},
                                               ensure_ascii=False))
    return data_frame(json.dumps(err.body("openai"), ensure_ascii=False))
