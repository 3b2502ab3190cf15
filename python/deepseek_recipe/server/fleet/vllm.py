"""vLLM 0.33 ``vllm serve MODEL --tokens-only``: ``POST /inference/v1/generate`` and ``/abort_requests``.

The request is vLLM's ``GenerateRequest``: ``request_id``, ``token_ids``, ``sampling_params``
(its ``SamplingParams`` fields), ``stream`` and ``stream_options``. Streamed, each frame is a
``GenerateStreamResponse``: ``choices[{index, token_ids, finish_reason, logprobs}]`` carrying
the new token IDs (``logprobs.content[i]`` holds ``token`` spelled ``"token_id:N"``, ``logprob``
and ``top_logprobs``), then a usage frame with ``choices: []`` when ``include_usage`` is asked,
then ``data: [DONE]``. vLLM keeps the stop token as the last ID of a ``"stop"`` finish. vLLM
names the engine request ``generate-tokens-<request_id>``; an abort names both spellings. Prompt
cache hits are known only at the end (``usage.prompt_tokens_details.cached_tokens``, when the
server runs with ``--enable-prompt-tokens-details``): the last chunk carries them, after the
front end has written usage, so they show in ``/metrics`` but usage reports none. No ``model`` is
sent (the front end's served name may differ from the fleet server's).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..backend import BackendUnavailable, GenerateRequest, TokenChunk, TokenLogprobs
from .http_backend import HttpTokenBackend


def _token_id(spelling: Any) -> int:
    text = str(spelling)
    return int(text.split(":", 1)[1]) if text.startswith("token_id:") else -1


def parse_logprobs(logprobs: Any, count: int) -> list[TokenLogprobs] | None:
    if not isinstance(logprobs, dict) or not isinstance(logprobs.get("content"), list):
        return None
    out: list[TokenLogprobs] = []
    for entry in logprobs["content"][:count]:
        top = [(_token_id(t.get("token")), float(t.get("logprob", 0.0))) for t in entry.get("top_logprobs") or []]
        out.append((float(entry.get("logprob", 0.0)), top))
    return out if len(out) == count else None


class VllmBackend(HttpTokenBackend):
    """A vLLM ``--tokens-only`` server."""

    def sampling_params(self, request: GenerateRequest) -> dict[str, Any]:
        s = request.sampling
        params: dict[str, Any] = {"max_tokens": s.max_tokens, "temperature": s.temperature, "top_p": s.top_p,
                                  "top_k": s.top_k if s.top_k > 0 else -1, "stop_token_ids": list(s.stop_token_ids),
                                  "ignore_eos": s.ignore_eos, "skip_special_tokens": False, "detokenize": False}
        if s.seed is not None:
            params["seed"] = s.seed
        if s.logprobs is not None:
            params["logprobs"] = s.logprobs
        return params

    def generate(self, request: GenerateRequest) -> AsyncIterator[TokenChunk]:
        return self._generate(request)

    async def _generate(self, request: GenerateRequest) -> AsyncIterator[TokenChunk]:
        body = {"request_id": request.request_id, "token_ids": list(request.prompt_token_ids),
                "sampling_params": self.sampling_params(request), "stream": True,
                "stream_options": {"include_usage": True}}
        prompt = len(request.prompt_token_ids)
        stops = set(request.sampling.stop_token_ids)
        want_logprobs = request.sampling.logprobs is not None
        finished = False
        pending: TokenChunk | None = None  # the finish chunk waits for the usage frame (cached tokens)
        self.running += 1
        try:
            async for event in self.stream_events("/inference/v1/generate", body,
                                                  headers={"X-Request-Id": request.request_id}):
                choices = event.get("choices") or []
                if not choices:
                    usage = event.get("usage")
                    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
                    details = details if isinstance(details, dict) else {}
                    if pending is not None and isinstance(details.get("cached_tokens"), int):
                        pending.cached_tokens = details["cached_tokens"]
                    continue
                for choice in choices:
                    try:
                        chunk = _parse_choice(choice, prompt, want_logprobs, stops)
                    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as err:
                        raise BackendUnavailable(f"the vLLM server sent a malformed frame: {err!r}") from None
                    if chunk.finish_reason is not None:
                        pending = chunk
                    elif chunk.token_ids:
                        yield chunk
            if pending is None:
                pending = TokenChunk([], finish_reason="abort", prompt_tokens=prompt)
            finished = True
            yield pending
        finally:
            self.running -= 1
            if not finished:
                await self.abort(request.request_id)

    async def abort(self, request_id: str) -> None:
        await self.post_json("/abort_requests", {"request_ids": [request_id, f"generate-tokens-{request_id}"]})


def _parse_choice(choice: dict[str, Any], prompt: int, want_logprobs: bool, stops: set[int]) -> TokenChunk:
    ids = [int(t) for t in choice.get("token_ids") or []]
    lps = parse_logprobs(choice.get("logprobs"), len(ids)) if want_logprobs else None
    chunk = TokenChunk(ids, lps, _finish(choice.get("finish_reason")), None, prompt, 0)
    if chunk.finish_reason == "stop" and ids and ids[-1] in stops:
        chunk.stop_token_id = ids[-1]
    return chunk


def _finish(reason: Any) -> str | None:
    if reason is None:
        return None
    if reason in ("stop", "length", "abort"):
        return str(reason)
    return "abort"  # "error" and anything newer: the request did not complete
