# Type stubs for `deepseek_recipe._native`, the PyO3 extension module built from
# `recipe-rs/python/src/`. The stub describes exactly what the module defines: every class,
# method, property, enum member, function and constant the package exports.
#
# Docstrings here mirror the Rust `///` doc comments of the bindings, which become `__doc__` at
# run time; `tests/python/test_api_docs.py` checks that the two agree (whitespace aside) and that
# every public class, method and property has one. `.ci/run` checks the signatures with
#
#     python -m mypy.stubtest deepseek_recipe._native
#
# which lists every name the module has and the stub lacks ("... is not present in stub"), every
# name the stub has and the module lacks ("... is not present at runtime"), and every signature,
# default, `@final` or `__all__` entry that disagrees. It cannot see parameter or return types
# (PyO3 records none at run time): `tests/python/test_stub_types.py` checks every property and
# return type here against real values, and `mypy --strict tests/typecheck/api_usage.py` (also in
# .ci/run) checks what a caller sees (overloads, `Optional`, `Literal`, enums).
#
# Adding a class (or a method, property, function, exception) to the module:
#   1. Write its doc comment in the binding (`///` above `#[pyclass]`, each `#[pymethods]` fn,
#      each `#[getter]`; `create_exception!` takes the doc as its last argument).
#   2. Add it here in the area it belongs to, with the same docstring, and its name to `__all__`
#      below (PyO3 fills the module's `__all__` with every name it adds). A PyO3 class is
#      `@final` unless declared `#[pyclass(subclass)]` (then `@disjoint_base`); its constructor
#      is `def __new__(cls, ...) -> Self` with the exact parameters (keyword-only after `*`,
#      defaults as in `#[pyo3(signature = ...)]`; where a default is not a plain literal, such as
#      `String::from("high")`, add `#[pyo3(text_signature = "(...)")]` so the run time shows it).
#      Properties are `@property` (plus `@x.setter` for a `#[setter]`), static methods
#      `@staticmethod`, enum members `ClassVar[<Enum>]`; a `#[pyclass(eq, eq_int)]` enum without
#      `hash` has `__hash__: ClassVar[None]`. Accept what the binding accepts (`Sequence[...]` for
#      a Rust `Vec`, `X | None` where `None` is allowed) and return what it returns (`list[...]`).
#   3. Export it from `python/deepseek_recipe/__init__.py` (import and `__all__`).
#   4. Build an instance of it in `tests/python/test_stub_types.py` (the test names any class
#      it has no instance of), then run the stubtest command above and
#      `pytest tests/python/test_api_docs.py tests/python/test_stub_types.py`.
# No stubtest allowlist is needed today. Should a genuine limit of PyO3's run-time introspection
# ever need one, pass `--allowlist FILE` in .ci/run with one commented entry per name.

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final, Generic, Literal, TypeAlias, TypeVar, final, overload

from typing_extensions import Self, disjoint_base

__all__ = [
    "AssistantMessage",
    "BytesImageSource",
    "CalcResizeError",
    "ChatCompletionChunk",
    "ChatCompletionChunkGenerator",
    "ChatCompletionRequest",
    "ChatCompletionResponse",
    "Conversation",
    "ConversationRequest",
    "ConversionError",
    "ConversionOptions",
    "DataUrlImageSource",
    "DeepseekV41Encoding",
    "DeepseekV4Encoding",
    "EncodingSession",
    "GrammarError",
    "GrammarMatcher",
    "IMAGE_SPECIAL_TOKEN_ID",
    "ImageError",
    "ImageInfo",
    "ImageQuota",
    "ImageResolver",
    "ImageSource",
    "InferenceChunk",
    "InferenceFinishReason",
    "InferenceOptions",
    "LatestReminderMessage",
    "Message",
    "MessagesChunkGenerator",
    "MessagesRequest",
    "MessagesResponse",
    "MessagesStreamEvent",
    "ModelVersion",
    "MultiModalData",
    "OpenCvImagePreprocessor",
    "OutputConstraint",
    "OutputGrammar",
    "ParsingOptions",
    "PreprocessOptions",
    "PromptUsage",
    "ReasoningContentBehavior",
    "RenderedPrompt",
    "ReqwestImageFetcher",
    "ResponsesChunkGenerator",
    "ResponsesEcho",
    "ResponsesRequest",
    "ResponsesResponse",
    "ResponsesStreamEvent",
    "SessionTurn",
    "SpecialToken",
    "SpecialTokens",
    "StreamProcessor",
    "SystemMessage",
    "ThinkingInitialStage",
    "Tokenizer",
    "ToolCall",
    "ToolDefinition",
    "ToolMessage",
    "UnsupportedSchemaError",
    "UrlImageSource",
    "UserMessage",
    "WebSearchBehavior",
    "__version__",
    "check_prompt_text",
    "check_token_ids",
    "sse_done_message",
]

__version__: str
IMAGE_SPECIAL_TOKEN_ID: Final = 129264

# A JSON value as Python objects: None, bool, int, float, str, list / tuple, dict with str keys.
# Typed `Any` rather than a recursive union because `list` and `dict` are invariant: a caller's
# `dict[str, str]` schema would not match `dict[str, JsonValue]`.
_Json: TypeAlias = Any
# A request body: JSON text as `str` or `bytes`, or the decoded JSON object.
_JsonText: TypeAlias = str | bytes
_JsonObject: TypeAlias = dict[str, Any]

_Role: TypeAlias = Literal["system", "user", "assistant", "tool", "latest_reminder"]
_ImageKind: TypeAlias = Literal["data_url", "url", "bytes"]
_ImageDetail: TypeAlias = Literal["low", "high", "original", "auto"]
_ToolChoice: TypeAlias = Literal["auto", "none", "required"]
_ReasoningEffort: TypeAlias = Literal["low", "high", "xhigh", "max"]
_ResponseFormat: TypeAlias = Literal["text", "json_object", "json_schema", "regex"]
_ConstraintKind: TypeAlias = Literal["json", "regex", "tool_call", "tool_call_required"]
_ChunkKind: TypeAlias = Literal["ready", "text", "tokens", "finish"]
# One `(logprob, [(token_id, logprob), ...])` per generated token: its own log probability and
# the most likely alternatives.
_TokenLogprobs: TypeAlias = tuple[float, Sequence[tuple[int, float]]]

# ---------------------------------------------------------------------------------------------
# Vocabulary: control tokens, the tokenizer, model versions, parser settings

@final
class SpecialToken:
    """A kind of control token.

    One member per token the templates know: `Bos`, `Eos`, `ThinkingStart`, `ThinkingEnd`,
    `System`, `User`, `Assistant`, `LatestReminder`, `Dsml`, `Image`, and the grounding pairs
    `Ref`/`RefEnd`, `Box`/`BoxEnd`, `Point`/`PointEnd`, `Polygon`/`PolygonEnd`. A member
    compares equal to its position in that list as an `int`.
    """

    Bos: ClassVar[SpecialToken]
    Eos: ClassVar[SpecialToken]
    ThinkingStart: ClassVar[SpecialToken]
    ThinkingEnd: ClassVar[SpecialToken]
    System: ClassVar[SpecialToken]
    User: ClassVar[SpecialToken]
    Assistant: ClassVar[SpecialToken]
    LatestReminder: ClassVar[SpecialToken]
    Dsml: ClassVar[SpecialToken]
    Image: ClassVar[SpecialToken]
    Ref: ClassVar[SpecialToken]
    RefEnd: ClassVar[SpecialToken]
    Box: ClassVar[SpecialToken]
    BoxEnd: ClassVar[SpecialToken]
    Point: ClassVar[SpecialToken]
    PointEnd: ClassVar[SpecialToken]
    Polygon: ClassVar[SpecialToken]
    PolygonEnd: ClassVar[SpecialToken]
    def __int__(self) -> int: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]
    def default_str(self) -> str:
        """The spelling this kind has in the released vocabulary."""

@final
class SpecialTokens:
    """The spelling of every control token; keywords override single spellings.

    A keyword left as `None` keeps the released spelling. Encodings, `ConversionOptions` and
    `ParsingOptions` take a table to render or parse with other spellings.
    """

    def __new__(
        cls,
        *,
        bos: str | None = None,
        eos: str | None = None,
        thinking_start: str | None = None,
        thinking_end: str | None = None,
        system: str | None = None,
        user: str | None = None,
        assistant: str | None = None,
        latest_reminder: str | None = None,
        dsml: str | None = None,
        image: str | None = None,
        ref: str | None = None,
        ref_end: str | None = None,
        box: str | None = None,
        box_end: str | None = None,
        point: str | None = None,
        point_end: str | None = None,
        polygon: str | None = None,
        polygon_end: str | None = None,
    ) -> Self: ...
    def token(self, token: SpecialToken) -> str:
        """The spelling of `token` in this table."""

@final
class ModelVersion:
    """The model a conversation targets.

    `DeepseekV4Pro` is rendered by `DeepseekV4Encoding`, `DeepseekV41Flash` by
    `DeepseekV41Encoding`. Conversion picks the version from the request's `model` through
    `ConversionOptions.model_versions_by_name`. Members are hashable.
    """

    DeepseekV4Pro: ClassVar[ModelVersion]
    DeepseekV41Flash: ClassVar[ModelVersion]
    def __int__(self) -> int: ...
    def __hash__(self) -> int: ...

@final
class ThinkingInitialStage:
    """Where output parsing begins in thinking mode.

    `ReasoningStart`: a new assistant turn, reasoning first (leading newlines dropped).
    `ReasoningContinuation`: a prefix continuation still inside its reasoning.
    `ContentContinuation`: a prefix continuation whose reasoning already ended. The two
    continuations keep leading newlines.
    """

    ReasoningStart: ClassVar[ThinkingInitialStage]
    ReasoningContinuation: ClassVar[ThinkingInitialStage]
    ContentContinuation: ClassVar[ThinkingInitialStage]
    def __int__(self) -> int: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]
    def starts_in_reasoning(self) -> bool:
        """Whether parsing starts inside reasoning content."""

@final
class ParsingOptions:
    """Settings for the output parser.

    Every setting is a read-write attribute. `ConversationRequest.parsing_options` holds the
    settings conversion derived from a request; a `StreamProcessor` copies them when built.
    """

    def __new__(
        cls,
        *,
        parse_tool_calls: bool = True,
        starts_in_tool_calls: bool = False,
        parse_json_output: bool = False,
        thinking_initial_stage: ThinkingInitialStage | None = None,
        stop_sequences: Sequence[str] | None = None,
        special_tokens: SpecialTokens | None = None,
    ) -> Self: ...
    @property
    def parse_tool_calls(self) -> bool:
        """Whether DSML tool-call blocks in the output become tool calls."""
    @parse_tool_calls.setter
    def parse_tool_calls(self, value: bool) -> None: ...
    @property
    def starts_in_tool_calls(self) -> bool:
        """Whether the prompt already opened the tool-call block (a required tool choice).

        Takes precedence over `thinking_initial_stage`.
        """
    @starts_in_tool_calls.setter
    def starts_in_tool_calls(self, value: bool) -> None: ...
    @property
    def parse_json_output(self) -> bool:
        """Whether the answer is reduced to its JSON value (fenced or bare).

        The prose around the value is replaced by single spaces.
        """
    @parse_json_output.setter
    def parse_json_output(self, value: bool) -> None: ...
    @property
    def thinking_initial_stage(self) -> ThinkingInitialStage | None:
        """Where parsing begins in thinking mode; `None` when thinking mode is off."""
    @thinking_initial_stage.setter
    def thinking_initial_stage(self, value: ThinkingInitialStage | None) -> None: ...
    @property
    def stop_sequences(self) -> list[str]:
        """Strings that end the answer where they appear in the output."""
    @stop_sequences.setter
    def stop_sequences(self, value: Sequence[str]) -> None: ...
    @property
    def special_tokens(self) -> SpecialTokens:
        """The control-token spellings the parser recognises (a copy)."""
    @special_tokens.setter
    def special_tokens(self, value: SpecialTokens) -> None: ...

@final
class Tokenizer:
    """A Hugging Face tokenizer (`tokenizer.json`).

    An encoding uses it, after `with_tokenizer`, to turn conversations into token IDs; a
    `StreamProcessor` uses it to decode `tokens` chunks.
    """

    @staticmethod
    def from_file(path: str) -> Tokenizer:
        """Load a `tokenizer.json` file."""
    @staticmethod
    def from_str(text: str) -> Tokenizer:
        """Load a tokenizer from the text of a `tokenizer.json` file."""
    @staticmethod
    def from_pretrained(identifier: str, revision: str | None = None, token: str | None = None) -> Tokenizer:
        """Load `tokenizer.json` of a Hub repository from the local Hugging Face cache.

        Nothing is downloaded: the file must already be in the cache (`HF_HUB_CACHE`,
        `HF_HOME/hub` or `~/.cache/huggingface/hub`).
        """
    def encode(self, text: str) -> list[int]:
        """Encode text with the full vocabulary (control-token spellings become their IDs); no BOS."""
    def decode(self, ids: Sequence[int]) -> str:
        """Decode token IDs to text; control tokens are kept as their spellings."""

# ---------------------------------------------------------------------------------------------
# Conversation model

@disjoint_base
class ImageSource:
    """Base class of image sources; only a placeholder is rendered for an image.

    Not constructible: build a `DataUrlImageSource`, `UrlImageSource` or `BytesImageSource`.
    Exactly one of `data_url`, `url` and `data` is set, as `kind` says.
    """

    @property
    def kind(self) -> _ImageKind:
        """`"data_url"`, `"url"` or `"bytes"`: which of the three sources this is."""
    @property
    def detail(self) -> _ImageDetail:
        """The requested detail level: `"low"`, `"high"`, `"original"` or `"auto"`."""
    @property
    def data_url(self) -> str | None:
        """The `data:` URL of a `DataUrlImageSource`, else `None`."""
    @property
    def url(self) -> str | None:
        """The external URL of a `UrlImageSource`, else `None`."""
    @property
    def data(self) -> bytes | None:
        """The encoded image of a `BytesImageSource`, else `None`."""
    @property
    def path(self) -> str:
        """Where the image sat in the request (e.g. `messages.0.content[1]`); may be empty."""

@final
class DataUrlImageSource(ImageSource):
    """An image given by a `data:` URL."""

    def __new__(cls, data_url: str, detail: _ImageDetail = "high", *, path: str = "") -> Self: ...

@final
class UrlImageSource(ImageSource):
    """An image given by an external URL."""

    def __new__(cls, url: str, detail: _ImageDetail = "high", *, path: str = "") -> Self: ...

@final
class BytesImageSource(ImageSource):
    """An image given as encoded bytes."""

    def __new__(cls, data: bytes | Sequence[int], detail: _ImageDetail = "high", *, path: str = "") -> Self: ...

@final
class ToolCall:
    """A tool call made by the assistant earlier in the conversation."""

    def __new__(cls, id: str, name: str, arguments: str) -> Self: ...
    @property
    def id(self) -> str:
        """The call's ID, which a later `ToolMessage.tool_call_id` refers to."""
    @property
    def name(self) -> str:
        """The name of the called tool."""
    @property
    def arguments(self) -> str:
        """The arguments string as given (meant to be a JSON object; not checked)."""

@final
class ToolDefinition:
    """A tool the model may call. `parameters` is kept exactly as given (no strict normalisation)."""

    def __new__(
        cls,
        name: str,
        description: str | None = None,
        parameters: _Json | None = None,
        strict: bool | None = None,
        defer_loading: bool = False,
    ) -> Self: ...
    @property
    def name(self) -> str:
        """The tool's name."""
    @property
    def description(self) -> str | None:
        """What the tool does, or `None`."""
    @property
    def parameters(self) -> _Json:
        """JSON Schema of the arguments."""
    @property
    def strict(self) -> bool | None:
        """The `strict` flag as given, or `None`."""
    @property
    def defer_loading(self) -> bool:
        """Whether the tool is declared for deferred loading."""

@disjoint_base
class Message:
    """Base class of every message. Role-specific properties read `None` / `False` / `[]` on other
    roles.

    Not constructible: build one of `SystemMessage`, `UserMessage`, `AssistantMessage`,
    `ToolMessage` or `LatestReminderMessage`.
    """

    @property
    def role(self) -> _Role:
        """`"system"`, `"user"`, `"assistant"`, `"tool"` or `"latest_reminder"`."""
    @property
    def content(self) -> str:
        """The message text."""
    @property
    def reasoning_content(self) -> str | None:
        """The reasoning of an assistant message, if it has any."""
    @property
    def tool_calls(self) -> list[ToolCall] | None:
        """The tool calls of an assistant message, if it has any."""
    @property
    def tool_call_id(self) -> str | None:
        """The call a tool message answers, if given."""
    @property
    def image_sources(self) -> list[ImageSource]:
        """The images of a system, user or tool message, in placeholder order."""
    @property
    def prefix(self) -> bool:
        """Whether an assistant message is a partial turn that generation continues."""

@final
class SystemMessage(Message):
    """A system message, optionally announcing updated tool schemas (rendered by V4.1 only)."""

    def __new__(
        cls,
        content: str,
        image_sources: Sequence[ImageSource] | None = None,
        tools: Sequence[ToolDefinition] | None = None,
        *,
        image_token: str | None = None,
    ) -> Self: ...
    @property
    def tools(self) -> list[ToolDefinition] | None:
        """The tool schemas this message announces, or `None`."""

@final
class UserMessage(Message):
    """A user message. Built from Python, the first occurrences of `image_token` (one per image
    source) are the image placeholders; a message produced by request conversion carries the
    placeholder positions of its image parts instead, so text that spells the image token is
    plain."""

    def __new__(
        cls,
        content: str,
        image_sources: Sequence[ImageSource] | None = None,
        *,
        image_token: str | None = None,
    ) -> Self: ...

@final
class AssistantMessage(Message):
    """An assistant turn from the history, or (with `prefix=True`) a partial turn to continue."""

    def __new__(
        cls,
        content: str,
        reasoning_content: str | None = None,
        tool_calls: Sequence[ToolCall] | None = None,
        prefix: bool = False,
    ) -> Self: ...

@final
class ToolMessage(Message):
    """The result of a tool call."""

    def __new__(
        cls,
        content: str,
        tool_call_id: str | None = None,
        image_sources: Sequence[ImageSource] | None = None,
        *,
        image_token: str | None = None,
    ) -> Self: ...

@final
class LatestReminderMessage(Message):
    """Extra instructions placed just before the next turn."""

    def __new__(cls, content: str) -> Self: ...

@final
class Conversation:
    """A conversation plus its prompt settings (thinking, tools, tool choice, effort, format).

    `response_format` is `"text"` or `"json_object"`; `response_schema` (a JSON Schema) or
    `response_regex` select the `json_schema` or `regex` format instead. Combining them raises
    `ValueError`.
    """

    def __new__(
        cls,
        messages: Sequence[Message] | None = None,
        *,
        thinking_mode: bool = True,
        tools: Sequence[ToolDefinition] | None = None,
        tool_choice: _ToolChoice = "auto",
        reasoning_effort: _ReasoningEffort | None = None,
        response_format: Literal["text", "json_object"] = "text",
        response_schema: _Json | None = None,
        response_regex: str | None = None,
    ) -> Self: ...
    @property
    def messages(self) -> list[Message]:
        """The messages, each as its own subclass of `Message`."""
    @property
    def thinking_mode(self) -> bool:
        """Whether the model reasons before it answers."""
    @property
    def tools(self) -> list[ToolDefinition]:
        """The tools the model may call."""
    @property
    def tool_choice(self) -> _ToolChoice:
        """`"auto"`, `"none"` or `"required"`."""
    @property
    def reasoning_effort(self) -> _ReasoningEffort | None:
        """`"low"`, `"high"`, `"xhigh"`, `"max"`, or `None` for the template's default."""
    @property
    def response_format(self) -> _ResponseFormat:
        """`text`, `json_object`, `json_schema` or `regex`; enforcing it is the caller's job."""
    @property
    def response_schema(self) -> _Json | None:
        """The JSON Schema of the `json_schema` format, else `None`."""
    @property
    def response_regex(self) -> str | None:
        """The regular expression of the `regex` format, else `None`."""
    def to_json(self) -> str:
        """This conversation as its canonical JSON text: every message, image source, image token
        and placeholder position, so that `Conversation.from_json` gives back an equal
        conversation. The layout is described in `docs/conversation-json.md`.
        """
    @staticmethod
    def from_json(text: str) -> Conversation:
        """Read a conversation from its canonical JSON text (as written by `to_json`; fields with a
        default may be left out). Values are checked as the constructors check them; invalid or
        too deeply nested input raises `ValueError`.
        """

# ---------------------------------------------------------------------------------------------
# Prompt encodings

@final
class RenderedPrompt:
    """A rendered prompt: the text, where the template put control tokens, and the images.

    Returned by `render_conversation`; not constructible.
    """

    @property
    def prompt(self) -> str:
        """The prompt text."""
    @property
    def special_ranges(self) -> list[tuple[int, int]]:
        """Half-open code-point ranges of `prompt` holding template-inserted control tokens."""
    @property
    def image_sources(self) -> list[ImageSource]:
        """The images, in the order of their placeholders in `prompt`."""

@final
class DeepseekV4Encoding:
    """The DeepSeek V4 prompt template.

    Immutable: `with_tokenizer` and `with_special_tokens` return configured copies. `encode`
    needs a tokenizer; `render_conversation` does not.
    """

    def __new__(cls) -> Self: ...
    def with_tokenizer(self, tokenizer: Tokenizer) -> DeepseekV4Encoding:
        """A copy of this encoding that encodes with `tokenizer`."""
    def with_special_tokens(self, special_tokens: SpecialTokens) -> DeepseekV4Encoding:
        """A copy of this encoding that renders with `special_tokens`."""
    def render_conversation(self, conversation: Conversation) -> RenderedPrompt:
        """The prompt text of `conversation`, its control-token ranges and its images."""
    def encode(self, conversation: Conversation) -> list[int]:
        """Token IDs of the rendered conversation (control tokens only where the template put
        them). `RuntimeError` without a tokenizer or when a token is not in the vocabulary.
        """

@final
class DeepseekV41Encoding:
    """The DeepSeek V4.1 prompt template.

    Immutable: `with_tokenizer` and `with_special_tokens` return configured copies. `encode`
    needs a tokenizer; `render_conversation` does not.
    """

    def __new__(cls) -> Self: ...
    def with_tokenizer(self, tokenizer: Tokenizer) -> DeepseekV41Encoding:
        """A copy of this encoding that encodes with `tokenizer`."""
    def with_special_tokens(self, special_tokens: SpecialTokens) -> DeepseekV41Encoding:
        """A copy of this encoding that renders with `special_tokens`."""
    def render_conversation(self, conversation: Conversation) -> RenderedPrompt:
        """The prompt text of `conversation`, its control-token ranges and its images."""
    def encode(self, conversation: Conversation) -> list[int]:
        """Token IDs of the rendered conversation (control tokens only where the template put
        them). `RuntimeError` without a tokenizer or when a token is not in the vocabulary.
        """

# ---------------------------------------------------------------------------------------------
# Incremental encoding and conformance checks

_DivergenceCause: TypeAlias = Literal[
    "thinking_mode_changed",
    "reasoning_effort_changed",
    "tools_changed",
    "tool_choice_changed",
    "response_format_changed",
    "system_changed",
    "system_hoisted",
    "reasoning_dropped_from_history",
    "reasoning_dropped_by_template",
    "tool_results_reordered",
    "message_edited",
    "messages_removed",
    "generation_prompt_replaced",
    "turn_merged",
    "other",
]

@final
class EncodingSession:
    """Encodes the successive requests of one conversation, re-tokenizing only what changed.

    `EncodingSession(encoding, max_cached_tokens=1048576)`: `encoding` is a `DeepseekV4Encoding`
    or `DeepseekV41Encoding` with a tokenizer. `encode(conversation)` returns the same IDs as
    `encoding.encode(conversation)`; `last_turn` says how the prompt relates to the previous one.
    """

    def __new__(cls, encoding: DeepseekV4Encoding | DeepseekV41Encoding, max_cached_tokens: int = 1048576) -> Self: ...
    def encode(self, conversation: Conversation) -> list[int]:
        """Token IDs of `conversation` (identical to a cold `encode`), reusing the previous turn."""
    @property
    def last_turn(self) -> SessionTurn:
        """The report of the latest `encode` call."""
    @property
    def memory_bytes(self) -> int:
        """Bytes held for the previous turn (spans, token IDs, segment table, message digests)."""
    @property
    def max_cached_tokens(self) -> int:
        """Prompts longer than this many tokens are not kept for the next turn."""
    def reset(self) -> None:
        """Forget the previous turn; the next `encode` starts cold."""

@final
class SessionTurn:
    """How one `EncodingSession.encode` call related to the previous one."""

    @property
    def previous_tokens(self) -> int:
        """Token count of the previous prompt (0 on a first turn)."""
    @property
    def tokens(self) -> int:
        """Token count of this prompt."""
    @property
    def common_prefix_tokens(self) -> int:
        """Leading tokens this prompt shares with the previous one."""
    @property
    def reused_tokens(self) -> int:
        """Tokens copied from the previous turn rather than tokenized again."""
    @property
    def extends_previous(self) -> bool:
        """True when a previous prompt exists and this one starts with all of its tokens."""
    @property
    def divergence_token(self) -> int | None:
        """Index of the first token that differs from the previous prompt, or None."""
    @property
    def cause(self) -> _DivergenceCause | None:
        """Why the prompt diverges (`"reasoning_dropped_from_history"`, ...), or None."""
    @property
    def message_index(self) -> int | None:
        """Index of the message the cause points at, or None."""
    @property
    def detail(self) -> str | None:
        """A human-readable account of the divergence, or None."""
    def to_dict(self) -> dict[str, int | bool | str | None]:
        """All fields as a dict."""

def check_token_ids(
    encoding: DeepseekV4Encoding | DeepseekV41Encoding, conversation: Conversation, token_ids: Sequence[int]
) -> str:
    """Compare token IDs another encoder produced for `conversation` with `encoding.encode`;
    returns the report as JSON text (see `docs/checker.md`).
    """

def check_prompt_text(encoding: DeepseekV4Encoding | DeepseekV41Encoding, conversation: Conversation, prompt: str) -> str:
    """Compare a prompt string another encoder rendered, tokenized with the full vocabulary as a
    render-then-tokenize backend does (no BOS added); returns the report as JSON text.
    """

# ---------------------------------------------------------------------------------------------
# Images: fetching, preprocessing and token budgets

_ImageErrorKind: TypeAlias = Literal[
    "EmptyImage",
    "Decode",
    "UnsupportedMediaType",
    "InvalidDataUrl",
    "InvalidUrl",
    "Fetch",
    "FetchStatus",
    "DestinationRejected",
    "ImageTooLarge",
    "ImageDimensionsTooLarge",
    "Resize",
    "Encode",
    "InvalidOption",
    "DecodedSizeTooLarge",
]

class ImageError(Exception):
    """An image could not be resolved, fetched or preprocessed; `kind` names the failure and `is_retryable` says whether another attempt may succeed."""

    kind: _ImageErrorKind
    is_retryable: bool

class CalcResizeError(ValueError):
    """Fitting an image to the V4.1 token budget did not converge."""

@final
class ImageInfo:
    """One preprocessed image: its encoded bytes and its pixel size.

    `ImageInfo(data, width, height)`; `OpenCvImagePreprocessor.preprocess` returns one.
    """

    def __new__(cls, data: bytes | Sequence[int], width: int, height: int) -> Self: ...
    @property
    def data(self) -> bytes:
        """The encoded image bytes."""
    @property
    def width(self) -> int:
        """Width in pixels."""
    @property
    def height(self) -> int:
        """Height in pixels."""

@final
class MultiModalData:
    """The images resolved for one request, in prompt order.

    `MultiModalData(images=None)`; `ImageResolver.resolve` returns one.
    """

    def __new__(cls, images: Sequence[ImageInfo] | None = None) -> Self: ...
    @property
    def images(self) -> list[ImageInfo]:
        """The images, in the order of their placeholders."""
    def is_empty(self) -> bool:
        """True when there are no images."""
    def image_token_adjustment(self) -> int:
        """Sum over images of (tokens − 1): each image already holds one placeholder."""

@final
class ImageQuota:
    """Running totals of the images a resolver has accepted for one request.

    `ImageQuota()` starts at zero; pass the same quota to every `ImageResolver.resolve` call of
    a request so its limits cover them all.
    """

    def __new__(cls) -> Self: ...
    def image_count(self) -> int:
        """Images counted so far."""
    def byte_size(self) -> int:
        """Encoded bytes counted so far."""

@final
class PreprocessOptions:
    """How an image is resized before it is encoded.

    `PreprocessOptions(detail, max_dimension_px, low_detail_max_dimension_px)`: `detail` is
    `"low"`, `"high"`, `"original"` or `"auto"`; the two limits cap the longer side in pixels.
    """

    def __new__(cls, detail: _ImageDetail, max_dimension_px: int, low_detail_max_dimension_px: int) -> Self: ...
    @property
    def detail(self) -> _ImageDetail:
        """The detail level: `"low"`, `"high"`, `"original"` or `"auto"`."""
    @property
    def max_dimension_px(self) -> int:
        """Longest side, in pixels, of an image not at low detail."""
    @property
    def low_detail_max_dimension_px(self) -> int:
        """Longest side, in pixels, of an image at low detail."""

@final
class ReqwestImageFetcher:
    """Downloads images given by URL over HTTP(S), with a size cap (32 MiB unless
    `with_max_bytes` sets another).

    Immutable: the `with_*` methods return configured copies. `fetch` makes one attempt. Proxies
    come from the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`) as it is
    when the fetcher is made; a fetcher with a destination filter uses no proxy.
    """

    def __new__(cls) -> Self: ...
    @staticmethod
    def with_max_bytes(max_bytes: int) -> ReqwestImageFetcher:
        """A fetcher that refuses responses larger than `max_bytes` bytes."""
    def with_destination_filter(self, destination_filter: Callable[[str, str], bool]) -> ReqwestImageFetcher:
        """A copy that connects only where `destination_filter(host, ip)` returns `True`; an
        exception or a non-`bool` answer refuses the address.
        """
    def with_public_destinations_only(self) -> ReqwestImageFetcher:
        """A fetcher that refuses loopback, private, link-local, CGNAT/metadata and other
        non-public addresses on every hop (ours; the official package ships no filter).
        """
    def fetch(self, url: str) -> bytes:
        """The body at `url`, as bytes; `ImageError` when it cannot be fetched."""

@final
class OpenCvImagePreprocessor:
    """Decodes an image, resizes it as the options say, and encodes it again."""

    def __new__(cls) -> Self: ...
    def preprocess(self, data: bytes | Sequence[int], options: PreprocessOptions) -> ImageInfo:
        """The preprocessed image of the encoded bytes `data`; `ImageError` when they do not decode."""

@final
class ImageResolver:
    """Turns the image sources of a request into preprocessed images.

    `ImageResolver(fetcher, preprocessor)`: URLs are fetched with `fetcher`; a download that
    fails with a retryable error is tried up to 4 times, 0.3 s, 0.6 s and 1 s apart.
    `retry_waits` (ours): other waits in seconds, one attempt more than there are waits (`[]`:
    no retry); at most 16 waits of at most 60 s each.
    """

    def __new__(
        cls,
        fetcher: ReqwestImageFetcher,
        preprocessor: OpenCvImagePreprocessor,
        *,
        retry_waits: Sequence[float] | None = None,
    ) -> Self: ...
    def resolve(self, sources: Sequence[ImageSource], quota: ImageQuota) -> MultiModalData:
        """The images of `sources`, in order, counted against `quota`; `ImageError` names the
        first one that fails.
        """

# ---------------------------------------------------------------------------------------------
# Request conversion

class ConversionError(Exception):
    """A request that is well-formed but cannot be served; `status_code` and `body` hold the HTTP answer."""

    status_code: int
    body: str

@final
class WebSearchBehavior:
    """Handling of web-search tools and server-tool blocks.

    `Drop` removes them from the request; `Reject` refuses the request.
    """

    Drop: ClassVar[WebSearchBehavior]
    Reject: ClassVar[WebSearchBehavior]
    def __int__(self) -> int: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]

@final
class ReasoningContentBehavior:
    """Handling of assistant turns without reasoning content in thinking mode.

    `FillEmpty` uses empty reasoning; `Reject` refuses a request that lacks reasoning it needs.
    """

    FillEmpty: ClassVar[ReasoningContentBehavior]
    Reject: ClassVar[ReasoningContentBehavior]
    def __int__(self) -> int: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]

@final
class ConversionOptions:
    """Server-side conversion policy (immutable; the `with_*` methods return modified copies).

    By default a request without a thinking setting uses thinking mode, missing reasoning is
    filled with an empty string, web search is dropped from Responses and rejected in Messages
    requests, `max_tokens` may reach 393216, and the accepted model names are `DeepSeek-V4-Pro`
    and `DeepSeek-V4.1-Flash`.
    """

    def __new__(
        cls,
        *,
        default_thinking_mode: bool = True,
        reasoning_content_behavior: ReasoningContentBehavior = ...,
        responses_web_search: WebSearchBehavior = ...,
        messages_web_search: WebSearchBehavior = ...,
        thinking_max_tokens_upper_bound: int = 393216,
        non_thinking_max_tokens_upper_bound: int = 393216,
    ) -> Self: ...
    @property
    def default_thinking_mode(self) -> bool:
        """Whether a request that does not say uses thinking mode."""
    @property
    def model_versions_by_name(self) -> dict[str, ModelVersion]:
        """The accepted request `model` names and the version each targets."""
    @property
    def thinking_max_tokens_upper_bound(self) -> int:
        """The largest `max_tokens` accepted in thinking mode."""
    @property
    def non_thinking_max_tokens_upper_bound(self) -> int:
        """The largest `max_tokens` accepted outside thinking mode."""
    @property
    def reasoning_content_behavior(self) -> ReasoningContentBehavior:
        """What to do with assistant history that lacks reasoning in thinking mode."""
    @property
    def responses_web_search(self) -> WebSearchBehavior:
        """What to do with web search in Responses requests."""
    @property
    def messages_web_search(self) -> WebSearchBehavior:
        """What to do with web search in Messages requests."""
    @property
    def special_tokens(self) -> SpecialTokens:
        """The control-token spellings conversion uses."""
    def with_default_thinking_mode(self, default_thinking_mode: bool) -> ConversionOptions:
        """A copy with another default thinking mode."""
    def with_reasoning_content_behavior(
        self, reasoning_content_behavior: ReasoningContentBehavior
    ) -> ConversionOptions:
        """A copy with another handling of missing reasoning content."""
    def with_responses_web_search(self, responses_web_search: WebSearchBehavior) -> ConversionOptions:
        """A copy with another web-search handling for Responses requests."""
    def with_messages_web_search(self, messages_web_search: WebSearchBehavior) -> ConversionOptions:
        """A copy with another web-search handling for Messages requests."""
    def with_special_tokens(self, special_tokens: SpecialTokens) -> ConversionOptions:
        """A copy with other control-token spellings."""
    def with_model_alias(self, model: str, model_version: ModelVersion) -> ConversionOptions:
        """A copy that also accepts `model` as a name of `model_version` (or re-targets it)."""
    def with_model_versions_by_name(self, model_versions_by_name: dict[str, ModelVersion]) -> ConversionOptions:
        """A copy whose accepted model names are exactly `model_versions_by_name`."""
    def with_thinking_max_tokens_upper_bound(self, thinking_max_tokens_upper_bound: int) -> ConversionOptions:
        """A copy with another `max_tokens` bound for thinking mode."""
    def with_non_thinking_max_tokens_upper_bound(self, non_thinking_max_tokens_upper_bound: int) -> ConversionOptions:
        """A copy with another `max_tokens` bound outside thinking mode."""

@final
class OutputConstraint:
    """A constraint the backend may enforce on the output."""

    @property
    def kind(self) -> _ConstraintKind:
        """`"json"`, `"regex"`, `"tool_call"` or `"tool_call_required"`."""
    @property
    def schema(self) -> str:
        """The constraint text: compact JSON Schema, regular expression or tool list (may be empty)."""

@final
class InferenceOptions:
    """Sampling settings extracted from a request."""

    @property
    def max_tokens(self) -> int | None:
        """The requested output limit; `None` leaves it to `ConversationRequest.resolve_max_tokens`."""
    @property
    def temperature(self) -> float | None:
        """The sampling temperature to use."""
    @property
    def top_p(self) -> float | None:
        """The nucleus-sampling `top_p` to use."""
    @property
    def logprobs(self) -> bool:
        """Whether the request asks for log probabilities of the output tokens."""
    @property
    def top_logprobs(self) -> int | None:
        """How many alternatives to report per output token, if asked."""
    @property
    def seed(self) -> int | None:
        """The sampling seed, if the request gives one."""
    @property
    def output_constraint(self) -> OutputConstraint | None:
        """What constrained decoding would enforce on the output, if anything."""

@final
class ConversationRequest:
    """A converted request: conversation, backend settings, parser settings, target model.

    Usually returned by a request's `convert`; the constructor wraps a conversation with default
    inference and parsing options, not streamed.
    """

    def __new__(cls, conversation: Conversation, model_version: ModelVersion) -> Self: ...
    @property
    def conversation(self) -> Conversation:
        """The conversation to render."""
    @property
    def inference_options(self) -> InferenceOptions:
        """The sampling settings for the backend."""
    @property
    def parsing_options(self) -> ParsingOptions:
        """The parser settings for the output (a copy)."""
    @property
    def model_version(self) -> ModelVersion:
        """The model the conversation targets."""
    @property
    def stream(self) -> bool:
        """Whether the client asked for a streamed response."""
    def resolve_max_tokens(self, prompt_tokens: int, context_limit: int) -> int:
        """The `max_tokens` to send to the backend for a prompt of `prompt_tokens` tokens in a
        context of `context_limit` tokens.
        """

@final
class ResponsesEcho:
    """Request settings that a Responses response reports back.

    Usually read from a request with `ResponsesRequest.echo`; the constructor gives the settings
    of a request that specifies none.
    """

    def __new__(cls) -> Self: ...
    @property
    def instructions(self) -> str | None:
        """The request's `instructions`."""
    @property
    def max_output_tokens(self) -> int | None:
        """The request's `max_output_tokens`."""
    @property
    def temperature(self) -> float:
        """The request's `temperature` (1.0 when unset)."""
    @property
    def top_p(self) -> float:
        """The request's `top_p` (1.0 when unset)."""
    @property
    def top_logprobs(self) -> int:
        """The request's `top_logprobs` (0 when unset)."""
    @property
    def user(self) -> str | None:
        """The request's `user`."""

@final
class ChatCompletionRequest:
    """A Chat Completions request body; `convert` consumes it.

    The body is JSON text (`str` or `bytes`) or the decoded object (a `dict`); a body that
    does not parse, or is not a request of this format, raises `ValueError`.
    """

    @overload
    def __new__(cls, body: _JsonText) -> Self: ...
    @overload
    def __new__(cls, body: _JsonObject) -> Self: ...
    @property
    def model(self) -> str:
        """The requested model name (read it before `convert`)."""
    def convert(self, options: ConversionOptions) -> ConversationRequest:
        """Convert into a conversation request; the request is consumed even when this fails."""
    @staticmethod
    def chunk_generator(request: ConversationRequest, id: str, model: str) -> ChatCompletionChunkGenerator:
        """A Chat Completions generator for the converted `request`, writing chunks with `id` and
        `model`.
        """

@final
class ResponsesRequest:
    """An OpenAI Responses request body; `convert` consumes it.

    The body is JSON text (`str` or `bytes`) or the decoded object (a `dict`); a body that
    does not parse, or is not a request of this format, raises `ValueError`.
    """

    @overload
    def __new__(cls, body: _JsonText) -> Self: ...
    @overload
    def __new__(cls, body: _JsonObject) -> Self: ...
    @property
    def model(self) -> str:
        """The requested model name (read it before `convert`)."""
    def convert(self, options: ConversionOptions) -> ConversationRequest:
        """Convert into a conversation request; the request is consumed even when this fails."""
    def echo(self) -> ResponsesEcho:
        """The request settings a Responses response reports back."""
    def namespace_tool_map(self, options: ConversionOptions) -> dict[str, tuple[str, str]]:
        """`{"ns::name": ("ns", "name")}` for the functions declared in namespace tools."""
    @staticmethod
    def chunk_generator(request: ConversationRequest, id: str, model: str) -> ResponsesChunkGenerator:
        """A Responses generator for the converted `request`. A request converted from a Responses
        body reports that body's settings (instructions, temperature, reasoning, tools, …) in
        its response objects; `with_echo` replaces them.
        """

@final
class MessagesRequest:
    """An Anthropic Messages request body; `convert` consumes it.

    The body is JSON text (`str` or `bytes`) or the decoded object (a `dict`); a body that
    does not parse, or is not a request of this format, raises `ValueError`.
    """

    @overload
    def __new__(cls, body: _JsonText) -> Self: ...
    @overload
    def __new__(cls, body: _JsonObject) -> Self: ...
    @property
    def model(self) -> str:
        """The requested model name (read it before `convert`)."""
    def convert(self, options: ConversionOptions) -> ConversationRequest:
        """Convert into a conversation request; the request is consumed even when this fails."""
    @staticmethod
    def chunk_generator(request: ConversationRequest, id: str, model: str) -> MessagesChunkGenerator:
        """A Messages generator for the converted `request`."""

# ---------------------------------------------------------------------------------------------
# Output processing

@final
class PromptUsage:
    """Prompt-side token counts reported by the backend."""

    def __new__(cls, *, prompt_tokens: int = 0, prompt_cache_hit_tokens: int = 0) -> Self: ...
    @property
    def prompt_tokens(self) -> int:
        """Tokens in the prompt."""
    @property
    def prompt_cache_hit_tokens(self) -> int:
        """Prompt tokens served from the prefix cache."""

@final
class InferenceFinishReason:
    """Why the backend stopped; the protocol finish reason also depends on what was parsed.

    `Stop`: end of sequence or a stop condition; `Length`: the token limit; `ContentFilter`:
    the backend withheld the output.
    """

    Stop: ClassVar[InferenceFinishReason]
    Length: ClassVar[InferenceFinishReason]
    ContentFilter: ClassVar[InferenceFinishReason]
    def __int__(self) -> int: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]

@final
class InferenceChunk:
    """One backend update; build it with `ready`, `text`, `tokens` or `finish`."""

    @staticmethod
    def ready(*, prompt_usage: PromptUsage | None = None, system_fingerprint: str | None = None) -> InferenceChunk:
        """The prompt was processed (prompt usage and backend fingerprint are optional)."""
    @staticmethod
    def text(content: str, token_count: int = 0) -> InferenceChunk:
        """Decoded text that stands for `token_count` generated tokens."""
    @staticmethod
    def tokens(token_ids: Sequence[int], logprobs: Sequence[_TokenLogprobs] | None = None) -> InferenceChunk:
        """Generated token IDs; `logprobs` holds one `(logprob, [(token_id, logprob), ...])` per ID."""
    @staticmethod
    def finish(finish_reason: InferenceFinishReason) -> InferenceChunk:
        """The backend stopped for `finish_reason`."""
    @property
    def kind(self) -> _ChunkKind:
        """`"ready"`, `"text"`, `"tokens"` or `"finish"`: which constructor built the chunk."""
    @property
    def content(self) -> str | None:
        """The text of a `text` chunk."""
    @property
    def token_ids(self) -> list[int] | None:
        """The token IDs of a `tokens` chunk."""
    @property
    def finish_reason(self) -> InferenceFinishReason | None:
        """The reason of a `finish` chunk."""
    @property
    def prompt_usage(self) -> PromptUsage | None:
        """The prompt usage of a `ready` chunk (zero counts when none was given), else `None`."""
    @property
    def token_count(self) -> int | None:
        """The token count of a `text` chunk."""
    @property
    def system_fingerprint(self) -> str | None:
        """The backend fingerprint of a `ready` chunk, if given."""

@final
class ChatCompletionChunkGenerator:
    """Writes Chat Completions chunks; a stream processor consumes it.

    Usually obtained from `ChatCompletionRequest.chunk_generator`; the constructor builds one
    from the two request settings it needs.
    """

    def __new__(
        cls,
        id: str,
        model: str,
        *,
        thinking_mode: bool = False,
        thinking_initial_stage: ThinkingInitialStage | None = None,
    ) -> Self: ...

@final
class ResponsesChunkGenerator:
    """Writes Responses events; a stream processor consumes it."""

    def __new__(
        cls,
        id: str,
        model: str,
        *,
        thinking_mode: bool = False,
        thinking_initial_stage: ThinkingInitialStage | None = None,
    ) -> Self: ...
    def with_namespace_tool_map(self, namespace_tool_map: dict[str, tuple[str, str]]) -> ResponsesChunkGenerator:
        """Consume this generator; the new one reports `(namespace, local name)` for the listed
        function names.
        """
    def with_echo(self, echo: ResponsesEcho) -> ResponsesChunkGenerator:
        """Consume this generator; the new one reports `echo` (the request settings) in its
        response objects.
        """
    def with_echo_json(self, echo: str) -> ResponsesChunkGenerator:
        """Consume this generator; the new one reports the request settings given as a JSON object
        (`instructions`, `max_output_tokens`, `temperature`, `top_p`, `top_logprobs`, `user`,
        `reasoning`, `text`, `tool_choice`, `tools`). `with_echo` takes a `ResponsesEcho` instead.
        """

@final
class MessagesChunkGenerator:
    """Writes Anthropic Messages events; a stream processor consumes it."""

    def __new__(cls, id: str, model: str, thinking_mode: bool) -> Self: ...
    def with_signature(self, signature: str) -> MessagesChunkGenerator:
        """Consume this generator; the new one ends each thinking block with `signature` (the
        default is the response ID).
        """

@final
class ChatCompletionChunk:
    """One `chat.completion.chunk`."""

    def to_json(self) -> str:
        """The chunk as compact JSON."""
    def to_sse(self) -> str:
        """The chunk framed as one server-sent event (`data: ...` and a blank line)."""

@final
class ResponsesStreamEvent:
    """One Responses stream event."""

    def to_json(self) -> str:
        """The event as compact JSON."""
    def to_sse(self) -> str:
        """The event framed as one server-sent event (`event: <type>`, `data: ...`, blank line)."""
    @property
    def type(self) -> str:
        """The event's `type`, which is also its SSE event name."""

@final
class MessagesStreamEvent:
    """One Anthropic Messages stream event."""

    def to_json(self) -> str:
        """The event as compact JSON."""
    def to_sse(self) -> str:
        """The event framed as one server-sent event (`event: <type>`, `data: ...`, blank line)."""
    @property
    def type(self) -> str:
        """The event's `type`, which is also its SSE event name."""

@final
class ChatCompletionResponse:
    """A complete `chat.completion` folded from chunks."""

    def __new__(cls, id: str, model: str, created: int, prompt_tokens: int, prompt_cache_hit_tokens: int) -> Self: ...
    def accumulate(self, chunk: ChatCompletionChunk) -> None:
        """Apply one chunk or event."""
    def to_json(self) -> str:
        """The response accumulated so far, as compact JSON."""
    @staticmethod
    def sse_event_name(chunk: ChatCompletionChunk) -> None:
        """The SSE event name a chunk or event is sent under (`None`: an unnamed message).
        Chat Completions chunks have none; Responses and Messages events use their `type`.
        """
    @staticmethod
    def sse_done_data() -> str:
        """The data of the message that ends the stream (`None`: the protocol sends none).
        Only Chat Completions sends one, `[DONE]`.
        """

@final
class ResponsesResponse:
    """A complete Responses `response` folded from events."""

    def __new__(cls, id: str, model: str, created: int, prompt_tokens: int, prompt_cache_hit_tokens: int) -> Self: ...
    def accumulate(self, chunk: ResponsesStreamEvent) -> None:
        """Apply one chunk or event."""
    def to_json(self) -> str:
        """The response accumulated so far, as compact JSON."""
    @staticmethod
    def sse_event_name(chunk: ResponsesStreamEvent) -> str:
        """The SSE event name a chunk or event is sent under (`None`: an unnamed message).
        Chat Completions chunks have none; Responses and Messages events use their `type`.
        """
    @staticmethod
    def sse_done_data() -> None:
        """The data of the message that ends the stream (`None`: the protocol sends none).
        Only Chat Completions sends one, `[DONE]`.
        """

@final
class MessagesResponse:
    """A complete Anthropic `message` folded from events."""

    def __new__(cls, id: str, model: str, created: int, prompt_tokens: int, prompt_cache_hit_tokens: int) -> Self: ...
    def accumulate(self, chunk: MessagesStreamEvent) -> None:
        """Apply one chunk or event."""
    def to_json(self) -> str:
        """The response accumulated so far, as compact JSON."""
    @staticmethod
    def sse_event_name(chunk: MessagesStreamEvent) -> str:
        """The SSE event name a chunk or event is sent under (`None`: an unnamed message).
        Chat Completions chunks have none; Responses and Messages events use their `type`.
        """
    @staticmethod
    def sse_done_data() -> None:
        """The data of the message that ends the stream (`None`: the protocol sends none).
        Only Chat Completions sends one, `[DONE]`.
        """

# The item type a processor yields follows from its generator: `StreamProcessor` is generic in
# the stub only (not subscriptable at run time; quote `"StreamProcessor[...]"` in annotations).
_Item = TypeVar("_Item", ChatCompletionChunk, ResponsesStreamEvent, MessagesStreamEvent)

@final
class StreamProcessor(Generic[_Item]):
    """Turns backend chunks into protocol chunks or events for one response.

    The constructor consumes `generator`, which decides the protocol of the output; `tokenizer`
    decodes `tokens` chunks (without one they raise `RuntimeError`).
    """

    @overload
    def __new__(
        cls, generator: ChatCompletionChunkGenerator, options: ParsingOptions, tokenizer: Tokenizer | None = None
    ) -> StreamProcessor[ChatCompletionChunk]: ...
    @overload
    def __new__(
        cls, generator: ResponsesChunkGenerator, options: ParsingOptions, tokenizer: Tokenizer | None = None
    ) -> StreamProcessor[ResponsesStreamEvent]: ...
    @overload
    def __new__(
        cls, generator: MessagesChunkGenerator, options: ParsingOptions, tokenizer: Tokenizer | None = None
    ) -> StreamProcessor[MessagesStreamEvent]: ...
    @property
    def finished(self) -> bool:
        """Whether the stream completed normally and was not closed."""
    def push(self, chunk: InferenceChunk) -> list[_Item]:
        """Process one backend chunk; returns the chunks or events it produced.

        `RuntimeError` once the stream finished or was closed, and for a `tokens` chunk that cannot
        be decoded (no tokenizer, an unknown ID, a log-probability count that does not match),
        which also closes the processor.
        """
    def finish(self) -> list[_Item]:
        """End the input and flush what is held back; after completion it returns an empty list."""
    def close(self) -> None:
        """Abandon the stream without completing it; later calls raise."""

@overload
def sse_done_message(protocol: Literal["chat", "chat_completions"]) -> str:
    """The SSE message that ends a stream of `protocol` (`"chat"`, `"responses"` or `"messages"`),
    or `None` when that protocol sends none.
    """
@overload
def sse_done_message(protocol: Literal["responses", "messages"]) -> None: ...
@overload
def sse_done_message(protocol: str) -> str | None: ...

# ---------------------------------------------------------------------------------------------
# Output grammars (recipe-rs/grammar)

class GrammarError(ValueError):
    """An output grammar could not be built (a malformed regex, schema or Lark grammar, a tokenizer without the needed control tokens) or a matcher call was given bad arguments."""

class UnsupportedSchemaError(GrammarError):
    """A tool parameter schema or response schema that the output grammar cannot express."""

@final
class OutputGrammar:
    """The grammar of one request's valid outputs, compiled for one tokenizer.

    Built by `OutputGrammar.compile`; `matcher()` gives one independent matcher per sequence.
    """

    @staticmethod
    def compile(
        request: ConversationRequest,
        tokenizer: Tokenizer,
        *,
        thinking_budget: int | None = None,
        lark: str | None = None,
    ) -> OutputGrammar | None:
        """The grammar of the request's output constraint, or `None` when it carries none.

        Reasoning runs until `</think>` when the prompt opened it (at most `thinking_budget`
        tokens, then `</think>` is forced); then tool calls in the version's DSML dialect (by
        `tool_choice` and `parallel_tool_calls`), or the JSON, regex or `lark` (llguidance Lark,
        replacing the request's answer constraint) answer. The tokenizer's grammar vocabulary is
        built on first use and kept on `tokenizer`. Raises `UnsupportedSchemaError` for a schema
        the grammar cannot express and `GrammarError` for other bad input.
        """
    @property
    def vocab_size(self) -> int:
        """Number of token IDs a bitmask covers (its row is `ceil(vocab_size / 32)` int32 words)."""
    def lark(self) -> str:
        """The grammar as llguidance Lark text."""
    def structural_tag_json(self) -> str:
        """The same output shape as an xgrammar structural tag (JSON text), for engines that
        constrain with xgrammar.
        """
    def matcher(self) -> GrammarMatcher:
        """A matcher at the start of the output."""

@final
class GrammarMatcher:
    """Where one sequence stands in an `OutputGrammar`.

    A rejected token leaves the matcher unchanged (`accept_token` answers `False`).
    """

    def fill_bitmask(self, buf: Any, index: int = 0, *, max_tokens: int | None = None) -> None:
        """Write the tokens allowed next into row `index` of `buf` (an int32 array of shape
        `[n, ceil(vocab_size / 32)]`): bit `i % 32` of word `i // 32` set when token `i` may
        come next. Once the output is complete only EOS is set; after EOS, nothing.

        `max_tokens`: the most tokens the output may have in all (EOS included, counted from
        the matcher's start). Near that budget the mask holds only the next token of a short
        valid end (the closing planner), so the output is complete when the budget runs out;
        a complete output may then no longer open new structure.
        """
    @staticmethod
    def fill_bitmasks(
        matchers: Sequence[GrammarMatcher], buf: Any, max_tokens: Sequence[int | None]
    ) -> list[bool | None]:
        """`fill_bitmask` of several matchers in one call, matcher `i` into row `i` of `buf`, with
        `max_tokens[i]` (`None`: no budget), without the GIL for the whole batch (an engine fills
        a step's rows this way on a worker thread while the model runs). Returns, per matcher,
        whether it is accepting after the fill, or `None` when it failed (its row is then
        cleared; `fill_bitmask` on that matcher alone raises the error).
        """
    def closing_tokens(self, limit: int) -> list[int] | None:
        """The valid end the closing planner finds from here: at most `limit` tokens after which
        the output may end (EOS not included; empty when it may end now), or `None`. The
        matcher is not changed.
        """
    def accept_token(self, token: int) -> bool:
        """Accept `token` if the grammar allows it here (`True`); otherwise leave the matcher as it
        was (`False`).
        """
    def accept_tokens(self, tokens: Sequence[int]) -> int:
        """Accept the longest allowed prefix of `tokens`; returns how many were accepted."""
    def rollback(self, n: int) -> None:
        """Take back the last `n` accepted tokens (EOS included)."""
    def is_accepting(self) -> bool:
        """Whether the output may end here (EOS allowed now, or already accepted)."""
    def is_terminated(self) -> bool:
        """Whether EOS was accepted: the output is over."""
    @property
    def num_accepted(self) -> int:
        """Number of tokens accepted so far."""
