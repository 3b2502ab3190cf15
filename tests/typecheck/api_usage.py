"""Typical use of the codec, type-checked by `mypy --strict` in .ci/run (not run by pytest).

Each `assert_type` pins what the stub `_native.pyi` promises a caller: the overloads (request
bodies, the stream processor's item type, `sse_done_message`), `Optional` where the API returns
`None`, `Literal` strings, enums as their own classes. A stub change that loosens or breaks one
of these fails the check. Running the file also works: `assert_type` does nothing at run time.
"""

from __future__ import annotations

from typing import Any, Literal

import deepseek_recipe as dr
from typing_extensions import assert_type


def convert_and_encode(tokenizer: dr.Tokenizer, body: dict[str, Any], text: str, raw: bytes) -> list[int]:
    options = dr.ConversionOptions(messages_web_search=dr.WebSearchBehavior.Drop).with_model_alias(
        "alias", dr.ModelVersion.DeepseekV41Flash
    )
    assert_type(options.model_versions_by_name, dict[str, dr.ModelVersion])
    for request in (dr.ChatCompletionRequest(body), dr.ChatCompletionRequest(text), dr.ChatCompletionRequest(raw)):
        assert_type(request.model, str)
    converted = dr.ResponsesRequest(body).convert(options)
    assert_type(converted, dr.ConversationRequest)
    assert_type(converted.model_version, dr.ModelVersion)
    assert_type(converted.inference_options.max_tokens, int | None)
    constraint = converted.inference_options.output_constraint
    if constraint is not None:
        assert_type(constraint.kind, Literal["json", "regex", "tool_call", "tool_call_required"])
    conversation = converted.conversation
    assert_type(conversation.reasoning_effort, Literal["low", "high", "xhigh", "max"] | None)
    for message in conversation.messages:
        assert_type(message.role, Literal["system", "user", "assistant", "tool", "latest_reminder"])
        assert_type(message.tool_calls, list[dr.ToolCall] | None)
        for source in message.image_sources:
            assert_type(source.data, bytes | None)
    encoding = dr.DeepseekV41Encoding().with_tokenizer(tokenizer)
    rendered = encoding.render_conversation(conversation)
    assert_type(rendered.special_ranges, list[tuple[int, int]])
    return encoding.encode(conversation)


def build_conversation() -> dr.Conversation:
    tool = dr.ToolDefinition("weather", "Current weather", {"type": "object"}, strict=True)
    messages: list[dr.Message] = [
        dr.SystemMessage("be brief", tools=[tool]),
        dr.UserMessage("look <｜image｜>", [dr.BytesImageSource(b"\x89PNG", "low")]),
        dr.AssistantMessage("", "thinking", [dr.ToolCall("c1", "weather", "{}")]),
        dr.ToolMessage("sunny", "c1"),
    ]
    return dr.Conversation(messages, tools=[tool], tool_choice="required", reasoning_effort="max")


def conversation_json_round_trip(conversation: dr.Conversation) -> dr.Conversation:
    text = conversation.to_json()
    assert_type(text, str)
    return dr.Conversation.from_json(text)


def stream_chat(request: dr.ConversationRequest, tokenizer: dr.Tokenizer, ids: list[int]) -> str:
    generator = dr.ChatCompletionRequest.chunk_generator(request, "chatcmpl-1", "DeepSeek-V4.1-Flash")
    processor = dr.StreamProcessor(generator, request.parsing_options, tokenizer)
    assert_type(processor, "dr.StreamProcessor[dr.ChatCompletionChunk]")
    response = dr.ChatCompletionResponse("chatcmpl-1", "DeepSeek-V4.1-Flash", 0, len(ids), 0)
    sse = ""
    for chunk in [*processor.push(dr.InferenceChunk.tokens(ids)), *processor.finish()]:
        assert_type(chunk, dr.ChatCompletionChunk)
        response.accumulate(chunk)
        sse += chunk.to_sse()
    assert_type(dr.ChatCompletionResponse.sse_done_data(), str)
    assert_type(dr.sse_done_message("chat"), str)
    return sse + response.to_json()


def stream_messages(request: dr.ConversationRequest) -> list[str]:
    generator = dr.MessagesRequest.chunk_generator(request, "msg_1", "DeepSeek-V4-Pro").with_signature("sig")
    processor = dr.StreamProcessor(generator, dr.ParsingOptions(stop_sequences=["END"]))
    events = processor.push(dr.InferenceChunk.text("hello", 1))
    assert_type(events, list[dr.MessagesStreamEvent])
    assert_type(dr.MessagesResponse.sse_done_data(), None)
    assert_type(dr.sse_done_message("messages"), None)
    return [event.type for event in events]


def stream_responses(echo: dr.ResponsesEcho, protocol: str) -> str | None:
    generator = dr.ResponsesChunkGenerator("resp_1", "m", thinking_mode=True).with_echo(echo)
    options = dr.ParsingOptions(thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart)
    options.stop_sequences = ("a", "b")
    processor = dr.StreamProcessor(generator, options)
    assert_type(processor.finish(), list[dr.ResponsesStreamEvent])
    chunk = dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=3))
    assert_type(chunk.prompt_usage, dr.PromptUsage | None)
    assert_type(dr.InferenceChunk.finish(dr.InferenceFinishReason.Length).finish_reason, dr.InferenceFinishReason | None)
    return dr.sse_done_message(protocol)


def handle_error(body: str) -> tuple[int, str]:
    try:
        dr.MessagesRequest(body).convert(dr.ConversionOptions())
    except dr.ConversionError as e:
        return e.status_code, e.body
    return 200, ""


def vocabulary() -> str:
    tokens = dr.SpecialTokens(image="<img>")
    assert_type(dr.IMAGE_SPECIAL_TOKEN_ID, Literal[129264])
    return tokens.token(dr.SpecialToken.Image) + dr.SpecialToken.Dsml.default_str()


def encode_session(encoding: dr.DeepseekV4Encoding, turns: list[dr.Conversation]) -> list[int]:
    session = dr.EncodingSession(encoding, max_cached_tokens=1 << 16)
    ids: list[int] = []
    for conversation in turns:
        ids = session.encode(conversation)
        turn = session.last_turn
        assert_type(turn, dr.SessionTurn)
        assert_type(turn.extends_previous, bool)
        assert_type(turn.divergence_token, int | None)
        assert_type(turn.detail, str | None)
        if turn.cause == "reasoning_dropped_from_history":
            assert_type(turn.message_index, int | None)
        assert_type(turn.to_dict(), dict[str, int | bool | str | None])
    session.reset()
    assert_type(session.memory_bytes, int)
    return ids


def check_encoder(encoding: dr.DeepseekV41Encoding, conversation: dr.Conversation, ids: list[int]) -> str:
    assert_type(dr.check_token_ids(encoding, conversation, ids), str)
    return dr.check_prompt_text(encoding, conversation, "prompt")


def resolve_images(sources: list[dr.ImageSource], png: bytes) -> int:
    fetcher = dr.ReqwestImageFetcher.with_max_bytes(1 << 20).with_destination_filter(lambda host, ip: host == "cdn")
    assert_type(fetcher.with_public_destinations_only(), dr.ReqwestImageFetcher)
    preprocessor = dr.OpenCvImagePreprocessor()
    options = dr.PreprocessOptions("low", 2048, 512)
    assert_type(options.detail, Literal["low", "high", "original", "auto"])
    info = preprocessor.preprocess(png, options)
    assert_type(info.data, bytes)
    quota = dr.ImageQuota()
    try:
        data = dr.ImageResolver(fetcher, preprocessor).resolve(sources, quota)
    except dr.ImageError as e:
        assert_type(e.is_retryable, bool)
        return -1 if e.kind == "FetchStatus" else -2
    except dr.CalcResizeError:
        return -3
    assert_type(data.images, list[dr.ImageInfo])
    assert_type(quota.byte_size(), int)
    return data.image_token_adjustment() + dr.MultiModalData([info]).image_token_adjustment()


def constrain(request: dr.ConversationRequest, tokenizer: dr.Tokenizer, mask: object) -> int:
    try:
        grammar = dr.OutputGrammar.compile(request, tokenizer, thinking_budget=256)
    except dr.UnsupportedSchemaError:
        return -1
    except dr.GrammarError:
        return -2
    if grammar is None:
        return 0
    assert_type(grammar.vocab_size, int)
    assert_type(grammar.structural_tag_json(), str)
    matcher = grammar.matcher()
    matcher.fill_bitmask(mask, 0)
    assert_type(matcher.accept_token(1), bool)
    assert_type(matcher.accept_tokens([1, 2]), int)
    matcher.rollback(1)
    assert_type(matcher.is_accepting(), bool)
    assert_type(matcher.is_terminated(), bool)
    return matcher.num_accepted
