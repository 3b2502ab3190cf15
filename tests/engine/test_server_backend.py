"""The engine's token backend for the HTTP server (``EngineBackend``) against a toy paged model: streamed chunks
equal offline generation, early closes and aborts free the engine's slot and blocks, bad requests are client
errors, a full queue is an overload, a dead engine fails every request instead of hanging, and the choices of an
``n > 1`` request share their prompt's cache blocks."""

from __future__ import annotations

import asyncio
import random
import threading

import pytest
from deepseek_engine import SamplingParams
from deepseek_engine.entrypoints.server_backend import EngineBackend, sampling_params
from deepseek_recipe.server.backend import (
    BackendOverloaded,
    BackendRequestError,
    BackendUnavailable,
    GenerateRequest,
    SamplingOptions,
    TokenChunk,
)
from serving_toy import ToyCausalLM, toy_llm

MODEL = ToyCausalLM(seed=0)
RNG = random.Random(7)
PROMPTS = [[RNG.randrange(MODEL.vocab_size) for _ in range(RNG.randint(3, 40))] for _ in range(12)]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=120))


def request(rid: str, prompt: list[int], **sampling) -> GenerateRequest:
    sampling.setdefault("max_tokens", 8)
    return GenerateRequest(rid, prompt, SamplingOptions(**sampling))


async def collect(backend: EngineBackend, req: GenerateRequest) -> list[TokenChunk]:
    return [chunk async for chunk in backend.generate(req)]


def joined(chunks: list[TokenChunk]) -> list[int]:
    return [t for c in chunks for t in c.token_ids]


def check_stream_shape(chunks: list[TokenChunk], prompt_len: int) -> None:
    assert chunks and all(c.finish_reason is None for c in chunks[:-1]) and chunks[-1].finish_reason is not None
    assert all(c.prompt_tokens == prompt_len for c in chunks)


class Gate:
    """Holds the engine loop inside ``llm.step`` until opened (to keep requests queued), or makes it raise."""

    def __init__(self, llm, fail: bool = False) -> None:
        self.open, self.entered, self.fail = threading.Event(), threading.Event(), fail
        step = llm.step

        def gated_step():
            self.entered.set()
            self.open.wait()
            if self.fail:
                raise RuntimeError("the accelerator fell off the bus")
            return step()

        llm.step = gated_step


def test_options_map_onto_sampling_params():
    p = sampling_params(SamplingOptions(max_tokens=5, temperature=0.5, top_p=0.8, top_k=-1, seed=-3,
                                        stop_token_ids=(4, 5), ignore_eos=True, logprobs=2))
    assert p == SamplingParams(temperature=0.5, top_p=0.8, top_k=0, seed=2**63 - 3, max_tokens=5,
                               stop_token_ids=[4, 5], ignore_eos=True, logprobs=2)
    assert sampling_params(SamplingOptions(max_tokens=1, seed=2**63 + 4)).seed == 4


@pytest.mark.parametrize("interval", [0.0, 60.0])
def test_concurrent_streams_equal_offline_generation(interval):
    """Every step's tokens delivered (``stream_interval=0``), or the steps' tokens held back between
    deliveries (an interval longer than the run: the first step's, then the rest once the engine is idle)."""
    options = [dict(temperature=0), dict(temperature=0.9, top_p=0.9, top_k=20, seed=11, logprobs=2),
               dict(temperature=1.3, seed=5, stop_token_ids=(3, 7, 11, 19, 23, 29, 31, 37, 41, 43))]
    cases = [(f"req-{i}", PROMPTS[i], options[i % 3]) for i in range(12)]
    offline = toy_llm(MODEL).generate([p for _, p, _ in cases],
                                      [sampling_params(SamplingOptions(max_tokens=8, **o)) for _, _, o in cases])

    async def main():
        backend = EngineBackend(lambda: toy_llm(MODEL, max_num_batched_tokens=64), "toy", stream_interval=interval)
        assert not backend.health()
        await backend.start()
        assert backend.health() and backend.max_model_len == 256
        results = await asyncio.gather(*(collect(backend, request(rid, p, **o)) for rid, p, o in cases))
        await backend.sync()
        stats = backend.stats()
        await backend.aclose()
        assert not backend.health()
        return results, stats

    results, stats = run(main())
    for (_, prompt, opts), chunks, want in zip(cases, results, offline):
        check_stream_shape(chunks, len(prompt))
        assert joined(chunks) == want.token_ids
        assert chunks[-1].finish_reason == want.finish_reason and chunks[-1].stop_token_id == want.stop_token_id
        if "logprobs" in opts:
            got = [lp for c in chunks for lp in c.logprobs]
            assert [top for _, top in got] == [lp.top for lp in want.logprobs]
        else:
            assert all(c.logprobs is None for c in chunks)
    assert any(c[-1].finish_reason == "stop" for c in results)
    if interval:
        assert max(len(c) for c in results) <= 2
    else:
        assert max(len(c) for c in results) > 1  # tokens arrived over several chunks
    assert stats.running_requests == stats.queued_requests == stats.queued_prompt_tokens == 0
    assert stats.free_kv_blocks == stats.total_kv_blocks > 0
    assert stats.extra["steps_total"] > 0
    assert stats.extra["generated_tokens_total"] == sum(len(joined(c)) for c in results)


@pytest.mark.parametrize("how", ["aclose", "cancel"])
def test_closing_the_iterator_frees_the_slot_and_blocks(how):
    async def main():
        llm = toy_llm(MODEL)
        backend = EngineBackend(llm, "toy")
        await backend.start()
        total = len(llm.block_manager.blocks)
        stream = backend.generate(request("gone", PROMPTS[0], temperature=0, max_tokens=200))
        first = await stream.__anext__()
        assert first.token_ids and first.finish_reason is None
        await backend.sync()
        busy = backend.stats()
        assert busy.running_requests == 1 and busy.free_kv_blocks < total
        if how == "aclose":
            await stream.aclose()
        else:
            async def consume():  # a handler task reading the stream, cancelled (its client went away)
                return [c async for c in stream]

            task = asyncio.ensure_future(consume())
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        await backend.sync()  # the abort is applied before the engine's next step
        stats = backend.stats()
        state = (llm.has_unfinished_requests(), llm.block_manager.num_free_blocks, stats.running_requests,
                 stats.free_kv_blocks, stats.extra["aborted_requests_total"])
        # The ID is free again.
        again = await collect(backend, request("gone", PROMPTS[1], temperature=0, max_tokens=3))
        await backend.aclose()
        return state, total, again

    (unfinished, free, running, free_gauge, aborted), total, again = run(main())
    assert not unfinished and free == free_gauge == total and running == 0 and aborted == 1
    assert joined(again) == MODEL.reference_greedy(PROMPTS[1], 3)


def test_abort_ends_the_stream_with_abort():
    async def main():
        llm = toy_llm(MODEL)
        backend = EngineBackend(llm, "toy")
        await backend.start()
        stream = backend.generate(request("a", PROMPTS[2], temperature=0, max_tokens=200))
        chunks = [await stream.__anext__()]
        await backend.abort("a")
        await backend.abort("nobody")  # no error
        chunks += [c async for c in stream]
        free = llm.block_manager.num_free_blocks
        await backend.aclose()
        return chunks, free, len(llm.block_manager.blocks)

    chunks, free, total = run(main())
    assert chunks[-1].finish_reason == "abort" and all(c.finish_reason is None for c in chunks[:-1])
    assert 0 < len(joined(chunks)) < 200 and free == total
    assert joined(chunks) == MODEL.reference_greedy(PROMPTS[2], len(joined(chunks)))


def test_bad_requests_are_client_errors_before_any_chunk():
    async def main():
        backend = EngineBackend(toy_llm(MODEL, max_model_len=32), "toy")
        await backend.start()
        errors = []
        for req in (request("long", list(range(32))), request("range", [1, MODEL.vocab_size]),
                    request("empty", []), request("top_p", [1, 2], top_p=0.0),
                    request("max", [1, 2], max_tokens=0), request("temp", [1, 2], temperature=-1.0)):
            with pytest.raises(BackendRequestError) as err:
                await backend.generate(req).__anext__()
            errors.append(str(err.value))
        slow = backend.generate(request("dup", [1, 2, 3], temperature=0, max_tokens=20))
        await slow.__anext__()
        with pytest.raises(BackendRequestError, match="already in use"):
            await backend.generate(request("dup", [4, 5])).__anext__()
        await slow.aclose()
        ok = await collect(backend, request("fine", list(range(30)), temperature=0, max_tokens=5))
        await backend.aclose()
        return errors, ok

    errors, ok = run(main())
    assert "context length" in errors[0] and "out of range" in errors[1] and "at least one token" in errors[2]
    assert "top_p" in errors[3] and "max_tokens" in errors[4] and "temperature" in errors[5]
    # A prompt one token short of the context gets that token and stops there.
    assert joined(ok) == MODEL.reference_greedy(list(range(30)), 2) and ok[-1].finish_reason == "length"


def test_a_full_queue_is_an_overload_and_unavailable_before_start():
    async def main():
        llm = toy_llm(MODEL)
        gate = Gate(llm)
        backend = EngineBackend(llm, "toy", max_queued_requests=2, max_queued_tokens=60, retry_after=3.0)
        with pytest.raises(BackendUnavailable):
            await backend.generate(request("early", [1, 2])).__anext__()
        await backend.start()
        first = asyncio.ensure_future(collect(backend, request("q1", PROMPTS[3][:30], temperature=0)))
        await asyncio.sleep(0)
        await asyncio.to_thread(gate.entered.wait)  # the engine is inside its step: q1 waits for its first chunk
        with pytest.raises(BackendOverloaded) as over_tokens:
            await backend.generate(request("q2", [1] * 31)).__anext__()
        second = asyncio.ensure_future(collect(backend, request("q2", [5] * 30, temperature=0)))
        await asyncio.sleep(0)
        with pytest.raises(BackendOverloaded) as over_count:
            await backend.generate(request("q3", [1])).__anext__()
        gate.open.set()
        results = await asyncio.gather(first, second)
        # The queue drained: new requests are taken again.
        third = await collect(backend, request("q3", [1], temperature=0, max_tokens=2))
        await backend.aclose()
        return over_tokens.value, over_count.value, results, third

    over_tokens, over_count, results, third = run(main())
    assert over_tokens.retry_after == over_count.retry_after == 3.0
    assert joined(results[0]) == MODEL.reference_greedy(PROMPTS[3][:30], 8)
    assert joined(results[1]) == MODEL.reference_greedy([5] * 30, 8) and len(joined(third)) == 2


def test_a_dead_engine_fails_pending_and_new_requests():
    async def main():
        llm = toy_llm(MODEL)
        gate = Gate(llm, fail=True)
        backend = EngineBackend(llm, "toy")
        await backend.start()
        pending = [asyncio.ensure_future(collect(backend, request(f"p{i}", PROMPTS[i]))) for i in range(3)]
        await asyncio.sleep(0)
        await asyncio.to_thread(gate.entered.wait)
        late = asyncio.ensure_future(collect(backend, request("late", PROMPTS[4])))  # queued behind the step
        await asyncio.sleep(0)
        gate.open.set()
        outcomes = await asyncio.gather(*pending, late, return_exceptions=True)
        healthy = backend.health()
        with pytest.raises(BackendUnavailable, match="stopped"):
            await backend.generate(request("after", [1, 2])).__anext__()
        await backend.sync()  # returns at once
        await backend.aclose()
        return outcomes, healthy

    outcomes, healthy = run(main())
    assert not healthy
    assert all(isinstance(o, BackendUnavailable) and "fell off the bus" in str(o) for o in outcomes)


def test_shutdown_ends_pending_requests_with_abort():
    async def main():
        backend = EngineBackend(toy_llm(MODEL), "toy")
        await backend.start()
        stream = backend.generate(request("long", PROMPTS[5], temperature=0, max_tokens=200))
        first = await stream.__anext__()
        rest = asyncio.ensure_future(collect_rest(stream))
        await backend.aclose()
        return first, await rest

    async def collect_rest(stream):
        return [c async for c in stream]

    first, rest = run(main())
    assert rest[-1].finish_reason == "abort" and len(first.token_ids + joined(rest)) < 200


def test_choices_of_an_n_request_share_the_prompt_blocks():
    """What the front end sends for ``n = 3``: three requests with one prompt and seeds seed + i, together."""
    prompt = PROMPTS[6] + PROMPTS[7]  # longer than two 16-token blocks
    opts = dict(temperature=1.1, top_p=0.95, max_tokens=8)
    alone = [toy_llm(MODEL).generate([prompt], sampling_params(SamplingOptions(seed=40 + i, **opts)))[0]
             for i in range(3)]

    async def main():
        backend = EngineBackend(toy_llm(MODEL), "toy")
        await backend.start()
        choices = await asyncio.gather(*(collect(backend, request(f"n-{i}", prompt, seed=40 + i, **opts))
                                         for i in range(3)))
        await backend.aclose()
        return choices

    choices = run(main())
    full_blocks = (len(prompt) - 1) // 16 * 16
    assert [c[0].cached_tokens for c in choices] == [0, full_blocks, full_blocks] and full_blocks > 0
    for chunks, want in zip(choices, alone):
        assert joined(chunks) == want.token_ids


def test_a_consumer_that_fell_behind_gets_the_piled_up_chunks_as_one():
    async def main():
        llm = toy_llm(MODEL)
        step = llm.step
        calls = []

        def failing_later():  # the second request's engine dies on its 6th step
            calls.append(1)
            if dying and len(calls) > 5:
                raise RuntimeError("out of memory")
            return step()

        llm.step = failing_later
        backend = EngineBackend(llm, "toy")
        await backend.start()
        dying = False
        stream = backend.generate(request("slow", PROMPTS[8], temperature=0, max_tokens=12, logprobs=1))
        first = await stream.__anext__()
        await backend.sync()  # (the gauges are fresh after a sync)
        while backend.stats().running_requests:  # the engine finishes while nobody reads
            await backend.sync()
        rest = [c async for c in stream]
        calls.clear()
        dying = True
        doomed = backend.generate(request("doomed", PROMPTS[9], temperature=0, max_tokens=50))
        got = [await doomed.__anext__()]
        while backend.health():
            await asyncio.sleep(0.01)
        with pytest.raises(BackendUnavailable, match="out of memory"):
            while True:  # the tokens made before the failure, then the error
                got.append(await doomed.__anext__())
        await backend.aclose()
        return first, rest, got

    first, rest, got = run(main())
    assert len(rest) == 1 and rest[0].finish_reason == "length"
    assert first.token_ids + rest[0].token_ids == MODEL.reference_greedy(PROMPTS[8], 12)
    assert len(first.logprobs) == len(first.token_ids) and len(rest[0].logprobs) == len(rest[0].token_ids)
    assert joined(got) == MODEL.reference_greedy(PROMPTS[9], 5) and len(got) <= 2
