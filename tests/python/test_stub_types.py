"""The types that `_native.pyi` promises hold at run time.

`mypy.stubtest` (in .ci/run) checks names, parameters and defaults, but PyO3 records no types,
so nothing there checks what a property or method returns. This test builds instances of every
class through the public API (conversion of all three formats, rendering, encoding, stream
processing, accumulation), reads every property the stub declares on each instance, calls the
methods with arguments, and checks each value against the stub's annotation.
"""

from __future__ import annotations

import ast
import base64
import collections.abc
import inspect
import json
import types
import typing
from pathlib import Path
from typing import Any

import deepseek_recipe as dr
import pytest
import typing_extensions
from deepseek_recipe import _native

STUB_TREE = ast.parse(Path(_native.__file__).with_name("_native.pyi").read_text(encoding="utf-8"))


def _namespace() -> dict[str, Any]:
    ns: dict[str, Any] = dict(vars(typing))
    ns.update(vars(collections.abc))
    ns.update({"TypeAlias": typing_extensions.TypeAlias, "Self": typing_extensions.Self})
    ns.update({name: getattr(_native, name) for name in _native.__all__})
    for node in STUB_TREE.body:  # the stub's private aliases and type variables
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            if node.target.id.startswith("_"):
                ns[node.target.id] = eval(ast.unparse(node.value), ns)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id.startswith("_") and node.targets[0].id != "__all__":
                ns[node.targets[0].id] = eval(ast.unparse(node.value), ns)
    return ns


NS = _namespace()


def _annotations() -> tuple[dict[tuple[str, str], Any], dict[tuple[str, str], list[Any]]]:
    """`(class, property)` -> type, and `(class or "", function)` -> return types of its overloads."""
    properties: dict[tuple[str, str], Any] = {}
    returns: dict[tuple[str, str], list[Any]] = {}

    def visit(owner: str, fn: ast.FunctionDef) -> None:
        decorators = [ast.unparse(d) for d in fn.decorator_list]
        if any(d.endswith(".setter") for d in decorators) or fn.returns is None or fn.name == "__new__":
            return
        tp = eval(ast.unparse(fn.returns), NS)
        if "property" in decorators:
            properties[(owner, fn.name)] = tp
        else:
            returns.setdefault((owner, fn.name), []).append(tp)

    for node in STUB_TREE.body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    visit(node.name, item)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    tp = eval(ast.unparse(item.annotation), NS)
                    properties[(node.name, item.target.id)] = tp
        elif isinstance(node, ast.FunctionDef):
            visit("", node)
    return properties, returns


PROPERTIES, RETURNS = _annotations()


def conforms(value: Any, tp: Any) -> bool:
    """Whether `value` is of type `tp` (exact `int`/`float`/`bool`, element types checked)."""
    if tp is Any:
        return True
    if tp is None or tp is type(None):
        return value is None
    if isinstance(tp, typing.TypeVar):
        return any(conforms(value, c) for c in tp.__constraints__)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.ClassVar:
        return conforms(value, args[0])
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, a) for a in args)
    if origin is typing.Literal:
        return any(type(value) is type(a) and value == a for a in args)
    if origin is list:
        return type(value) is list and all(conforms(v, args[0]) for v in value)
    if origin is dict:
        return type(value) is dict and all(conforms(k, args[0]) and conforms(v, args[1]) for k, v in value.items())
    if origin is tuple:
        return type(value) is tuple and len(value) == len(args) and all(map(conforms, value, args))
    if origin is not None:
        return isinstance(value, origin)
    if tp in (int, float, bool, str, bytes):
        return type(value) is tp
    return isinstance(value, tp)


# ---------------------------------------------------------------------------------------------
# Instances built through the public API

TOOL = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PNG_URL = "data:image/png;base64,iVBORw0KGgo="


def chat_body() -> dict[str, Any]:
    return {
        "model": "DeepSeek-V4.1-Flash",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "look"},
                                         {"type": "image_url", "image_url": {"url": PNG_URL}}]},
            {"role": "assistant", "content": "", "reasoning_content": "hm",
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "weather", "arguments": "{\"city\":\"x\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": TOOL}}],
        "max_tokens": 100, "temperature": 0.5, "top_p": 0.9, "logprobs": True, "top_logprobs": 2,
        "seed": 7, "stop": ["END"], "stream": True,
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": TOOL}},
    }


def responses_body() -> dict[str, Any]:
    return {
        "model": "DeepSeek-V4.1-Flash", "input": "hi", "instructions": "be kind",
        "max_output_tokens": 50, "user": "u1", "temperature": 0.3,
        "tools": [{"type": "namespace", "name": "ns", "description": "d",
                   "tools": [{"type": "function", "name": "g", "parameters": TOOL}]}],
    }


def messages_body() -> dict[str, Any]:
    return {
        "model": "DeepSeek-V4-Pro", "max_tokens": 64, "system": "s",
        "messages": [{"role": "user", "content": "hi"}],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [{"name": "weather", "input_schema": TOOL}],
        "tool_choice": {"type": "any"},
    }


def stream(generator: Any, options: Any, tokenizer: Any) -> list[Any]:
    """Objects seen while streaming one answer with reasoning, text and a tool call."""
    processor = dr.StreamProcessor(generator, options, tokenizer)
    text = "think</think>answer"
    chunks = [
        dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=5, prompt_cache_hit_tokens=1),
                                system_fingerprint="fp"),
        dr.InferenceChunk.text(text[:5], 1),
        dr.InferenceChunk.tokens(tokenizer.encode(text[5:]),
                                 [(-0.5, [(1, -0.5), (2, -1.0)])] * len(tokenizer.encode(text[5:]))),
        dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop),
    ]
    seen: list[Any] = [processor, *chunks, chunks[0].prompt_usage]
    for chunk in chunks:
        seen += checked(processor, "push", chunk)
    seen += checked(processor, "finish")
    assert processor.finished
    accumulator = {
        dr.ChatCompletionChunkGenerator: dr.ChatCompletionResponse,
        dr.ResponsesChunkGenerator: dr.ResponsesResponse,
        dr.MessagesChunkGenerator: dr.MessagesResponse,
    }[type(generator)]("id-1", "model-x", 1_700_000_000, 5, 1)
    for item in seen[len(chunks) + 2:]:
        checked(accumulator, "accumulate", item)
        checked(type(accumulator), "sse_event_name", item)
    return [*seen, accumulator]


def checked(obj: Any, method: str, *args: Any) -> Any:
    """Call `obj.method(*args)` and check the result against the stub's return type."""
    owner = "" if obj is _native else obj.__name__ if isinstance(obj, type) else type(obj).__name__
    value = getattr(obj, method)(*args)
    expected = RETURNS[(owner, method)]
    assert any(conforms(value, tp) for tp in expected), f"{owner}.{method} returned {value!r}, stub says {expected}"
    return value


@pytest.fixture(scope="module")
def instances(tokenizer) -> list[Any]:
    objs: list[Any] = []
    options = dr.ConversionOptions().with_model_alias("alias", dr.ModelVersion.DeepseekV4Pro)
    objs += [options, options.special_tokens, dr.SpecialTokens(user="<u>"), tokenizer]
    objs += [getattr(dr.ThinkingInitialStage, n) for n in ("ReasoningStart", "ContentContinuation")]
    objs += [dr.SpecialToken.Bos, dr.ModelVersion.DeepseekV41Flash, dr.WebSearchBehavior.Drop,
             dr.ReasoningContentBehavior.Reject, dr.InferenceFinishReason.Length]
    objs += [dr.DataUrlImageSource(PNG_URL, "low", path="p"), dr.UrlImageSource("https://x/y.png"),
             dr.BytesImageSource(b"\x89PNG", "auto")]
    objs += [dr.SystemMessage("s", tools=[dr.ToolDefinition("t", "d", TOOL, True, True)]),
             dr.UserMessage("a <｜image｜>", [dr.BytesImageSource(b"x")]),
             dr.AssistantMessage("a", "r", [dr.ToolCall("c", "t", "{}")], prefix=True),
             dr.ToolMessage("r", "c"), dr.LatestReminderMessage("n")]
    objs += [dr.Conversation(objs[-5:], reasoning_effort="max", response_regex="a+"),
             dr.Conversation([dr.UserMessage("q")], response_schema=TOOL, tool_choice="required",
                             tools=[dr.ToolDefinition("t")])]

    requests = []
    for cls, body in [(dr.ChatCompletionRequest, chat_body()), (dr.ResponsesRequest, responses_body()),
                      (dr.MessagesRequest, messages_body())]:
        objs.append(cls(body))  # left unconverted, so its properties and methods can be read
        request = cls(json.dumps(body).encode())
        assert conforms(request.model, PROPERTIES[(cls.__name__, "model")])
        if cls is dr.ResponsesRequest:
            objs.append(checked(request, "echo"))
            checked(request, "namespace_tool_map", options)
        converted = checked(request, "convert", options)
        requests.append((cls, converted))
        objs += [converted, converted.conversation, converted.inference_options, converted.parsing_options]
        objs += [converted.inference_options.output_constraint]
        objs += converted.conversation.messages + converted.conversation.tools
        for message in converted.conversation.messages:
            objs += message.image_sources + (message.tool_calls or [])
        checked(converted, "resolve_max_tokens", 10, 100_000)
        for encoding in (dr.DeepseekV4Encoding(), dr.DeepseekV41Encoding()):
            encoding = checked(encoding, "with_special_tokens", dr.SpecialTokens())
            encoding = checked(encoding, "with_tokenizer", tokenizer)
            objs += [encoding, checked(encoding, "render_conversation", converted.conversation)]
    objs.append(dr.ResponsesEcho())
    objs.append(dr.ConversationRequest(dr.Conversation(), dr.ModelVersion.DeepseekV4Pro))
    try:
        dr.ChatCompletionRequest({"model": "nope", "messages": []}).convert(dr.ConversionOptions())
    except dr.ConversionError as e:
        objs.append(e)

    for cls, converted in requests:
        generator = checked(cls, "chunk_generator", converted, "id-1", "model-x")
        if isinstance(generator, dr.ResponsesChunkGenerator):
            generator = checked(generator, "with_echo", dr.ResponsesEcho())
            generator = checked(generator, "with_namespace_tool_map", {"ns::g": ("ns", "g")})
        if isinstance(generator, dr.MessagesChunkGenerator):
            generator = checked(generator, "with_signature", "sig")
        objs.append(generator)
        objs += stream(generator, dr.ParsingOptions(thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart),
                       tokenizer)
    objs += stream(dr.ResponsesChunkGenerator("r", "m", thinking_mode=True).with_echo_json("{}"),
                   dr.ParsingOptions(stop_sequences=["zz"]), tokenizer)
    objs += session_objects(tokenizer) + image_objects() + grammar_objects(tokenizer)
    return [o for o in objs if o is not None]


def grammar_objects(tokenizer: Any) -> list[Any]:
    """An output grammar and its matcher (methods with arguments called through `checked`)."""
    request = dr.ChatCompletionRequest(chat_body()).convert(dr.ConversionOptions())
    grammar = checked(dr.OutputGrammar, "compile", request, tokenizer)
    matcher = grammar.matcher()
    checked(matcher, "accept_tokens", tokenizer.encode("Hi"))
    checked(matcher, "accept_token", tokenizer.encode("!")[0])
    checked(matcher, "rollback", 1)
    checked(matcher, "fill_bitmask", _mask_row(grammar))
    objs: list[Any] = [grammar, matcher]
    try:
        dr.OutputGrammar.compile(request, tokenizer, lark="start: (")
    except dr.GrammarError as e:
        objs.append(e)
    objs.append(dr.UnsupportedSchemaError("x"))
    return objs


def _mask_row(grammar: Any) -> Any:
    import numpy as np

    return np.zeros((1, (grammar.vocab_size + 31) // 32), dtype=np.int32)


def session_objects(tokenizer: Any) -> list[Any]:
    """An encoding session over a growing, then edited conversation, and the checker functions."""
    encoding = dr.DeepseekV4Encoding().with_tokenizer(tokenizer)
    session = dr.EncodingSession(encoding, max_cached_tokens=4096)
    first = dr.Conversation([dr.UserMessage("hello")])
    grown = dr.Conversation([dr.UserMessage("hello"), dr.AssistantMessage("hi"), dr.UserMessage("more")])
    edited = dr.Conversation([dr.UserMessage("goodbye")])
    turns = []
    for conversation in (first, grown, edited):
        ids = checked(session, "encode", conversation)
        turns.append(session.last_turn)
    assert turns[0].cause is None and turns[2].cause is not None  # both shapes of the report
    checked(turns[2], "to_dict")
    checked(_native, "check_token_ids", encoding, edited, ids)
    checked(_native, "check_prompt_text", encoding, edited, "goodbye")
    return [session, *turns]


PNG = Path(__file__).parents[1] / "conformance" / "images" / "inputs" / "size_2x1.png"


def image_objects() -> list[Any]:
    """The image stage end to end on a local `data:` URL, with no network access."""
    objs: list[Any] = []
    png = PNG.read_bytes()
    options = dr.PreprocessOptions("high", 2048, 512)
    preprocessor = dr.OpenCvImagePreprocessor()
    fetcher = checked(dr.ReqwestImageFetcher, "with_max_bytes", 1 << 20)
    fetcher = checked(fetcher, "with_destination_filter", lambda host, ip: False)
    objs += [options, preprocessor, fetcher, dr.ReqwestImageFetcher(), checked(preprocessor, "preprocess", png, options)]
    quota = dr.ImageQuota()
    resolver = dr.ImageResolver(fetcher, preprocessor)
    data_url = "data:image/png;base64," + base64.b64encode(png).decode()
    resolved = checked(resolver, "resolve", [dr.DataUrlImageSource(data_url), dr.BytesImageSource(png, "low")], quota)
    assert quota.image_count() == 2
    objs += [quota, resolver, resolved, *resolved.images, dr.MultiModalData()]
    try:
        checked(fetcher, "fetch", "http://127.0.0.1:9/a.png")  # refused by the filter, never sent
    except dr.ImageError as e:
        objs.append(e)
    try:
        preprocessor.preprocess(b"not an image", options)
    except dr.ImageError as e:
        objs.append(e)
    objs.append(dr.CalcResizeError("did not converge"))
    return objs


def test_instances_cover_every_class(instances):
    classes = [name for name in _native.__all__ if isinstance(getattr(_native, name), type)]
    missing = [name for name in classes if not any(isinstance(o, getattr(_native, name)) for o in instances)]
    assert not missing, f"no instance built of {missing}"


def test_properties_have_the_stub_types(instances):
    checked_count, wrong = 0, set()
    for obj in instances:
        for (owner, name), tp in PROPERTIES.items():
            cls = getattr(_native, owner)
            if not isinstance(obj, cls) or typing.get_origin(tp) is typing.ClassVar:
                continue
            value = getattr(obj, name)
            if not conforms(value, tp):
                wrong.add(f"{owner}.{name} = {value!r:.80}, stub says {tp}")
            checked_count += 1
    assert not wrong, "\n".join(sorted(wrong))
    assert checked_count > 300


def test_enum_members_have_the_enum_type():
    for (owner, name), tp in PROPERTIES.items():
        if typing.get_origin(tp) is typing.ClassVar and typing.get_args(tp)[0] is not None:
            assert conforms(getattr(getattr(_native, owner), name), tp), f"{owner}.{name}"


def test_argument_free_methods_have_the_stub_types(instances):
    skip = {"finish", "close"}  # they end the processor; `finish` is checked while streaming
    calls = 0
    for obj in instances:
        cls = type(obj)
        for owner, name in RETURNS:
            if owner != cls.__name__ or name.startswith("_") or name in skip:
                continue
            static = isinstance(cls.__dict__.get(name), staticmethod)
            if len(inspect.signature(getattr(cls, name)).parameters) == (0 if static else 1):
                checked(cls if static else obj, name)
                calls += 1
    assert calls > 30


def test_methods_with_arguments_have_the_stub_types(tokenizer):
    checked(dr.SpecialTokens(), "token", dr.SpecialToken.Dsml)
    checked(tokenizer, "decode", checked(tokenizer, "encode", "a<｜User｜>b"))
    for protocol in ("chat", "chat_completions", "responses", "messages"):
        checked(_native, "sse_done_message", protocol)
    chat = dr.ChatCompletionResponse("id", "m", 1, 2, 3)
    gen = dr.ChatCompletionChunkGenerator("id", "m")
    chunks = dr.StreamProcessor(gen, dr.ParsingOptions()).finish()
    for chunk in chunks:
        checked(chat, "accumulate", chunk)
        checked(dr.ChatCompletionResponse, "sse_event_name", chunk)
    for cls, gen_cls in [(dr.ResponsesResponse, dr.ResponsesChunkGenerator),
                         (dr.MessagesResponse, dr.MessagesChunkGenerator)]:
        generator = gen_cls("id", "m") if gen_cls is dr.ResponsesChunkGenerator else gen_cls("id", "m", False)
        accumulator = cls("id", "m", 1, 2, 3)
        for event in dr.StreamProcessor(generator, dr.ParsingOptions()).finish():
            checked(accumulator, "accumulate", event)
            checked(cls, "sse_event_name", event)
        checked(accumulator, "to_json")
