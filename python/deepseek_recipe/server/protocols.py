"""The three generation APIs as data: which codec classes serve each one and how it answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import deepseek_recipe as dr

from .errors import ErrorStyle


@dataclass(frozen=True)
class ApiSpec:
    """One API: its name in metrics, the codec's request/response classes, its ID prefix, its
    error envelope and the SSE message that ends its stream (``None``: none)."""

    name: str
    path: str
    request_cls: Any
    response_cls: Any
    id_prefix: str
    error_style: ErrorStyle
    sse_done: str | None


CHAT = ApiSpec("chat.completions", "/v1/chat/completions", dr.ChatCompletionRequest, dr.ChatCompletionResponse,
               "chatcmpl-", "openai", dr.sse_done_message("chat"))
RESPONSES = ApiSpec("responses", "/v1/responses", dr.ResponsesRequest, dr.ResponsesResponse, "resp_", "openai",
                    dr.sse_done_message("responses"))
MESSAGES = ApiSpec("messages", "/v1/messages", dr.MessagesRequest, dr.MessagesResponse, "msg_", "anthropic",
                   dr.sse_done_message("messages"))
COUNT_TOKENS = ApiSpec("messages.count_tokens", "/v1/messages/count_tokens", dr.MessagesRequest, None, "",
                       "anthropic", None)
