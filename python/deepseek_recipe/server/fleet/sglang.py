"""SGLang 0.5.23: ``POST /generate`` with ``input_ids`` and ``POST /abort_request``.

The request is SGLang's ``GenerateReqInput``: ``input_ids``, ``sampling_params``
(``max_new_tokens``, ``temperature``, ``top_p``, ``top_k``, ``stop_token_ids``, ``ignore_eos``,
``sampling_seed``), ``stream``, ``rid``, ``return_logprob`` / ``top_logprobs_num``. Streamed, each
``data:`` frame is ``{"output_ids", "meta_info"}`` (``text`` too unless the server skips the
tokenizer); by default ``output_ids`` is the whole output so far, with ``--incremental-streaming-output``
only the new IDs (told apart by ``meta_info.completion_tokens``). ``meta_info`` carries
``prompt_tokens``, ``cached_tokens``, ``completion_tokens``, ``finish_reason``
(``{"type": "stop" | "length" | "abort", "matched": ...}``) and, when asked,
``output_token_logprobs`` (``[logprob, token_id, text]``) and ``output_top_logprobs``. A stop
token SGLang trimmed from ``output_ids`` is put back as the last ID (the backend contract).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..backend import BackendUnavailable, GenerateRequest, TokenChunk, TokenLogprobs
from .http_backend import HttpTokenBackend


class SglangBackend(HttpTokenBackend):
    """An SGLang server."""

    def body(self, request: GenerateRequest) -> dict[str, Any]:
        s = request.sampling
        params: dict[str, Any] = {"max_new_tokens": s.max_tokens, "temperature": s.temperature, "top_p": s.top_p,
                                  "top_k": s.top_k if s.top_k > 0 else -1, "stop_token_ids": list(s.stop_token_ids),
                                  "ignore_eos": s.ignore_eos, "skip_special_tokens": False,
                                  "no_stop_trim": True}  # keep the stop token in output_ids
        if s.seed is not None:
            params["sampling_seed"] = s.seed
        body: dict[str, Any] = {"input_ids": list(request.prompt_token_ids), "sampling_params": params,
                                "stream": True, "rid": request.request_id}
        if s.logprobs is not None:
            body.update(return_logprob=True, top_logprobs_num=s.logprobs, logprob_start_len=-1)
        return body

    def generate(self, request: GenerateRequest) -> AsyncIterator[TokenChunk]:
        return self._generate(request)

    async def _generate(self, request: GenerateRequest) -> AsyncIterator[TokenChunk]:
        frames = _Frames(request)
        finished = False
        self.running += 1
        try:
            async for event in self.stream_events("/generate", self.body(request)):
                try:
                    chunk = frames.parse(event)
                except (TypeError, ValueError, KeyError, IndexError, AttributeError) as err:
                    raise BackendUnavailable(f"the SGLang server sent a malformed frame: {err!r}") from None
                if chunk.finish_reason is not None:
                    finished = True
                    yield chunk
                    return
                if chunk.token_ids:
                    yield chunk
            finished = True
            yield TokenChunk([], finish_reason="abort", prompt_tokens=len(request.prompt_token_ids))
        finally:
            self.running -= 1
            if not finished:
                await self.abort(request.request_id)

    async def abort(self, request_id: str) -> None:
        await self.post_json("/abort_request", {"rid": request_id})


class _Frames:
    """One request's frames: new IDs out of whole-output or incremental frames."""

    def __init__(self, request: GenerateRequest) -> None:
        self.request = request
        self.received: list[int] = []
        self.cumulative: bool | None = None  # SGLang's streaming mode, told from the second frame

    def parse(self, event: dict[str, Any]) -> TokenChunk:
        meta = event.get("meta_info") or {}
        out = [int(t) for t in event.get("output_ids") or []]
        finish, stop_id = _finish(meta.get("finish_reason"))
        seen = len(self.received)
        if self.cumulative is None and seen:
            if finish is None:  # a middle frame: the whole output so far, or only the new IDs
                self.cumulative = meta.get("completion_tokens") == len(out)
            else:
                self.cumulative = len(out) >= seen and out[:seen] == self.received
        whole = self.cumulative in (None, True)
        new = out[seen:] if whole else out
        lps = _logprobs(meta, seen if whole else 0, len(new)) if self.request.sampling.logprobs is not None else None
        self.received += new
        if finish == "stop" and isinstance(stop_id, int) and stop_id in self.request.sampling.stop_token_ids:
            if not new or new[-1] != stop_id:  # SGLang trimmed the stop token: put it back
                new.append(stop_id)
                if lps is not None:
                    lps.append((0.0, []))
        else:
            stop_id = None
        return TokenChunk(new, lps, finish, stop_id, int(meta.get("prompt_tokens") or 0),
                          int(meta.get("cached_tokens") or 0))


def _finish(reason: Any) -> tuple[str | None, Any]:
    if reason is None:
        return None, None
    kind = reason.get("type") if isinstance(reason, dict) else reason
    matched = reason.get("matched") if isinstance(reason, dict) else None
    if kind in ("stop", "length", "abort"):
        return str(kind), matched
    return "abort", None


def _logprobs(meta: dict[str, Any], start: int, count: int) -> list[TokenLogprobs] | None:
    chosen = meta.get("output_token_logprobs")
    if not isinstance(chosen, list):
        return None
    given = meta.get("output_top_logprobs")
    top = given if isinstance(given, list) else []
    out: list[TokenLogprobs] = []
    for i in range(start, start + count):
        if i >= len(chosen):
            return None
        alts = top[i] if i < len(top) and isinstance(top[i], list) else []
        out.append((float(chosen[i][0]), [(int(a[1]), float(a[0])) for a in alts]))
    return out
