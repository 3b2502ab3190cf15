"""The `deepseek_recipe` renderer: chat messages in, prompt token IDs out, through this codec.

`render_messages` converts the request with `ChatCompletionRequest.convert` and encodes the
conversation with the codec's structural encoder, so a control token appears only where the
template puts one, and returns the IDs as a tokens prompt: vLLM never tokenizes a prompt string.
A request the codec rejects becomes a 400 with the codec's message.
"""

from __future__ import annotations

import json

from vllm.exceptions import VLLMValidationError
from vllm.renderers.base import BaseRenderer
from vllm.renderers.inputs.preprocess import parse_dec_only_prompt
from vllm.renderers.params import ChatParams
from vllm.utils.async_utils import make_async

import deepseek_recipe as dr

from .codec import codec_for, model_name
from .request import chat_body, conversation_messages, has_images


def _conversion_message(error: Exception) -> str:
    try:
        return json.loads(error.body)["error"]["message"]
    except (AttributeError, TypeError, ValueError, KeyError):
        return str(error)


class DeepseekRecipeRenderer(BaseRenderer):
    def __init__(self, config, tokenizer) -> None:
        super().__init__(config, tokenizer)
        self._model = model_name(self.model_config)
        self._render_async = make_async(self.render_messages, executor=self._executor)

    def _codec(self):
        return codec_for(self.get_tokenizer(), self._model)

    def prompt_ids(self, messages: list, params: ChatParams) -> list[int]:
        """The codec's prompt IDs for vLLM's messages and chat parameters."""
        if has_images(messages):
            raise VLLMValidationError("image inputs are not supported by the deepseek_recipe "
                                      "renderer; send text content", parameter="messages")
        kwargs = params.get_apply_chat_template_kwargs()
        body = chat_body(messages, kwargs, params.tool_choice, params.response_format, self._model)
        try:
            converted = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())
        except dr.ConversionError as error:
            raise VLLMValidationError(_conversion_message(error)) from error
        except ValueError as error:  # the body does not match the Chat Completions schema
            raise VLLMValidationError(str(error)) from error
        try:
            return list(self._codec().encoding.encode(converted.conversation))
        except RuntimeError as error:  # e.g. a control token missing from the vocabulary
            raise VLLMValidationError(f"deepseek_recipe could not encode the prompt: {error}") from error

    def render_messages(self, messages, params: ChatParams):
        ids = self.prompt_ids(messages, params)
        return conversation_messages(messages), parse_dec_only_prompt(ids)

    async def render_messages_async(self, messages, params: ChatParams):
        return await self._render_async(messages, params)
