"""One codec `StreamProcessor` per response, shared by the reasoning parser and the tool parser.

vLLM composes a reasoning parser and a tool parser into one `Parser` per response and feeds the
reasoning parser until reasoning ends, then the tool parser. Both of ours hand the delta token
IDs to the same `StreamSession`, which pushes them through one processor, so the codec sees the
output once, as token IDs: only the real `</think>` and `｜DSML｜` IDs end reasoning or open a
call, never text that spells them.

The session is kept on the owning vLLM `Parser` (both parsers are built inside its constructor,
which is where they find it). For complete outputs the owner's `parse` is wrapped to record the
output token IDs vLLM passes it, since vLLM hands the parsers themselves only decoded text.
Without an owner (a parser built on its own) a session is private and parses text.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

import deepseek_recipe as dr

from .codec import Codec

THINK_START, THINK_END, DSML, ASSISTANT = "<think>", "</think>", "｜DSML｜", "<｜Assistant｜>"
# What the generation prompt ends with when a tool call is forced (V4.1 and V4 dialects).
CALLS_OPENERS = (" calls>\n", "tool_calls>\n")


@dataclass
class Piece:
    """Output the processor released for some input: texts, call pieces, reasoning-token count."""
    reasoning: str = ""
    content: str = ""
    calls: list = field(default_factory=list)   # (index, id, name, arguments) pieces
    reasoning_tokens: int | None = None


def read_chunks(chunks) -> Piece:
    """Join the codec's Chat Completions chunks into one piece (the opening role chunk is framing)."""
    piece = Piece()
    for chunk in chunks:
        data = json.loads(chunk.to_json())
        usage = data.get("usage") or {}
        details = usage.get("completion_tokens_details") or {}
        if "reasoning_tokens" in details:
            piece.reasoning_tokens = details["reasoning_tokens"]
        for choice in data.get("choices", []):
            delta = choice.get("delta") or {}
            piece.reasoning += delta.get("reasoning_content") or ""
            piece.content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                function = call.get("function") or {}
                piece.calls.append((call["index"], call.get("id"), function.get("name"),
                                    function.get("arguments") or ""))
    return piece


class Markers:
    """IDs of the control tokens that tell where the generation prompt leaves the parser."""

    def __init__(self, codec: Codec):
        self.codec = codec
        self.think_start = codec.control_id(THINK_START)
        self.think_end = codec.control_id(THINK_END)
        self.dsml = codec.control_id(DSML)
        self.assistant = codec.control_id(ASSISTANT)

    def reasoning_closed(self, ids) -> bool:
        """Whether the last reasoning marker in `ids` closes reasoning (or none is open)."""
        for token in reversed(list(ids)):
            if token in (self.think_end, self.dsml):
                return True
            if token == self.think_start:
                return False
        return True

    def parse_start(self, prompt_ids) -> tuple:
        """(thinking stage name or None, starts in a calls block) after a rendered prompt."""
        ids = list(prompt_ids)
        turn = max((i for i, t in enumerate(ids) if t == self.assistant), default=-1)
        tail = ids[turn + 1:]
        in_calls = False
        if self.dsml in tail:
            last = len(tail) - 1 - tail[::-1].index(self.dsml)
            in_calls = self.codec.tokenizer.decode(tail[last:]).endswith(CALLS_OPENERS)
        if self.think_start in tail and self.think_end not in tail:
            at = tail.index(self.think_start)
            return ("ReasoningStart" if at == len(tail) - 1 else "ReasoningContinuation"), in_calls
        if self.think_start in tail and self.think_end in tail:
            return "ContentContinuation", in_calls
        return None, in_calls


class StreamSession:
    def __init__(self, codec: Codec, thinking_default: bool = True):
        self.codec = codec
        self.markers = Markers(codec)
        self.thinking_default = thinking_default
        self.prompt_ids = None
        self.tools_declared = False
        self.has_tool_parser = False
        self.skip_reasoning = False
        self.reasoning_ended = False
        self.handoff_pending = False
        self.handoff_calls: list = []
        self.reasoning_tokens = 0
        self._processor = None
        self._finished = False
        self._output_ids = None
        self._complete: Piece | None = None

    # -- set-up ---------------------------------------------------------------------------
    def _options(self):
        if self.prompt_ids is not None:
            stage, in_calls = self.markers.parse_start(self.prompt_ids)
        else:
            stage, in_calls = ("ReasoningStart" if self.thinking_default else None), False
        if self.skip_reasoning:
            stage = None
        parse_tools = self.has_tool_parser and self.tools_declared
        options = dr.ParsingOptions(
            parse_tool_calls=parse_tools,
            starts_in_tool_calls=parse_tools and in_calls,
            thinking_initial_stage=None if stage is None else getattr(dr.ThinkingInitialStage, stage),
        )
        return options, stage

    def _new_processor(self):
        options, stage = self._options()
        request = dr.ConversationRequest(dr.Conversation(), self.codec.model_version)
        generator = dr.ChatCompletionRequest.chunk_generator(request, "", self.codec.model)
        return dr.StreamProcessor(generator, options, self.codec.tokenizer), stage

    # -- streaming ------------------------------------------------------------------------
    def push(self, ids) -> Piece:
        if self._processor is None:
            self._processor, stage = self._new_processor()
            self.reasoning_ended = stage in (None, "ContentContinuation")
        if self._finished or not ids:
            return Piece()
        piece = read_chunks(self._processor.push(dr.InferenceChunk.tokens(list(ids))))
        if piece.content or piece.calls or self.markers.think_end in ids:
            self.reasoning_ended = True
        return piece

    def finish(self) -> Piece:
        if self._processor is None or self._finished:
            return Piece()
        self._finished = True
        piece = read_chunks(self._processor.finish())
        if piece.reasoning_tokens is not None:
            self.reasoning_tokens = piece.reasoning_tokens
        return piece

    # -- complete outputs -----------------------------------------------------------------
    def begin_complete(self, output_ids) -> None:
        self._output_ids = list(output_ids) if output_ids else None
        self._complete = None

    def complete(self, text: str) -> Piece:
        """The whole output parsed once (from the recorded IDs, else from `text`)."""
        if self._complete is None:
            processor, _ = self._new_processor()
            chunk = (dr.InferenceChunk.tokens(self._output_ids) if self._output_ids is not None
                     else dr.InferenceChunk.text(text))
            piece = read_chunks(list(processor.push(chunk)) + list(processor.finish()))
            if piece.reasoning_tokens is not None:
                self.reasoning_tokens = piece.reasoning_tokens
            self._complete = piece
        return self._complete


def _owning_parser():
    """The vLLM `Parser` whose constructor is building the caller (None if there is none)."""
    try:
        from vllm.parser.abstract_parser import Parser
    except ImportError:  # pragma: no cover - vLLM without the unified parser
        return None
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, Parser):
            return owner
        frame = frame.f_back
    return None


def session_for(codec: Codec, thinking_default: bool) -> StreamSession:
    """The session of the `Parser` being built, created (and its entry points wrapped) once."""
    owner = _owning_parser()
    if owner is None:
        return StreamSession(codec, thinking_default)
    session = owner.__dict__.get("_deepseek_recipe_session")
    if session is None:
        session = StreamSession(codec, thinking_default)
        owner._deepseek_recipe_session = session
        _record_ids(owner, session)
    return session


def _record_ids(owner, session: StreamSession) -> None:
    parse, set_prompt = owner.parse, owner.set_prompt_token_ids

    def parse_with_ids(model_output, request, enable_auto_tools=False, model_output_token_ids=()):
        session.begin_complete(model_output_token_ids)
        return parse(model_output, request, enable_auto_tools=enable_auto_tools,
                     model_output_token_ids=model_output_token_ids)

    def set_prompt_token_ids(prompt_token_ids):
        session.prompt_ids = list(prompt_token_ids)
        return set_prompt(prompt_token_ids)

    owner.parse = parse_with_ids
    owner.set_prompt_token_ids = set_prompt_token_ids
