//! The one canonical JSON form of a [`Conversation`], and its validation.
//!
//! The layout (what [`Conversation::to_json`] writes; fields marked `?` may be left out when
//! read, and then take the value shown):
//!
//! ```text
//! CONVERSATION = {"messages"?: [MESSAGE] = [], "thinking_mode"?: bool = true,
//!                 "tools"?: [TOOL] = [], "tool_choice"?: "auto"|"none"|"required" = "auto",
//!                 "reasoning_effort"?: "low"|"high"|"xhigh"|"max"|null = null,
//!                 "response_format"?: "text"|"json_object"|"json_schema"|"regex" = "text",
//!                 "response_schema"?: JSON|null = null, "response_regex"?: str|null = null}
//! MESSAGE = {"role": "system", "content": str, "image_sources"?: [IMAGE] = [],
//!            "tools"?: [TOOL]|null = null, IMAGE_TEXT}
//!         | {"role": "user", "content": str, "image_sources"?: [IMAGE] = [], IMAGE_TEXT}
//!         | {"role": "assistant", "content"?: str = "", "reasoning_content"?: str|null = null,
//!            "tool_calls"?: [{"id": str, "name": str, "arguments": str}]|null = null,
//!            "prefix"?: bool = false}
//!         | {"role": "tool", "content": str, "tool_call_id"?: str|null = null,
//!            "image_sources"?: [IMAGE] = [], IMAGE_TEXT}
//!         | {"role": "latest_reminder", "content": str}
//! IMAGE_TEXT = "image_token"?: str = "<｜image｜>" (not empty), "placeholders"?: [int]
//! IMAGE = {"kind": "data_url"|"url"|"bytes", "value": str (hex digits for bytes),
//!          "detail"?: "low"|"high"|"original"|"auto" = "high", "path"?: str = ""}
//! TOOL = {"name": str, "description"?: str|null, "parameters"?: JSON = null,
//!         "strict"?: bool|null, "defer_loading"?: bool = false}
//! ```
//!
//! `placeholders` are the byte offsets in `content` where an image placeholder starts (see
//! [`ImageText`]). When they are left out, the public constructors' rule applies: the first
//! occurrences of `image_token`, one per image. When given, each must point at `image_token`,
//! ascending and non-overlapping, at most one per image. `response_format` `"text"` with a
//! schema or a regex selects `json_schema` or `regex`, as the Python constructor does; the
//! combinations it rejects are rejected here with its messages. Unlike the constructor, the
//! `json_schema` and `regex` formats may be named (`to_json` names them); `json_schema` without a
//! schema is a schema of JSON null, so every conversation round-trips. Unknown fields are errors,
//! and so is an array where the layout has an object (see [`ObjectOnly`]).
//! Nesting is bounded by `serde_json`'s recursion limit (128 levels for the whole document),
//! so deep input is an error, never a stack overflow.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::conversation::*;
use crate::special_tokens::SpecialToken;

impl Conversation {
    /// The canonical JSON text of this conversation (see the module docs for its layout).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a conversation always serializes")
    }

    /// Read a conversation from its canonical JSON text, validated as the public constructors
    /// validate their arguments.
    pub fn from_json(text: &str) -> Result<Conversation, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// `T` read only from a JSON object. A derived struct would also take an array of its fields in
/// declaration order (so `[]` would read as an empty conversation); the layout has no such form.
pub struct ObjectOnly<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectOnly<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Object<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Object<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Object(PhantomData)).map(ObjectOnly)
    }
}

/// A list of objects (see [`ObjectOnly`]); use with `deserialize_with`.
pub(crate) fn objects<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Vec<T>, D::Error> {
    let list = Vec::<ObjectOnly<T>>::deserialize(d)?;
    Ok(list.into_iter().map(|ObjectOnly(x)| x).collect())
}

/// An optional list of objects (see [`ObjectOnly`]); use with `deserialize_with`.
pub(crate) fn optional_objects<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Vec<T>>, D::Error> {
    let list = Option::<Vec<ObjectOnly<T>>>::deserialize(d)?;
    Ok(list.map(|l| l.into_iter().map(|ObjectOnly(x)| x).collect()))
}

fn default_image_token() -> String {
    SpecialToken::Image.default_str().to_owned()
}

fn default_true() -> bool {
    true
}

fn default_text() -> String {
    "text".to_owned()
}

/// An image source as JSON.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSourceJson {
    kind: String,
    value: String,
    #[serde(default)]
    detail: ImageDetail,
    #[serde(default)]
    path: String,
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

fn unhex(text: &str) -> Result<Vec<u8>, String> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let raw = text.as_bytes();
    if !raw.len().is_multiple_of(2) {
        return Err("bytes image value must have an even number of hex digits".to_owned());
    }
    raw.chunks(2)
        .map(|pair| match (digit(pair[0]), digit(pair[1])) {
            (Some(hi), Some(lo)) => Ok(hi << 4 | lo),
            _ => Err(format!("bytes image value {text:?} is not hex")),
        })
        .collect()
}

impl From<ImageSource> for ImageSourceJson {
    fn from(s: ImageSource) -> Self {
        let (kind, value) = match s.data {
            ImageData::DataUrl(d) => ("data_url", d),
            ImageData::Url(u) => ("url", u),
            ImageData::Bytes(b) => ("bytes", hex(&b)),
        };
        ImageSourceJson {
            kind: kind.to_owned(),
            value,
            detail: s.detail,
            path: s.path,
        }
    }
}

impl TryFrom<ObjectOnly<ImageSourceJson>> for ImageSource {
    type Error = String;
    fn try_from(ObjectOnly(j): ObjectOnly<ImageSourceJson>) -> Result<Self, String> {
        let data = match j.kind.as_str() {
            "data_url" => ImageData::DataUrl(j.value),
            "url" => ImageData::Url(j.value),
            "bytes" => ImageData::Bytes(unhex(&j.value)?),
            other => {
                return Err(format!(
                    "invalid image kind {other:?}; expected \"data_url\", \"url\", or \"bytes\""
                ))
            }
        };
        Ok(ImageSource {
            data,
            detail: j.detail,
            path: j.path,
        })
    }
}

/// The image fields that system, user and tool messages share (`IMAGE_TEXT` in the layout),
/// written after each role's own fields.
#[derive(Clone, Serialize, Deserialize)]
pub struct ImageTextJson {
    #[serde(default = "default_image_token")]
    image_token: String,
    #[serde(default)]
    placeholders: Option<Vec<usize>>,
}

impl ImageTextJson {
    fn new(image_token: String, placeholders: Vec<usize>) -> Self {
        ImageTextJson {
            image_token,
            placeholders: Some(placeholders),
        }
    }

    /// `content` with its placeholders (given ones checked, missing ones found by
    /// [`ImageText::scan`]) and the image token, for a message with `images` image sources.
    fn read(self, content: String, images: usize) -> Result<(ImageText, String), String> {
        let ImageTextJson {
            image_token,
            placeholders,
        } = self;
        if image_token.is_empty() {
            return Err("image_token must not be empty".to_owned());
        }
        let Some(placeholders) = placeholders else {
            return Ok((ImageText::scan(content, &image_token, images), image_token));
        };
        if placeholders.len() > images {
            return Err(format!(
                "{} placeholders but only {images} image sources",
                placeholders.len()
            ));
        }
        let mut cursor = 0;
        for &at in &placeholders {
            let points_at_token = content
                .get(at..)
                .is_some_and(|rest| rest.starts_with(image_token.as_str()));
            if at < cursor || !points_at_token {
                return Err(format!(
                    "placeholder offset {at} does not start an image_token after the previous one"
                ));
            }
            cursor = at + image_token.len();
        }
        let text = ImageText {
            content,
            placeholders,
        };
        Ok((text, image_token))
    }
}

/// A system message as JSON.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemMessageJson {
    content: String,
    #[serde(default)]
    image_sources: Vec<ImageSource>,
    #[serde(default, deserialize_with = "optional_objects")]
    tools: Option<Vec<ToolDefinition>>,
    #[serde(flatten)]
    image_text: ImageTextJson,
}

impl From<SystemMessage> for SystemMessageJson {
    fn from(m: SystemMessage) -> Self {
        SystemMessageJson {
            content: m.content,
            image_sources: m.image_sources,
            tools: m.tools,
            image_text: ImageTextJson::new(m.image_token, m.placeholders),
        }
    }
}

impl TryFrom<SystemMessageJson> for SystemMessage {
    type Error = String;
    fn try_from(j: SystemMessageJson) -> Result<Self, String> {
        let (text, token) = j.image_text.read(j.content, j.image_sources.len())?;
        let mut m = SystemMessage::from_text(text, j.image_sources, token);
        m.tools = j.tools;
        Ok(m)
    }
}

/// A user message as JSON.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserMessageJson {
    content: String,
    #[serde(default)]
    image_sources: Vec<ImageSource>,
    #[serde(flatten)]
    image_text: ImageTextJson,
}

impl From<UserMessage> for UserMessageJson {
    fn from(m: UserMessage) -> Self {
        UserMessageJson {
            content: m.content,
            image_sources: m.image_sources,
            image_text: ImageTextJson::new(m.image_token, m.placeholders),
        }
    }
}

impl TryFrom<UserMessageJson> for UserMessage {
    type Error = String;
    fn try_from(j: UserMessageJson) -> Result<Self, String> {
        let (text, token) = j.image_text.read(j.content, j.image_sources.len())?;
        Ok(UserMessage::from_text(text, j.image_sources, token))
    }
}

/// A tool result as JSON.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolMessageJson {
    content: String,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    image_sources: Vec<ImageSource>,
    #[serde(flatten)]
    image_text: ImageTextJson,
}

impl From<ToolMessage> for ToolMessageJson {
    fn from(m: ToolMessage) -> Self {
        ToolMessageJson {
            content: m.content,
            tool_call_id: m.tool_call_id,
            image_sources: m.image_sources,
            image_text: ImageTextJson::new(m.image_token, m.placeholders),
        }
    }
}

impl TryFrom<ToolMessageJson> for ToolMessage {
    type Error = String;
    fn try_from(j: ToolMessageJson) -> Result<Self, String> {
        let (text, token) = j.image_text.read(j.content, j.image_sources.len())?;
        Ok(ToolMessage::from_text(
            text,
            j.tool_call_id,
            j.image_sources,
            token,
        ))
    }
}

/// A conversation as JSON.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationJson {
    #[serde(default, deserialize_with = "objects")]
    messages: Vec<Message>,
    #[serde(default = "default_true")]
    thinking_mode: bool,
    #[serde(default, deserialize_with = "objects")]
    tools: Vec<ToolDefinition>,
    #[serde(default)]
    tool_choice: ToolChoice,
    #[serde(default)]
    reasoning_effort: Option<ReasoningEffort>,
    #[serde(default = "default_text")]
    response_format: String,
    #[serde(default)]
    response_schema: Option<Value>,
    #[serde(default)]
    response_regex: Option<String>,
}

impl From<Conversation> for ConversationJson {
    fn from(c: Conversation) -> Self {
        let response_format = c.response_format.name().to_owned();
        let (response_schema, response_regex) = match c.response_format {
            ResponseFormat::JsonSchema(s) => (Some(s), None),
            ResponseFormat::Regex(r) => (None, Some(r)),
            _ => (None, None),
        };
        ConversationJson {
            messages: c.messages,
            thinking_mode: c.thinking_mode,
            tools: c.tools,
            tool_choice: c.tool_choice,
            reasoning_effort: c.reasoning_effort,
            response_format,
            response_schema,
            response_regex,
        }
    }
}

fn response_format(
    name: &str,
    schema: Option<Value>,
    regex: Option<String>,
) -> Result<ResponseFormat, String> {
    let both = "response_schema and response_regex cannot be combined";
    Ok(match (name, schema, regex) {
        (_, Some(_), Some(_)) => return Err(both.to_owned()),
        ("text", None, None) => ResponseFormat::Text,
        ("text" | "json_schema", Some(s), None) => ResponseFormat::JsonSchema(s),
        // A schema recorded as JSON null reads back as itself.
        ("json_schema", None, None) => ResponseFormat::JsonSchema(Value::Null),
        ("text" | "regex", None, Some(r)) => ResponseFormat::Regex(r),
        ("json_object", None, None) => ResponseFormat::JsonObject,
        ("json_object", _, _) => {
            return Err("response_format \"json_object\" cannot be combined with response_schema or response_regex".to_owned())
        }
        ("regex", Some(_), None) => {
            return Err("response_format \"regex\" cannot be combined with response_schema".to_owned())
        }
        ("regex", None, None) => return Err("response_format \"regex\" needs response_regex".to_owned()),
        ("json_schema", None, Some(_)) => {
            return Err("response_format \"json_schema\" cannot be combined with response_regex".to_owned())
        }
        (other, _, _) => {
            return Err(format!(
                "invalid response_format {other:?}; expected \"text\", \"json_object\", \"json_schema\", or \"regex\""
            ))
        }
    })
}

impl TryFrom<ObjectOnly<ConversationJson>> for Conversation {
    type Error = String;
    fn try_from(ObjectOnly(j): ObjectOnly<ConversationJson>) -> Result<Self, String> {
        Ok(Conversation {
            response_format: response_format(
                &j.response_format,
                j.response_schema,
                j.response_regex,
            )?,
            messages: j.messages,
            thinking_mode: j.thinking_mode,
            tools: j.tools,
            tool_choice: j.tool_choice,
            reasoning_effort: j.reasoning_effort,
        })
    }
}
