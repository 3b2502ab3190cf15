"""A small stand-in for the ``deepseek_recipe`` API, used to test the protocol wiring.

It keeps the real call shapes (request classes, ``convert``, encodings, stream
processor, accumulators) with trivial behaviour: one character per token over a
97-character alphabet, the prompt is ``[0] + chars of the last message``, the
response object reports the decoded text, the finish reason, usage and logprobs.
"""

from __future__ import annotations

import json
import string
import types

ALPHABET = (string.ascii_letters + string.digits + string.punctuation + " " + "äöüßéèêàçñ")[:97]
assert len(set(ALPHABET)) == 97
MODELS = {"DeepSeek-V4-Pro": "v4", "DeepSeek-V4.1-Flash": "v41"}


class ConversionError(Exception):
    def __init__(self, message: str, status_code: int = 400) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                          "code": "invalid_request_error"}})


class Tokenizer:
    loaded_from: list[str] = []

    @staticmethod
    def from_file(path: str) -> "Tokenizer":
        Tokenizer.loaded_from.append(path)
        return Tokenizer()

    def encode(self, text: str) -> list[int]:
        return [ALPHABET.index(c) for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(ALPHABET[i] for i in ids)


class ConversionOptions:
    pass


class ModelVersion:
    DeepseekV4Pro = "v4"
    DeepseekV41Flash = "v41"


class _Encoding:
    marker: list[int] = []

    def __init__(self) -> None:
        self.tok = None

    def with_tokenizer(self, tok: Tokenizer) -> "_Encoding":
        enc = type(self)()
        enc.tok = tok
        return enc

    def encode(self, conversation) -> list[int]:
        text = conversation.messages[-1].content
        if "\N{SNOWMAN}" in text:
            raise RuntimeError("failed to encode conversation: unencodable text")
        return [0] + self.marker + self.tok.encode(text)


class DeepseekV4Encoding(_Encoding):
    marker = [2]


class DeepseekV41Encoding(_Encoding):
    marker = [3]


class InferenceFinishReason:
    Stop = "stop"
    Length = "length"


class PromptUsage:
    def __init__(self, *, prompt_tokens: int = 0, prompt_cache_hit_tokens: int = 0) -> None:
        self.prompt_tokens, self.prompt_cache_hit_tokens = prompt_tokens, prompt_cache_hit_tokens


class InferenceChunk:
    def __init__(self, kind, **kw) -> None:
        self.kind, self.__dict__["data"] = kind, kw

    ready = staticmethod(lambda prompt_usage=None: InferenceChunk("ready", prompt_usage=prompt_usage))
    tokens = staticmethod(lambda ids, logprobs=None: InferenceChunk("tokens", ids=list(ids), logprobs=logprobs))
    finish = staticmethod(lambda reason: InferenceChunk("finish", reason=reason))


class _Request:
    fields = ("messages",)

    def __init__(self, body) -> None:
        if isinstance(body, (str, bytes)):
            try:
                body = json.loads(body)
            except ValueError as err:
                raise ValueError(f"invalid JSON request: {err}") from None
        for f in ("model",) + self.fields:
            if f not in body:
                raise ValueError(f"invalid request body: missing field `{f}`")
        self.body, self.consumed = body, False

    @property
    def model(self) -> str:
        return self.body["model"]

    def convert(self, options):
        b = self.body
        if b["model"] not in MODELS:
            raise ConversionError(f"unsupported model {b['model']}")
        text = b["input"] if "input" in b else b["messages"][-1]["content"]
        message = types.SimpleNamespace(content=text, image_sources=["img"] if b.get("image") else [])
        max_tokens = b.get("max_tokens", b.get("max_output_tokens"))
        return ConversationRequest(
            conversation=types.SimpleNamespace(messages=[message]),
            model_version=MODELS[b["model"]],
            inference_options=types.SimpleNamespace(
                max_tokens=max_tokens, temperature=b.get("temperature", 1.0), top_p=b.get("top_p", 1.0),
                seed=b.get("seed"), logprobs=b.get("logprobs", False), top_logprobs=b.get("top_logprobs")),
            parsing_options=types.SimpleNamespace(stop_sequences=b.get("stop", []), explode=b.get("explode")),
            api=type(self).__name__,
        )

    @classmethod
    def chunk_generator(cls, request, id, model):
        return types.SimpleNamespace(api=cls.__name__, id=id, model=model, extras={})


class ConversationRequest(types.SimpleNamespace):
    def resolve_max_tokens(self, prompt_tokens: int, context_limit: int) -> int:
        requested = self.inference_options.max_tokens
        if prompt_tokens + (requested or 0) > context_limit:
            raise ConversionError(f"maximum context length is {context_limit} tokens")
        return max(1, min(requested or 8, context_limit - prompt_tokens))


class ChatCompletionRequest(_Request):
    pass


class MessagesRequest(_Request):
    pass


class ResponsesRequest(_Request):
    fields = ("input",)

    def echo(self):
        return {"max_output_tokens": self.body.get("max_output_tokens")}

    def namespace_tool_map(self, options):
        return {"ns::f": ("ns", "f")}

    @classmethod
    def chunk_generator(cls, request, id, model):
        gen = super().chunk_generator(request, id, model)
        gen.with_namespace_tool_map = lambda m: (gen.extras.__setitem__("ns", m), gen)[1]
        gen.with_echo = lambda e: (gen.extras.__setitem__("echo", e), gen)[1]
        return gen


class StreamProcessor:
    """Decodes token chunks, applies stop sequences, and emits one dict per event."""

    def __init__(self, generator, options, tokenizer=None) -> None:
        self.gen, self.options, self.tok = generator, options, tokenizer
        self.text, self.finished, self.pushes = "", False, 0

    def push(self, chunk):
        if self.finished:
            raise RuntimeError("stream processor has finished")
        self.pushes += 1
        d = chunk.data
        if chunk.kind == "ready":
            usage = d["prompt_usage"]
            return [{"ready": {"prompt_tokens": usage.prompt_tokens, "cached": usage.prompt_cache_hit_tokens,
                               "api": self.gen.api, "extras": self.gen.extras}}]
        if chunk.kind == "tokens":
            if self.options.explode is not None and self.pushes > self.options.explode:
                raise RuntimeError("failed to decode tokens")
            if d["logprobs"] is not None and len(d["logprobs"]) != len(d["ids"]):
                raise RuntimeError("invalid log probabilities")
            self.text += self.tok.decode(d["ids"])
            events = [{"tokens": d["ids"], "logprobs": d["logprobs"]}]
            for stop in self.options.stop_sequences:
                if stop in self.text:
                    self.text = self.text[: self.text.index(stop)]
                    self.finished = True
                    events.append({"finish": "stop_sequence", "text": self.text})
            return events
        self.finished = True
        return [{"finish": d["reason"], "text": self.text}]

    def finish(self):
        if not self.finished:
            self.finished = True
            return [{"finish": "stop", "text": self.text}]
        return []


class _Response:
    def __init__(self, id, model, created, prompt_tokens, prompt_cache_hit_tokens) -> None:
        self.data = {"object": type(self).__name__, "id": id, "model": model, "created": created,
                     "prompt_tokens": prompt_tokens, "cached": prompt_cache_hit_tokens,
                     "completion_tokens": 0, "logprobs": []}

    def accumulate(self, event) -> None:
        if "tokens" in event:
            self.data["completion_tokens"] += len(event["tokens"])
            if event["logprobs"] is not None:
                self.data["logprobs"] += event["logprobs"]
        if "finish" in event:
            self.data["finish_reason"], self.data["content"] = event["finish"], event["text"]
        if "ready" in event:
            self.data["ready"] = event["ready"]

    def to_json(self) -> str:
        return json.dumps(self.data)


class ChatCompletionResponse(_Response):
    pass


class ResponsesResponse(_Response):
    pass


class MessagesResponse(_Response):
    pass
