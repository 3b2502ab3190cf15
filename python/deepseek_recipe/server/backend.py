"""The contract between the HTTP front end and whatever generates tokens.

The front end owns everything about protocols: it converts and encodes a request with the codec,
hands a backend one ``GenerateRequest`` per choice (``n > 1`` is ``n`` requests with seeds
``seed + i``, submitted together so that an engine can share their prompt's cached blocks), and
feeds the ``TokenChunk``s it gets back into the codec's ``StreamProcessor``. A backend knows token
IDs and sampling only: no JSON bodies, no text, no chunk generators.

Backends:

* the in-process engine: ``deepseek_engine.entrypoints.server_backend.EngineBackend``;
* a vLLM 0.33 ``--tokens-only`` server or an SGLang 0.5.23 server: ``deepseek_recipe.server.fleet``.

Contract (every backend, tested by the backend contract tests):

* ``generate`` returns an async iterator of ``TokenChunk``s; the last one, and only the last, has a
  ``finish_reason``. Token IDs arrive in order and each appears once. A generation stopped by a stop
  token ends with that token as the last ID and ``stop_token_id`` set.
* A request whose iterator is closed before its last chunk (``aclose()``, or the consuming task is
  cancelled, e.g. because the HTTP client went away) is aborted: the backend stops computing it and
  frees its resources. ``abort(request_id)`` does the same from outside; the iterator then ends with
  ``finish_reason == "abort"``.
* Capacity: ``generate`` raises ``BackendOverloaded`` (never queues without bound) when the backend's
  own queue is full; the front end answers 503 / 529 with ``Retry-After``. It raises
  ``BackendUnavailable`` when the backend cannot serve at all (engine died, fleet unreachable), and
  ``BackendRequestError`` for a request the backend refuses (prompt longer than the context, say):
  a client error, never a 500.
* ``health()`` is ``True`` once the backend can serve and until it no longer can.
* Output constraints: a backend with ``enforces_output_constraints`` gets the request's compiled
  ``OutputGrammar`` in ``GenerateRequest.grammar`` (``None``: unconstrained, or enforcement turned off)
  and generates every choice under a matcher of its own (``grammar.matcher()``); the others never get one.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

#: One generated token's log probability and its most likely alternatives ``(token_id, logprob)``,
#: the shape ``InferenceChunk.tokens`` takes.
TokenLogprobs = tuple[float, list[tuple[int, float]]]


@dataclass(frozen=True)
class SamplingOptions:
    """How one choice picks its tokens and when it stops (the backend's side of a request's options).

    ``temperature == 0`` is greedy. ``top_k <= 0`` and ``top_p == 1`` disable those filters.
    ``seed`` makes a choice reproducible whatever else shares the batch. ``logprobs = k`` reports
    the chosen token's log probability plus the ``k`` most likely alternatives (``None``: none).
    ``stop_token_ids`` end generation when sampled (the encoding's EOS is among them unless
    ``ignore_eos``); text stop sequences are the front end's job (the stream processor matches them
    and the front end then closes the iterator).
    """

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    logprobs: int | None = None


@dataclass(frozen=True)
class GenerateRequest:
    """One choice to generate: the prompt's token IDs, how to sample, and the grammar its output must follow
    (the request's ``deepseek_recipe.OutputGrammar``, shared by its choices; ``None``: unconstrained)."""

    request_id: str
    prompt_token_ids: Sequence[int]
    sampling: SamplingOptions
    grammar: Any = None


@dataclass
class TokenChunk:
    """What a backend produced since its previous chunk.

    ``prompt_tokens`` and ``cached_tokens`` (prompt tokens served from a prefix cache) are set on
    the first chunk and repeated on later ones. ``finish_reason`` is ``"stop"`` (EOS or a stop
    token, the last ID), ``"length"`` (``max_tokens`` or the context), ``"abort"`` or ``None``.
    ``logprobs`` has one entry per token ID when the request asked for them.
    """

    token_ids: list[int]
    logprobs: list[TokenLogprobs] | None = None
    finish_reason: str | None = None
    stop_token_id: int | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0


@dataclass(frozen=True)
class BackendStats:
    """Gauges for ``/metrics``; a backend reports what it knows (``None``: not known)."""

    running_requests: int | None = None
    queued_requests: int | None = None
    queued_prompt_tokens: int | None = None
    free_kv_blocks: int | None = None
    total_kv_blocks: int | None = None
    extra: dict[str, float] = field(default_factory=dict)


class BackendError(Exception):
    """A backend could not take or finish a request."""


class BackendOverloaded(BackendError):
    """The backend's queue is full; retry after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BackendUnavailable(BackendError):
    """The backend cannot serve now (not loaded yet, died, or unreachable)."""


class BackendRequestError(BackendError):
    """The backend refuses this request as given (a client error, answered with 400)."""


class TokenBackend(abc.ABC):
    """Token IDs in, token IDs out, asynchronously; see the module docstring for the contract."""

    #: The model name ``/v1/models`` lists and requests must name (``--served-model-name``).
    model_name: str
    #: The context length in tokens (prompt plus generated), when the backend knows it.
    max_model_len: int | None = None
    #: Whether the backend generates under ``GenerateRequest.grammar`` (the front end compiles grammars for
    #: such a backend only).
    enforces_output_constraints: bool = False

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Get ready to serve (load, connect); called once before the first request."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Stop serving and release everything; pending requests end with ``"abort"``."""

    @abc.abstractmethod
    def health(self) -> bool:
        """``True`` while the backend can serve."""

    @abc.abstractmethod
    def generate(self, request: GenerateRequest) -> AsyncIterator[TokenChunk]:
        """Start generating ``request`` (typically an ``async def`` generator). When the backend cannot
        take it, the first ``__anext__`` raises ``BackendOverloaded`` / ``BackendUnavailable`` /
        ``BackendRequestError``, before any chunk (the front end waits for the first chunk before it
        sends a status line)."""

    @abc.abstractmethod
    async def abort(self, request_id: str) -> None:
        """Stop ``request_id`` if it is still running (no error if it is not)."""

    def stats(self) -> BackendStats:
        """Current gauges for ``/metrics``."""
        return BackendStats()
