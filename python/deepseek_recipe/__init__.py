"""DeepSeek V4 / V4.1 prompt-protocol codec.

Everything here is implemented in Rust (`recipe-rs/`) and exposed through the `_native`
extension module; this package only re-exports it.
"""

from ._native import __version__

# Output processing (recipe-rs/stream).
from ._native import (
    ChatCompletionChunk,
    ChatCompletionChunkGenerator,
    ChatCompletionResponse,
    InferenceChunk,
    InferenceFinishReason,
    MessagesChunkGenerator,
    MessagesResponse,
    MessagesStreamEvent,
    PromptUsage,
    ResponsesChunkGenerator,
    ResponsesResponse,
    ResponsesStreamEvent,
    StreamProcessor,
    sse_done_message,
)

__all__ = [
    "__version__",
    "ChatCompletionChunk",
    "ChatCompletionChunkGenerator",
    "ChatCompletionResponse",
    "InferenceChunk",
    "InferenceFinishReason",
    "MessagesChunkGenerator",
    "MessagesResponse",
    "MessagesStreamEvent",
    "PromptUsage",
    "ResponsesChunkGenerator",
    "ResponsesResponse",
    "ResponsesStreamEvent",
    "StreamProcessor",
    "sse_done_message",
]
