"""The request APIs the codec serves, as one table.

Each :class:`Api` names one protocol (Chat Completions, Responses, Messages): its request, response and
chunk-generator classes, the names the command line and the HTTP paths use for it, and the prefix of the
response ids. The command line (``cli/inputs.py``, ``cli/parse.py``), the engine's protocol API and the
server read this table; none of them names a codec class by a string. It only groups classes of the
native module: every rule about what the bodies mean lives in the codec (Rust).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from ._native import (
    ChatCompletionChunkGenerator,
    ChatCompletionRequest,
    ChatCompletionResponse,
    MessagesChunkGenerator,
    MessagesRequest,
    MessagesResponse,
    ResponsesChunkGenerator,
    ResponsesRequest,
    ResponsesResponse,
)

Request = TypeVar("Request", ChatCompletionRequest, ResponsesRequest, MessagesRequest)
Response = TypeVar("Response", ChatCompletionResponse, ResponsesResponse, MessagesResponse)
ChunkGenerator = TypeVar("ChunkGenerator", ChatCompletionChunkGenerator, ResponsesChunkGenerator,
                         MessagesChunkGenerator)


@dataclass(frozen=True)
class Api(Generic[Request, Response, ChunkGenerator]):
    """One request API and the codec classes that serve it."""

    #: The API's name as OpenAI / Anthropic write it (``chat.completions``, ``responses``, ``messages``).
    name: str
    #: The command line's ``--format`` / ``--api`` value.
    format: str
    #: The HTTP path (and batch-file ``url``) the API is served under.
    path: str
    request: type[Request]
    response: type[Response]
    chunk_generator: type[ChunkGenerator]
    #: The prefix of the ids of the responses it writes.
    id_prefix: str


CHAT_COMPLETIONS: Api[ChatCompletionRequest, ChatCompletionResponse, ChatCompletionChunkGenerator] = Api(
    "chat.completions", "chat", "/v1/chat/completions", ChatCompletionRequest, ChatCompletionResponse,
    ChatCompletionChunkGenerator, "chatcmpl-")
RESPONSES: Api[ResponsesRequest, ResponsesResponse, ResponsesChunkGenerator] = Api(
    "responses", "responses", "/v1/responses", ResponsesRequest, ResponsesResponse, ResponsesChunkGenerator,
    "resp_")
MESSAGES: Api[MessagesRequest, MessagesResponse, MessagesChunkGenerator] = Api(
    "messages", "messages", "/v1/messages", MessagesRequest, MessagesResponse, MessagesChunkGenerator, "msg_")

AnyApi = (Api[ChatCompletionRequest, ChatCompletionResponse, ChatCompletionChunkGenerator]
          | Api[ResponsesRequest, ResponsesResponse, ResponsesChunkGenerator]
          | Api[MessagesRequest, MessagesResponse, MessagesChunkGenerator])

#: Every API, in the order the documentation lists them.
APIS: tuple[AnyApi, ...] = (CHAT_COMPLETIONS, RESPONSES, MESSAGES)
#: The same APIs by ``name``, by command-line ``format`` and by HTTP ``path``.
BY_NAME: dict[str, AnyApi] = {api.name: api for api in APIS}
BY_FORMAT: dict[str, AnyApi] = {api.format: api for api in APIS}
BY_PATH: dict[str, AnyApi] = {api.path: api for api in APIS}
