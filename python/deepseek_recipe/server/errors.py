"""Errors a request can end with, and each API's envelope for them.

OpenAI-style APIs (Chat Completions, Responses, models) answer
``{"error": {"message", "type", "param", "code"}}``; Anthropic Messages answers
``{"type": "error", "error": {"type", "message"}}``. An overload answer carries ``Retry-After``:
503 for OpenAI-style APIs, 529 ``overloaded_error`` for Messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

ErrorStyle = Literal["openai", "anthropic"]

#: Anthropic's error ``type`` for each status it uses.
_ANTHROPIC_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 422: "invalid_request_error",
    429: "rate_limit_error", 500: "api_error", 503: "overloaded_error", 529: "overloaded_error",
}


@dataclass
class APIError(Exception):
    """An answer other than success: status, message and the OpenAI-style type/code/param."""

    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    param: str | None = None
    retry_after: int | None = None
    #: The codec's own error body (``ConversionError.body``), sent as is to OpenAI-style clients.
    openai_body: dict[str, Any] | None = field(default=None, repr=False)

    def __str__(self) -> str:
        return f"{self.status} {self.type}: {self.message}"

    def body(self, style: ErrorStyle) -> dict[str, Any]:
        if style == "anthropic":
            kind = "overloaded_error" if self.type == "overloaded" else \
                _ANTHROPIC_TYPES.get(self.status, "api_error" if self.status >= 500 else "invalid_request_error")
            return {"type": "error", "error": {"type": kind, "message": self.message}}
        if self.openai_body is not None:
            return self.openai_body
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def status_for(self, style: ErrorStyle) -> int:
        if self.type == "overloaded":
            return 529 if style == "anthropic" else 503
        return self.status

    def headers(self) -> dict[str, str]:
        return {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}

    def encode(self, style: ErrorStyle) -> bytes:
        return json.dumps(self.body(style), ensure_ascii=False).encode()


def invalid_request(message: str, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(400, message, "invalid_request_error", code, param)


def overloaded(message: str, retry_after: int) -> APIError:
    """The queue is full: 503 (OpenAI-style) or 529 (Messages), with ``Retry-After``."""
    return APIError(503, message, "overloaded", "server_overloaded", None, retry_after)


def model_not_found(model: str, accepted: list[str]) -> APIError:
    return APIError(404, f"The model `{model}` does not exist; this server serves {', '.join(accepted)}.",
                    "invalid_request_error", "model_not_found", "model")


def unavailable(message: str) -> APIError:
    return APIError(503, message, "server_error", "service_unavailable")


def from_conversion_error(err: Exception) -> APIError:
    """The codec's ``ConversionError`` (its ``status_code`` and OpenAI-style ``body``)."""
    status = int(getattr(err, "status_code", 400) or 400)
    body: Any = None
    try:
        body = json.loads(getattr(err, "body", "") or "null")
    except ValueError:
        pass
    info = body.get("error") if isinstance(body, dict) else None
    if not isinstance(info, dict):
        return APIError(status, str(err))
    return APIError(status, str(info.get("message") or err), str(info.get("type") or "invalid_request_error"),
                    info.get("code"), info.get("param"), openai_body=body)
