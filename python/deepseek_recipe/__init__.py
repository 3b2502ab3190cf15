"""DeepSeek V4 / V4.1 prompt-protocol codec.

Everything here is implemented in Rust (`recipe-rs/`) and exposed through the `_native`
extension module; this package only re-exports it.
"""

from ._native import (
    AssistantMessage,
    BytesImageSource,
    Conversation,
    DataUrlImageSource,
    ImageSource,
    LatestReminderMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UrlImageSource,
    UserMessage,
    ChatCompletionRequest,
    ConversationRequest,
    ConversionError,
    ConversionOptions,
    InferenceOptions,
    OutputConstraint,
    ReasoningContentBehavior,
    ResponsesEcho,
    WebSearchBehavior,
    __version__,
)

__all__ = [
    "AssistantMessage",
    "BytesImageSource",
    "Conversation",
    "DataUrlImageSource",
    "ImageSource",
    "LatestReminderMessage",
    "Message",
    "SystemMessage",
    "ToolCall",
    "ToolDefinition",
    "ToolMessage",
    "UrlImageSource",
    "UserMessage",
    "ChatCompletionRequest",
    "ConversationRequest",
    "ConversionError",
    "ConversionOptions",
    "InferenceOptions",
    "OutputConstraint",
    "ReasoningContentBehavior",
    "ResponsesEcho",
    "WebSearchBehavior",
    "__version__",
]
