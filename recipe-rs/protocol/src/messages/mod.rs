//! Anthropic Messages requests: the wire types ([`types`], [`shapes`]), content blocks as
//! message parts ([`blocks`]) and the conversion ([`convert`], run by the shared
//! [`crate::driver`]).

mod blocks;
mod convert;
mod shapes;
pub mod types;

pub use blocks::{is_messages_base64, spaced_json};
pub use types::*;

use serde_json::Value;

use crate::error::{ConvResult, RequestError};
use crate::options::ConversionOptions;
use crate::request::ConversationRequest;

impl MessagesRequest {
    pub fn from_value(v: Value) -> Result<Self, RequestError> {
        crate::body::from_value(v)
    }

    /// Parse and type a body. The message list is typed while it is read, one message at a
    /// time, so it never exists as a whole JSON value.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, RequestError> {
        let (value, messages) = crate::body::parse_json_preparing::<MessagesMessage>(
            bytes,
            Self::body_fields(),
            "messages",
        )?;
        crate::body::with_prepared(messages, || Self::from_value(value))
    }

    /// The top-level body fields this request reads; others are ignored.
    pub fn body_fields() -> &'static [&'static str] {
        crate::body::struct_fields::<Self>()
    }

    pub fn convert(self, options: &ConversionOptions) -> ConvResult<ConversationRequest> {
        crate::driver::convert(convert::MessagesConversion::new(self), options)
    }
}
