"""Response side: a prepared request's choices run on a backend, and their token IDs become the
API's chunks (streamed as SSE frames) or one accumulated response.

Each choice has its own codec ``StreamProcessor`` fed with each backend chunk as it arrives (the
processor is incremental: nothing is re-parsed). A choice whose stop sequence matched, or whose
client went away, has its backend iterator closed, which aborts it on the backend.

``n > 1`` (Chat Completions only) runs ``n`` backend requests with seeds ``seed + i`` submitted
together; their chunks are re-indexed to choice ``i`` and, with ``include_usage``, one usage chunk
sums them at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import deepseek_recipe as dr

from .backend import (
    BackendOverloaded,
    BackendRequestError,
    BackendUnavailable,
    GenerateRequest,
    TokenBackend,
    TokenChunk,
)
from .errors import APIError, invalid_request, overloaded, unavailable
from .metrics import Metrics
from .prepare import Prepared, RequestCodec
from .protocols import CHAT, RESPONSES
from .sse import RESPONSE_OBJECT_EVENTS, add_cache_write_tokens, data_frame, event_frame

#: Between a request's ID and its choice index in the backend IDs of ``n > 1`` choices: a character no
#: request ID holds (``app.ServerState.request_id``), so a choice's ID is never another request's.
CHOICE_SEPARATOR = "#"
_FINISH = {"stop": dr.InferenceFinishReason.Stop, "length": dr.InferenceFinishReason.Length}


def backend_error(err: Exception, retry_after: int) -> APIError:
    """A backend's refusal in the API's terms (never a 500 for a client's request)."""
    if isinstance(err, BackendOverloaded):
        return overloaded(str(err) or "the backend is overloaded; retry later", max(int(err.retry_after), retry_after))
    if isinstance(err, BackendRequestError):
        return invalid_request(str(err))
    if isinstance(err, BackendUnavailable):
        return unavailable(str(err) or "the backend is not available")
    return APIError(502, f"the backend failed: {err}", "server_error", "backend_error")


class Choice:
    """One choice: its backend iterator and its stream processor."""

    def __init__(self, codec: RequestCodec, prep: Prepared, index: int, resp_id: str, created: int,
                 iterator: AsyncIterator[TokenChunk], accumulate: bool) -> None:
        api = prep.api
        gen = api.request_cls.chunk_generator(prep.conv, resp_id, prep.model)
        if prep.responses_extras is not None:
            echo, ns_map = prep.responses_extras
            gen = gen.with_namespace_tool_map(ns_map).with_echo(echo)
        self.prep, self.index, self.resp_id, self.created = prep, index, resp_id, created
        self.proc = dr.StreamProcessor(gen, prep.conv.parsing_options, codec.tokenizer)
        self.iterator = iterator
        self.accumulate = accumulate
        self.response: Any = None
        self.ended = False  # the backend sent its last chunk (or was aborted by us)
        self.generated = 0
        self.cached = 0
        self.late_cached = 0
        self.t_first: float | None = None
        self.t_last = 0.0

    def start(self, first: TokenChunk) -> list[Any]:
        self.cached = first.cached_tokens
        prompt = self.prep.prompt_tokens
        if self.accumulate:
            self.response = self.prep.api.response_cls(self.resp_id, self.prep.model, self.created, prompt, self.cached)
        usage = dr.PromptUsage(prompt_tokens=prompt, prompt_cache_hit_tokens=self.cached)
        return self._fold(self.proc.push(dr.InferenceChunk.ready(prompt_usage=usage)))

    def _fold(self, items: list[Any]) -> list[Any]:
        if self.response is not None:
            for item in items:
                self.response.accumulate(item)
        return items

    @property
    def done(self) -> bool:
        return self.proc.finished

    def push(self, chunk: TokenChunk) -> list[Any]:
        """Feed one backend chunk; after the last one (or a matched stop sequence) ``done``."""
        now = time.monotonic()
        ids = chunk.token_ids
        if ids:
            if self.t_first is None:
                self.t_first = now
            self.t_last = now
            self.generated += len(ids)
        lps = chunk.logprobs
        if chunk.stop_token_id is not None and ids and ids[-1] == chunk.stop_token_id:
            ids = ids[:-1]  # the end-of-turn token is not part of the answer
            lps = lps[:-1] if lps is not None else None
        items: list[Any] = []
        try:
            if ids and not self.proc.finished:
                items = self.proc.push(dr.InferenceChunk.tokens(ids, lps))
            if chunk.finish_reason is not None:
                self.ended = True
                self.late_cached = max(chunk.cached_tokens - self.cached, 0)  # a backend that knows them late
                if chunk.finish_reason == "abort":
                    raise unavailable("the backend aborted the request")
                if not self.proc.finished:
                    reason = _FINISH.get(chunk.finish_reason, dr.InferenceFinishReason.Stop)
                    items += self.proc.push(dr.InferenceChunk.finish(reason))
            if self.proc.finished or chunk.finish_reason is not None:
                items += self.proc.finish()
        except RuntimeError as err:  # token IDs the tokenizer does not know, logprobs that do not match
            raise APIError(502, f"the backend's output cannot be parsed: {err}", "server_error",
                           "backend_error") from None
        return self._fold(items)

    async def close(self, backend: TokenBackend, request_id: str) -> bool:
        """Abort the backend request if it has not ended; ``True`` when it had to be aborted."""
        if self.ended:
            return False
        self.ended = True
        aclose = getattr(self.iterator, "aclose", None)
        with contextlib.suppress(Exception):
            if aclose is not None:
                await aclose()
            else:
                await backend.abort(request_id)
        return True


class Generation:
    """One HTTP request's choices from submission to the last frame."""

    def __init__(self, backend: TokenBackend, codec: RequestCodec, metrics: Metrics, prep: Prepared,
                 request_id: str, arrival: float, retry_after: int) -> None:
        self.backend, self.codec, self.metrics, self.prep = backend, codec, metrics, prep
        self.request_id, self.arrival, self.retry_after = request_id, arrival, retry_after
        self.created = int(time.time())
        self.resp_id = prep.api.id_prefix + request_id.replace("-", "")
        self.request_ids = [request_id] if prep.n == 1 else \
            [f"{request_id}{CHOICE_SEPARATOR}{i}" for i in range(prep.n)]
        self.choices: list[Choice] = []
        self.firsts: list[TokenChunk] = []
        self.events = 0  # Responses events sent (the next one's sequence_number)
        self._usage: list[dict[str, Any] | None] = [None] * prep.n
        self._closed = False

    # -- submission ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Submit every choice and wait for each one's first chunk (``APIError`` when refused)."""
        prep = self.prep
        accumulate = not prep.stream or self.codec.reasoning is not None
        for i, rid in enumerate(self.request_ids):
            request = GenerateRequest(rid, prep.prompt_ids, prep.choice_sampling(i), prep.grammar)
            iterator = self.backend.generate(request)
            self.choices.append(Choice(self.codec, prep, i, self.resp_id, self.created, iterator, accumulate))
        try:
            if len(self.choices) == 1:
                self.firsts = [await self.choices[0].iterator.__anext__()]
            else:
                self.firsts = list(await asyncio.gather(*(c.iterator.__anext__() for c in self.choices)))
        except StopAsyncIteration:
            raise APIError(502, "the backend ended the request without a chunk", "server_error",
                           "backend_error") from None
        except (BackendOverloaded, BackendRequestError, BackendUnavailable) as err:
            raise backend_error(err, self.retry_after) from None
        except (OSError, RuntimeError, ValueError) as err:
            raise backend_error(err, self.retry_after) from None
        first = self.firsts[0]
        self.metrics.prompt_tokens += prep.prompt_tokens
        self.metrics.cached_tokens += first.cached_tokens
        self.metrics.session_reused_tokens += prep.reused_tokens
        self.metrics.session_encoded_tokens += len(prep.prompt_ids)
        self.metrics.restored_reasoning += prep.restored

    async def close(self) -> None:
        """Abort whatever is still running (client gone, error, stop sequence)."""
        if self._closed:
            return
        self._closed = True
        aborted = False
        for choice, rid in zip(self.choices, self.request_ids):
            aborted |= await choice.close(self.backend, rid)
        if aborted:
            self.metrics.aborted += 1
        self._observe()

    def _observe(self) -> None:
        firsts = [c.t_first for c in self.choices if c.t_first is not None]
        if firsts:
            self.metrics.ttft.observe(min(firsts) - self.arrival)
        self.metrics.cached_tokens += self.choices[0].late_cached if self.choices else 0
        for c in self.choices:
            self.metrics.generation_tokens += c.generated
            if c.t_first is not None and c.generated > 1:
                self.metrics.tpot.observe((c.t_last - c.t_first) / (c.generated - 1))

    # -- the choices' items ----------------------------------------------------------------------
    async def _choice_items(self, choice: Choice, first: TokenChunk) -> AsyncIterator[list[Any]]:
        opening: list[Any] | None = choice.start(first)  # goes out with the first tokens' items (one frame)
        chunk: TokenChunk | None = first
        while chunk is not None:
            try:
                items = choice.push(chunk)
            except APIError:
                if opening:
                    yield opening
                raise
            if opening:
                items = opening + items
                opening = None
            if items:
                yield items
            if choice.done or choice.ended:
                break
            try:
                chunk = await choice.iterator.__anext__()
            except StopAsyncIteration:
                choice.ended = True
                chunk = TokenChunk([], finish_reason="stop")
            except (BackendOverloaded, BackendRequestError, BackendUnavailable, OSError, RuntimeError,
                    ValueError) as err:
                choice.ended = True
                raise backend_error(err, self.retry_after) from None
        if not choice.ended:  # a stop sequence matched: stop generating
            await choice.close(self.backend, self.request_ids[choice.index])
        self._remember(choice)

    def _remember(self, choice: Choice) -> None:
        if self.codec.reasoning is not None and choice.response is not None:
            self.codec.reasoning.remember_response(self.prep.api.name, json.loads(choice.response.to_json()))

    async def items(self) -> AsyncIterator[tuple[int, list[Any]]]:
        """``(choice index, items)`` as they come, all choices interleaved."""
        if len(self.choices) == 1:
            async for items in self._choice_items(self.choices[0], self.firsts[0]):
                yield 0, items
            return
        queue: asyncio.Queue[tuple[int, list[Any] | BaseException | None]] = asyncio.Queue()

        async def pump(choice: Choice, first: TokenChunk) -> None:
            try:
                async for items in self._choice_items(choice, first):
                    await queue.put((choice.index, items))
                await queue.put((choice.index, None))
            except Exception as err:  # noqa: BLE001 - handed to the consumer
                await queue.put((choice.index, err))

        tasks = [asyncio.ensure_future(pump(c, f)) for c, f in zip(self.choices, self.firsts)]
        try:
            remaining = len(tasks)
            while remaining:
                index, got = await queue.get()
                if got is None:
                    remaining -= 1
                elif isinstance(got, BaseException):
                    raise got
                else:
                    yield index, got
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(BaseException):
                    await t

    # -- streaming -------------------------------------------------------------------------------
    async def frames(self) -> AsyncIterator[tuple[bytes, bool]]:
        """The SSE frames as they come, each with whether it is the last (known for one choice only)."""
        if self.prep.n == 1:  # the choice's items straight from its generator (no re-indexing, one level less)
            choice = self.choices[0]
            fix_responses = self.prep.api is RESPONSES and self.codec.config.responses_cache_write_tokens
            async for items in self._choice_items(choice, self.firsts[0]):
                self.events += len(items)
                if fix_responses:
                    yield b"".join(self._responses_frame(item) for item in items), choice.done or choice.ended
                else:
                    yield b"".join([item.to_sse().encode() for item in items]), choice.done or choice.ended
            return
        async for index, items in self.items():
            out = []
            for item in items:
                frame = self._reindexed_chat_frame(index, item)
                if frame:
                    out.append(frame)
            self.events += len(items)
            if out:
                yield b"".join(out), False
        if self.prep.include_usage:
            yield data_frame(json.dumps(self._usage_chunk(), ensure_ascii=False)), True

    @staticmethod
    def _responses_frame(item: Any) -> bytes:
        """A Responses event's frame, with ``cache_write_tokens`` in the usage of those that carry the response."""
        if item.type not in RESPONSE_OBJECT_EVENTS:
            return item.to_sse().encode()
        event = json.loads(item.to_json())
        add_cache_write_tokens(event.get("response"))
        return event_frame(item.type, json.dumps(event, ensure_ascii=False))

    def _reindexed_chat_frame(self, index: int, item: Any) -> bytes:
        chunk = json.loads(item.to_json())
        for c in chunk.get("choices") or []:
            c["index"] = index
        if chunk.get("usage") is not None:
            self._usage[index] = chunk["usage"]
            chunk["usage"] = None
            if not chunk.get("choices"):
                return b""
        return data_frame(json.dumps(chunk, ensure_ascii=False))

    def _usage_chunk(self) -> dict[str, Any]:
        usage = merge_usage([u for u in self._usage if u is not None])
        return {"id": self.resp_id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.prep.model, "system_fingerprint": None, "choices": [], "usage": usage}

    # -- one response ----------------------------------------------------------------------------
    async def complete(self) -> dict[str, Any]:
        async for _ in self.items():
            pass
        responses = [json.loads(c.response.to_json()) for c in self.choices]
        if self.prep.api is RESPONSES and self.codec.config.responses_cache_write_tokens:
            add_cache_write_tokens(responses[0])
        if len(responses) == 1:
            return responses[0]
        assert self.prep.api is CHAT
        merged = dict(responses[0], choices=[])
        for i, r in enumerate(responses):
            for c in r.get("choices") or []:
                c["index"] = i
                merged["choices"].append(c)
        merged["usage"] = merge_usage([r["usage"] for r in responses if r.get("usage")])
        return merged


def merge_usage(usages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Chat usage of ``n`` choices of one prompt: the prompt once, the completions summed."""
    if not usages:
        return None
    merged = json.loads(json.dumps(usages[0]))
    completion = sum(int(u.get("completion_tokens") or 0) for u in usages)
    reasoning = sum(int((u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0) for u in usages)
    merged["completion_tokens"] = completion
    merged["total_tokens"] = int(merged.get("prompt_tokens") or 0) + completion
    if isinstance(merged.get("completion_tokens_details"), dict):
        merged["completion_tokens_details"]["reasoning_tokens"] = reasoning
    return merged
