//! OpenAI Responses requests: the wire types ([`types`], [`items`], [`shapes`]), the declared
//! tools ([`tools`]), the echoed settings ([`echo`]) and the conversion ([`convert`], run by the
//! shared [`crate::driver`]).

mod call_group;
mod convert;
mod echo;
mod items;
mod shapes;
mod tools;
pub mod types;

pub use types::*;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common;
use crate::error::{ConvResult, RequestError};
use crate::options::ConversionOptions;
use crate::request::ConversationRequest;

impl ResponsesRequest {
    pub fn from_value(v: Value) -> Result<Self, RequestError> {
        let raw_reasoning = v.get("reasoning").filter(|r| !r.is_null()).cloned();
        let raw_text = v.get("text").filter(|r| !r.is_null()).cloned();
        let mut req: ResponsesRequest = crate::body::from_value(v)?;
        req.raw_reasoning = raw_reasoning;
        req.raw_text = raw_text;
        Ok(req)
    }

    /// Parse and type a body. The `input` items are typed while they are read, one at a time,
    /// so the item list never exists as a whole JSON value.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, RequestError> {
        let (value, items) =
            crate::body::parse_json_preparing::<InputItem>(bytes, Self::body_fields(), "input")?;
        crate::body::with_prepared(items, || Self::from_value(value))
    }

    /// The top-level body fields this request reads (`reasoning` and `text` are echoed back as
    /// given); others are ignored.
    pub fn body_fields() -> &'static [&'static str] {
        crate::body::struct_fields::<Self>()
    }

    /// `"ns::name" → (ns, name)` for every function declared inside a namespace tool.
    pub fn namespace_tool_map(
        &self,
        options: &ConversionOptions,
    ) -> ConvResult<BTreeMap<String, (String, String)>> {
        let version = common::resolve_model(options, &self.model)?;
        let tools = self.tools.as_deref().unwrap_or(&[]);
        let (_, map) = tools::declared_tools(tools, options, version, true)?;
        Ok(map)
    }

    pub fn convert(self, options: &ConversionOptions) -> ConvResult<ConversationRequest> {
        let echo = self.echo();
        let mut converted =
            crate::driver::convert(convert::ResponsesConversion { req: self }, options)?;
        converted.responses_echo = Some(echo);
        Ok(converted)
    }
}
