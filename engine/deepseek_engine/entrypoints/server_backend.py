"""The HTTP server's token backend over the in-process engine (``deepseek_engine.LLM``).

One thread, the *engine loop*, owns the ``LLM``: it takes commands (add a request, abort one,
stop) from a thread-safe queue between model steps, steps while any request is unfinished and
sleeps on the queue otherwise. PyTorch releases the GIL inside its kernels, so the event loop
serving HTTP keeps running during a step.

*Delivery.* The loop thread hands the event loop one batch of ``TokenChunk``s, one per request
with new tokens, with a single ``call_soon_threadsafe``: after a step when the previous batch
went at least ``stream_interval`` seconds ago (20 ms: 50 updates a second per stream), and at
once when the engine runs out of work, a request failed or a client's abort was applied. Steps
faster than that (small models, CPU) send the tokens of several steps together, so the front
end's fixed cost per chunk (a task wakeup, a stream-processor push, an SSE frame, a socket
write, all under the GIL the engine's Python needs too) is paid once per interval rather than
once per token; steps slower than the interval (a real model) send every step's tokens as they
come. ``stream_interval=0`` sends after every step. Each request's async iterator reads its
chunks from its own ``_Stream`` (a list and a waiter), and hands a consumer that fell behind
everything that piled up as one chunk.

Requests are named by the front end's request ID (``LLM.add_request(request_id=...)``).
Closing a request's iterator early (``aclose()``, or its task cancelled when the HTTP client
goes away) or calling ``abort`` queues an abort; the loop thread applies it before its next step
(``LLM.abort_request``: the sequence leaves the scheduler and its cache blocks are freed).

If a step raises, the engine is dead: ``health()`` turns ``False``, every pending request ends
with ``BackendUnavailable`` and new ones are refused with it. Nothing here knows about
protocols, text or JSON: token IDs and sampling options in, token IDs out; a request's compiled output
grammar, when it carries one, becomes its ``SamplingParams.constraint``
(``deepseek_recipe.server.backend`` holds the contract).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from deepseek_recipe.server.backend import (
    BackendOverloaded,
    BackendRequestError,
    BackendStats,
    BackendUnavailable,
    GenerateRequest,
    SamplingOptions,
    TokenBackend,
    TokenChunk,
)

from deepseek_engine.core.sequence import Sequence
from deepseek_engine.llm import LLM, RequestOutput
from deepseek_engine.sampling_params import SamplingParams

log = logging.getLogger(__name__)

#: Seeds are reduced modulo this (the engine's seeds are 63-bit); ``seed + i`` of an ``n > 1``
#: request or a negative client seed stays a valid, deterministic seed.
SEED_MODULUS = 2**63


def sampling_params(options: SamplingOptions, grammar: Any = None) -> SamplingParams:
    """The engine's ``SamplingParams`` for a request's ``SamplingOptions`` (``ValueError`` if invalid) and its
    output grammar (a ``MatcherSource``: the engine makes the choice's matcher from it)."""
    return SamplingParams(
        temperature=options.temperature,
        top_p=options.top_p,
        top_k=max(0, options.top_k),
        seed=None if options.seed is None else options.seed % SEED_MODULUS,
        max_tokens=options.max_tokens,
        stop_token_ids=list(options.stop_token_ids),
        ignore_eos=options.ignore_eos,
        logprobs=options.logprobs,
        constraint=grammar,
    )


@dataclass(eq=False)
class _Stream:
    """One request between the event loop and the engine loop.

    ``arrived`` (chunks and errors handed over, not yet read) and ``waiter`` (the reader's future
    while it waits for them) live on the event loop only, like ``queued`` (no chunk yet, counted
    against the queue limits) and ``closed``; ``delivered`` (output tokens already sent) is the
    engine loop's. A plain list and one future rather than an ``asyncio.Queue``: the reader takes
    everything that arrived at once, and a hand-over is one append and at most one wakeup.
    """

    request_id: str
    prompt: list[int]
    params: SamplingParams
    arrived: list = field(default_factory=list)
    waiter: asyncio.Future | None = None
    delivered: int = 0
    queued: bool = True
    closed: bool = False

    def put(self, item: TokenChunk | BaseException) -> None:
        """Event loop: hand over one chunk or error, waking the reader if it waits."""
        self.arrived.append(item)
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def take(self) -> list[TokenChunk | BaseException]:
        """Event loop: everything handed over since the last ``take``, waiting for at least one item."""
        while not self.arrived:
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        items, self.arrived = self.arrived, []
        return items


def _joined(first: TokenChunk, then: TokenChunk) -> TokenChunk:
    """Two consecutive chunks of one request as one."""
    logprobs = None if first.logprobs is None or then.logprobs is None else first.logprobs + then.logprobs
    return TokenChunk(first.token_ids + then.token_ids, logprobs, then.finish_reason, then.stop_token_id,
                      then.prompt_tokens, then.cached_tokens)


#: Commands to the engine loop.
_ADD, _ABORT, _SYNC, _STOP = "add", "abort", "sync", "stop"


class EngineBackend(TokenBackend):
    """``TokenBackend`` over an ``LLM`` in this process (see the module docstring).

    ``llm`` is the engine or a function that builds it (called by ``start`` in a worker thread,
    so ``health()`` stays ``False`` while the checkpoint loads). ``max_queued_requests`` and
    ``max_queued_tokens`` bound the requests (and their prompt tokens) that wait for their first
    chunk; beyond them ``generate`` raises ``BackendOverloaded`` with ``retry_after`` seconds
    (``None``: no bound of that kind; a prompt is always taken when nothing waits).
    ``stream_interval`` (seconds) is the least time between two deliveries of new tokens while
    the engine is busy (the module docstring's *Delivery*).

    It enforces output constraints: each request's ``grammar`` gives its sequence a matcher of its own.
    """

    enforces_output_constraints = True

    def __init__(self, llm: LLM | Callable[[], LLM], model_name: str, *, max_queued_requests: int | None = None,
                 max_queued_tokens: int | None = None, retry_after: float = 1.0,
                 stream_interval: float = 0.02) -> None:
        if not stream_interval >= 0:
            raise ValueError(f"stream_interval must be >= 0 seconds, not {stream_interval}")
        self.model_name = model_name
        self._llm: LLM | None = llm if isinstance(llm, LLM) else None
        self._factory = None if isinstance(llm, LLM) else llm
        self.max_model_len = self._llm.max_model_len if self._llm is not None else None
        self.max_queued_requests = max_queued_requests
        self.max_queued_tokens = max_queued_tokens
        self.retry_after = retry_after
        self.stream_interval = stream_interval
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._commands: queue.SimpleQueue = queue.SimpleQueue()
        # Set under _lock by the engine loop when it stops; commands are only queued under _lock while unset.
        self._lock = threading.Lock()
        self._ended: BaseException | None = None
        # Event loop side: streams by request ID, from generate until the iterator ends.
        self._streams: dict[str, _Stream] = {}
        self._queued_requests = 0
        self._queued_tokens = 0
        # Engine loop side.
        self._live: dict[str, _Stream] = {}
        self._touched: list[tuple[_Stream, Sequence]] = []
        # Not yet delivered: requests with new tokens (their sequence), and last chunks or errors.
        self._pending: dict[_Stream, Sequence] = {}
        self._ready: list[tuple[_Stream, TokenChunk | BaseException]] = []
        self._last_delivery = 0.0
        self._stats = BackendStats()
        self._counters = {"steps_total": 0, "generated_tokens_total": 0,
                          "aborted_requests_total": 0}

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("EngineBackend.start() was called twice")
        self._loop = asyncio.get_running_loop()
        if self._llm is None:
            self._llm = await asyncio.to_thread(self._factory)
        self.max_model_len = self._llm.max_model_len
        self._publish_stats()
        self._thread = threading.Thread(target=self._run, name="deepseek-engine-loop", daemon=True)
        self._thread.start()

    async def aclose(self) -> None:
        if self._thread is None:
            return
        with self._lock:
            if self._ended is None:
                self._commands.put((_STOP,))
        await asyncio.to_thread(self._thread.join)

    def health(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._ended is None

    def stats(self) -> BackendStats:
        return self._stats

    async def sync(self) -> None:
        """Wait until the engine loop has applied every command sent so far (aborts included) and
        published its gauges; returns at once when the engine is not running."""
        done = asyncio.get_running_loop().create_future()
        with self._lock:
            if self._thread is None or self._ended is not None:
                return
            self._commands.put((_SYNC, done))
        await done

    # -- requests (event loop) ---------------------------------------------------------------------
    def _submit(self, request: GenerateRequest) -> _Stream:
        if not self.health():
            raise BackendUnavailable("the engine is not running" if self._ended is None
                                     else f"the engine has stopped: {self._ended}")
        rid = request.request_id
        if rid in self._streams:
            raise BackendRequestError(f"request ID {rid!r} is already in use by a running request")
        try:
            params = sampling_params(request.sampling, request.grammar)
            prompt = self._llm.check_prompt(request.prompt_token_ids)
        except (ValueError, TypeError) as err:
            raise BackendRequestError(str(err)) from None
        if self._queued_requests and (
            (self.max_queued_requests is not None and self._queued_requests >= self.max_queued_requests)
            or (self.max_queued_tokens is not None and self._queued_tokens + len(prompt) > self.max_queued_tokens)
        ):
            raise BackendOverloaded(f"{self._queued_requests} requests ({self._queued_tokens} prompt tokens) are "
                                    "waiting for the engine", retry_after=self.retry_after)
        stream = _Stream(rid, prompt, params)
        with self._lock:
            if self._ended is not None:
                raise BackendUnavailable(f"the engine has stopped: {self._ended}")
            self._commands.put((_ADD, stream))
        self._streams[rid] = stream
        self._queued_requests += 1
        self._queued_tokens += len(prompt)
        return stream

    def _unqueue(self, stream: _Stream) -> None:
        if stream.queued:
            stream.queued = False
            self._queued_requests -= 1
            self._queued_tokens -= len(stream.prompt)

    def _send_abort(self, request_id: str) -> None:
        with self._lock:
            if self._ended is None:
                self._commands.put((_ABORT, request_id))

    async def generate(self, request: GenerateRequest) -> AsyncIterator[TokenChunk]:
        stream = self._submit(request)
        finished = False
        try:
            while True:
                items = await stream.take()
                self._unqueue(stream)
                # A consumer that fell behind gets the chunks that piled up as one (fewer pushes and frames);
                # an error comes after the tokens made before it.
                chunk: TokenChunk | None = None
                for item in items:
                    if isinstance(item, BaseException):
                        if chunk is not None:
                            yield chunk
                        finished = True
                        raise item
                    chunk = item if chunk is None else _joined(chunk, item)
                    if item.finish_reason is not None:
                        break
                assert chunk is not None
                if chunk.finish_reason is not None:
                    finished = True
                yield chunk
                if finished:
                    return
        finally:
            self._unqueue(stream)
            stream.closed = True
            if self._streams.get(stream.request_id) is stream:
                del self._streams[stream.request_id]
            if not finished:  # closed early: the engine stops computing it
                self._send_abort(stream.request_id)

    async def abort(self, request_id: str) -> None:
        stream = self._streams.get(request_id)
        if stream is not None and not stream.closed:
            self._send_abort(request_id)

    def _deliver(self, batch: list[tuple[_Stream, TokenChunk | BaseException]]) -> None:
        """Event loop: hand each chunk to its stream (dropped for streams already closed)."""
        for stream, item in batch:
            if not stream.closed:
                stream.put(item)

    # -- the engine loop (its own thread) ----------------------------------------------------------
    def _post(self, batch: list) -> None:
        if batch:
            try:
                self._loop.call_soon_threadsafe(self._deliver, batch)
            except RuntimeError:  # the event loop is closed: nobody is listening any more
                pass

    def _run(self) -> None:
        llm = self._llm
        try:
            while True:
                if not self._apply_commands(block=not llm.has_unfinished_requests()):
                    break
                if llm.has_unfinished_requests():
                    self._step(llm)
        except BaseException as err:  # noqa: BLE001 - any failure ends the engine, and every request with it
            log.exception("the engine loop failed")
            self._end(err, BackendUnavailable(f"the engine has stopped: {err}"))
        else:
            self._end(RuntimeError("the engine was shut down"), None)

    def _apply_commands(self, block: bool) -> bool:
        """Run the queued commands (waiting for one when ``block``); ``False`` on stop."""
        try:
            command = self._commands.get() if block else self._commands.get_nowait()
        except queue.Empty:  # nothing sent since the last step
            return True
        batch: list = []
        syncs: list[asyncio.Future] = []
        try:
            while True:
                if command[0] == _STOP:
                    self._post(batch)
                    self._release(syncs)
                    return False
                if command[0] == _ADD:
                    self._add(command[1], batch)
                elif command[0] == _ABORT:
                    self._abort(command[1], batch)
                else:
                    syncs.append(command[1])
                command = self._commands.get_nowait()
        except queue.Empty:
            pass
        if batch:  # refusals and aborted requests' last chunks go at once (with whatever else waits)
            self._ready += batch
            self._deliver_pending()
        else:
            self._publish_stats()
        self._release(syncs)
        return True

    def _release(self, syncs: list[asyncio.Future]) -> None:
        for done in syncs:
            try:
                self._loop.call_soon_threadsafe(lambda f=done: f.done() or f.set_result(None))
            except RuntimeError:
                pass

    def _add(self, stream: _Stream, batch: list) -> None:
        def on_token(seq: Sequence) -> bool:
            self._touched.append((stream, seq))
            return False

        try:
            self._llm.add_request(stream.prompt, stream.params, on_token=on_token, request_id=stream.request_id)
        except (ValueError, TypeError) as err:
            batch.append((stream, BackendRequestError(str(err))))
            return
        self._live[stream.request_id] = stream

    def _abort(self, request_id: str, batch: list) -> None:
        stream = self._live.pop(request_id, None)
        out = self._llm.abort_request(request_id)
        if stream is not None:
            self._pending.pop(stream, None)  # its last chunk carries everything not yet delivered
        if stream is not None and out is not None:
            self._counters["aborted_requests_total"] += 1
            batch.append((stream, self._final_chunk(stream, out)))

    def _step(self, llm: LLM) -> None:
        finished = llm.step()
        touched, self._touched = self._touched, []
        done = {out.request_id for out in finished}
        for stream, seq in touched:
            if seq.request_id not in done:
                self._pending[stream] = seq
        for out in finished:
            stream = self._live.pop(out.request_id)
            self._pending.pop(stream, None)
            self._ready.append((stream, self._final_chunk(stream, out)))
        self._counters["steps_total"] += 1
        if not llm.has_unfinished_requests() or time.monotonic() - self._last_delivery >= self.stream_interval:
            self._deliver_pending()

    def _deliver_pending(self) -> None:
        """Hand the event loop every request's undelivered tokens (one chunk each) and last chunks."""
        batch, self._ready = self._ready, []
        batch += [(stream, self._progress_chunk(stream, seq)) for stream, seq in self._pending.items()]
        self._pending.clear()
        if batch:
            self._post(batch)
            self._last_delivery = time.monotonic()
        self._publish_stats()

    def _chunk(self, stream: _Stream, token_ids: list[int], logprobs: list | None, finish_reason: str | None,
               stop_token_id: int | None, prompt_tokens: int, cached_tokens: int) -> TokenChunk:
        """The chunk of ``stream``'s output tokens after those delivered (``delivered`` moves past them)."""
        start = stream.delivered
        lps = None if stream.params.logprobs is None or logprobs is None else \
            [(lp.logprob, lp.top) for lp in logprobs[start:]]
        stream.delivered = len(token_ids)
        self._counters["generated_tokens_total"] += len(token_ids) - start
        return TokenChunk(token_ids[start:], lps, finish_reason, stop_token_id, prompt_tokens, cached_tokens)

    def _progress_chunk(self, stream: _Stream, seq: Sequence) -> TokenChunk:
        return self._chunk(stream, seq.output_token_ids, seq.logprobs, None, None, seq.num_prompt_tokens,
                           seq.num_cached_tokens or 0)

    def _final_chunk(self, stream: _Stream, out: RequestOutput) -> TokenChunk:
        return self._chunk(stream, out.token_ids, out.logprobs, out.finish_reason, out.stop_token_id,
                           len(out.prompt_token_ids), out.num_cached_tokens)

    def _publish_stats(self) -> None:
        sched, blocks = self._llm.scheduler, self._llm.block_manager
        queued_tokens = sum(len(s) - s.num_computed_tokens for s in sched.waiting)
        queued_tokens += sum(max(0, s.num_prompt_tokens - s.num_computed_tokens) for s in sched.running)
        self._stats = BackendStats(
            running_requests=len(sched.running), queued_requests=len(sched.waiting),
            queued_prompt_tokens=queued_tokens, free_kv_blocks=blocks.num_free_blocks,
            total_kv_blocks=len(blocks.blocks),
            extra={**self._counters, "preemptions_total": sched.num_preemptions},
        )

    def _end(self, reason: BaseException, error: BackendUnavailable | None) -> None:
        """The engine loop stops: refuse new commands, then end every request it still holds or was sent
        (with ``error``, or as aborted on a clean shutdown)."""
        with self._lock:
            self._ended = reason
        batch: list = []
        pending = []
        while True:
            try:
                pending.append(self._commands.get_nowait())
            except queue.Empty:
                break
        streams = list(self._live.values()) + [c[1] for c in pending if c[0] == _ADD]
        self._release([c[1] for c in pending if c[0] == _SYNC])
        self._live.clear()
        batch += self._ready
        self._ready = []
        if error is not None:  # the tokens made before the failure, then the error
            batch += [(stream, self._progress_chunk(stream, seq)) for stream, seq in self._pending.items()]
        self._pending.clear()
        for stream in streams:
            if error is not None:
                batch.append((stream, error))
            else:
                out = self._llm.abort_request(stream.request_id)
                batch.append((stream, self._final_chunk(stream, out) if out is not None
                              else TokenChunk([], None, "abort")))
        self._post(batch)
        try:
            self._publish_stats()
        except Exception:  # noqa: BLE001 - a broken engine may not even report its gauges
            pass
