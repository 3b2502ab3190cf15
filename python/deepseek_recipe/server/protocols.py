"""The three generation APIs as data: which codec classes serve each one and how it answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import deepseek_recipe as dr
from deepseek_recipe import apis
from deepseek_recipe.apis import AnyApi

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


def _generation(api: AnyApi, error_style: ErrorStyle, sse_format: str) -> ApiSpec:
    """A generation API: names, classes and ID prefix from the codec's table (``deepseek_recipe.apis``), plus how
    the server answers it."""
    return ApiSpec(api.name, api.path, api.request, api.response, api.id_prefix, error_style,
                   dr.sse_done_message(sse_format))


CHAT = _generation(apis.CHAT_COMPLETIONS, "openai", "chat")
RESPONSES = _generation(apis.RESPONSES, "openai", "responses")
MESSAGES = _generation(apis.MESSAGES, "anthropic", "messages")
COUNT_TOKENS = ApiSpec("messages.count_tokens", "/v1/messages/count_tokens", dr.MessagesRequest, None, "",
                       "anthropic", None)
