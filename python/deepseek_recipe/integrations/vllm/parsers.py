"""The `deepseek_recipe` reasoning parser and tool parser for vLLM.

Both are thin views of one `StreamSession` (see `stream.py`): the reasoning parser feeds it while
vLLM is in the reasoning phase and reports reasoning (and any answer text in the same delta); the
tool parser feeds it afterwards and reports answer text and tool calls. Both declare
`engine_based_streaming`, so vLLM passes each delta's token IDs as they come and lets the parser
say when reasoning has ended. Required and named tool choices are parsed like `auto`
(`supports_required_and_named = False`): the model writes DSML, not JSON. `adjust_request`
attaches the codec's own output grammar (`structured.py`) as the request's structural tag, so
`vllm serve … --tool-call-parser deepseek_recipe` constrains calls with the encoder's tables;
vLLM's built-in `deepseek_v4_1` tag (`structural_tag_model`) is the fallback.
"""

from __future__ import annotations

from collections.abc import Sequence

from vllm.entrypoints.generate.base.protocol import (
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.reasoning import ReasoningParser
from vllm.tool_parsers.abstract_tool_parser import ToolParser

from .codec import codec_for, model_name
from .request import chat_body, thinking_requested
from .stream import THINK_END, THINK_START, Piece, StreamSession, session_for
from .structured import structural_tag_for


def _session(tokenizer, kwargs) -> StreamSession:
    codec = codec_for(tokenizer, model_name(kwargs.get("model_config")))
    return session_for(codec, thinking_requested(kwargs.get("chat_template_kwargs") or {}))


def _delta(piece: Piece, *, content: str | None = None) -> DeltaMessage | None:
    text = piece.content if content is None else content
    calls = [DeltaToolCall(index=index, id=call_id, type="function" if call_id else None,
                           function=DeltaFunctionCall(name=name, arguments=arguments))
             for index, call_id, name, arguments in piece.calls]
    if not (piece.reasoning or text or calls):
        return None
    return DeltaMessage(reasoning=piece.reasoning or None, content=text or None, tool_calls=calls)


def _whole_calls(piece: Piece) -> list[ToolCall]:
    calls: dict = {}
    for index, call_id, name, arguments in piece.calls:
        entry = calls.setdefault(index, [call_id, name, ""])
        entry[0] = entry[0] or call_id
        entry[1] = entry[1] or name
        entry[2] += arguments
    return [ToolCall(id=call_id, function=FunctionCall(id=call_id, name=name, arguments=arguments))
            for _, (call_id, name, arguments) in sorted(calls.items())]


class DeepseekRecipeReasoningParser(ReasoningParser):
    engine_based_streaming = True

    def __init__(self, tokenizer, *args, **kwargs):
        super().__init__(tokenizer, *args, **kwargs)
        self._session = _session(tokenizer, kwargs)

    @property
    def reasoning_start_str(self) -> str:
        return THINK_START

    @property
    def reasoning_end_str(self) -> str:
        return THINK_END

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        return self._session.markers.reasoning_closed(input_ids)

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        end = self._session.markers.think_end
        ids = list(input_ids)
        return ids[len(ids) - ids[::-1].index(end):] if end in ids else []

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        self._session.prompt_ids = list(prompt_token_ids)

    def adjust_initial_state_from_prompt(self, prompt_token_ids: Sequence[int]) -> None:
        self._session.prompt_ids = list(prompt_token_ids)

    def has_engine_confirmed_reasoning_end(self) -> bool:
        return self._session.reasoning_ended

    def extract_reasoning_streaming(self, previous_text, current_text, delta_text,
                                    previous_token_ids, current_token_ids, delta_token_ids):
        session = self._session
        piece = session.push(delta_token_ids)
        if session.reasoning_ended and session.has_tool_parser:
            # vLLM hands the answer text of this delta to the tool parser next; the call pieces
            # the same push released wait there for it.
            session.handoff_pending = True
            session.handoff_calls = piece.calls
            piece = Piece(reasoning=piece.reasoning, content=piece.content)
        return _delta(piece)

    def finish_streaming(self) -> DeltaMessage | None:
        # Called at the switch to the tool phase too; the processor carries on there.
        if self._session.reasoning_ended:
            return None
        return _delta(self._session.finish())

    def extract_reasoning(self, model_output: str, request) -> tuple[str | None, str | None]:
        piece = self._session.complete(model_output)
        return piece.reasoning or None, piece.content or None

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        return self._session.reasoning_tokens


class DeepseekRecipeToolParser(ToolParser):
    supports_required_and_named = False
    structural_tag_model = "deepseek_v4_1"
    engine_based_streaming = True

    def __init__(self, tokenizer, tools=None, **kwargs):
        super().__init__(tokenizer, tools)
        self._codec = codec_for(tokenizer, model_name(kwargs.get("model_config")))
        self._session = _session(tokenizer, kwargs)
        self._session.has_tool_parser = True
        self._session.tools_declared = bool(tools)

    def adjust_request(self, request):
        """Constrain the request's output with the codec's grammar (its structural tag), unless
        the request brings its own structured output; otherwise vLLM's default handling."""
        tools = getattr(request, "tools", None)
        if tools and getattr(request, "structured_outputs", None) is None:
            from vllm.sampling_params import StructuredOutputsParams

            kwargs = {**(getattr(request, "chat_template_kwargs", None) or {}), "tools": tools}
            body = chat_body(list(request.messages), kwargs, request.tool_choice, None, self._codec.model)
            tag = structural_tag_for(self._codec, body)
            if tag is not None:
                request.structured_outputs = StructuredOutputsParams(structural_tag=tag)
                request.skip_special_tokens = False
                return request
        return super().adjust_request(request)

    @property
    def skip_reasoning_parsing(self) -> bool:
        return self._session.skip_reasoning

    @skip_reasoning_parsing.setter
    def skip_reasoning_parsing(self, value: bool) -> None:
        self._session.skip_reasoning = value

    def extract_tool_calls_streaming(self, previous_text, current_text, delta_text,
                                     previous_token_ids, current_token_ids, delta_token_ids,
                                     request) -> DeltaMessage | None:
        session = self._session
        if session.handoff_pending:
            session.handoff_pending = False
            return _delta(Piece(calls=session.handoff_calls), content=delta_text or "")
        return _delta(session.push(delta_token_ids))

    def finish_streaming(self) -> DeltaMessage | None:
        return _delta(self._session.finish())

    def extract_tool_calls(self, model_output: str, request) -> ExtractedToolCallInformation:
        piece = self._session.complete(model_output)
        calls = _whole_calls(piece)
        return ExtractedToolCallInformation(tools_called=bool(calls), tool_calls=calls,
                                            content=piece.content or None)
