//! Content blocks of Messages turns: where each kind may stand, images and documents as message
//! parts, tool results, mid-conversation system turns, and tool inputs as call arguments.

use std::borrow::Cow;

use serde_json::Value;

use recipe_core::{ImageData, ImageDetail, ModelVersion};

use super::types::*;
use crate::common::image_url::{is_http_url, too_long_advice, url_too_long};
use crate::common::{self, DeclaredTool, ImagePart, Part};

impl MessagesContentBlock {
    /// The error for a block that a `user` or `system` message may not hold, if this is one.
    pub(super) fn misplaced_outside_assistant(&self, i: usize, role: Role) -> Option<String> {
        match self {
            MessagesContentBlock::Thinking { .. } => Some(format!(
                "messages.{i}.content: thinking blocks may only be in `assistant` messages"
            )),
            MessagesContentBlock::ToolUse { .. } | MessagesContentBlock::ServerToolUse { .. } => {
                Some(format!(
                    "messages.{i}: `tool_use` blocks can only be in `assistant` messages"
                ))
            }
            MessagesContentBlock::WebSearchToolResult { .. } => Some(format!(
                "messages.{i}: `web_search_tool_result` blocks can only be in `assistant` messages"
            )),
            MessagesContentBlock::ToolAddition { .. } if !matches!(role, Role::System) => {
                Some(tool_addition_misplaced(i))
            }
            _ => None,
        }
    }
}

pub(super) fn tool_addition_misplaced(i: usize) -> String {
    format!("messages.{i}: `tool_addition` blocks can only be in `system` messages")
}

pub(super) const SERVER_BLOCK_REJECTED: &str =
    "Unsupported content block: server tools are not supported";

/// JSON text with `", "` and `": "` separators and raw non-ASCII characters.
pub fn spaced_json(v: &Value) -> String {
    let mut out = String::new();
    write_spaced(v, &mut out);
    out
}

fn write_spaced(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_spaced(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_spaced(item, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A Messages image's base64 `data` in canonical form, or `None` where it is refused, as
/// officially: standard alphabet, no whitespace, no stray bits in the last symbol; a last group
/// of two or three symbols needs padding, and any number of `=` may end the data
/// (`iVBORw0KGgo===`, `AAAA=`, `=`). The official package decodes the data and encodes it again,
/// so the source carries the canonical padding (`iVBORw0KGgo=`, `AAAA`, ``).
pub fn canonical_messages_base64(s: &str) -> Option<Cow<'_, str>> {
    fn val(c: u8) -> Option<u8> {
        match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let symbols = s.trim_end_matches('=');
    let padded = symbols.len() < s.len();
    let mut last = 0u8;
    for &c in symbols.as_bytes() {
        last = val(c)?;
    }
    let pad = match symbols.len() % 4 {
        0 => "",
        1 => return None,
        2 if padded && last & 0b1111 == 0 => "==",
        3 if padded && last & 0b11 == 0 => "=",
        _ => return None,
    };
    if symbols.len() + pad.len() == s.len() {
        Some(Cow::Borrowed(s))
    } else {
        Some(Cow::Owned(format!("{symbols}{pad}")))
    }
}

/// Whether Messages accepts `s` as an image's base64 data (see [`canonical_messages_base64`]).
pub fn is_messages_base64(s: &str) -> bool {
    canonical_messages_base64(s).is_some()
}

/// The image data of an image block; `Err` carries the message suffix of a rejection.
pub(super) fn image_from_source(
    source: &MessagesImageSource,
    validate: bool,
) -> Result<Option<ImageData>, String> {
    match source {
        MessagesImageSource::Base64 { media_type, data } => {
            let data = if validate {
                canonical_messages_base64(data).ok_or_else(|| "base64 decode error".to_owned())?
            } else {
                Cow::Borrowed(data.as_str())
            };
            Ok(Some(ImageData::DataUrl(format!(
                "data:{};base64,{data}",
                media_type.as_str()
            ))))
        }
        MessagesImageSource::Url { url } => {
            if validate && !is_http_url(url) {
                return Err(format!("invalid url: {url:?}"));
            }
            if let Some(n) = url_too_long(url).filter(|_| validate) {
                return Err(too_long_advice(n));
            }
            Ok(Some(ImageData::Url(url.clone())))
        }
        MessagesImageSource::File { .. } => {
            if validate {
                return Err(
                    "file_id is not supported. Pass the image as a base64 data url instead."
                        .to_owned(),
                );
            }
            // Only read by versions that show a placeholder instead of the image.
            Ok(Some(ImageData::Url(String::new())))
        }
    }
}

/// The image as a request part, or `None` for a source that shows nothing. V4.1 validates the
/// source (errors name `path`); V4 shows a placeholder text for any source.
fn image_part(
    source: &MessagesImageSource,
    path: &str,
    version: ModelVersion,
) -> Result<Option<Part>, String> {
    let validate = common::shows_images(version);
    let data = image_from_source(source, validate).map_err(|m| format!("{path}: {m}"))?;
    Ok(data.map(|data| {
        Part::Image(ImagePart {
            data,
            detail: ImageDetail::default(),
        })
    }))
}

fn document_text(source: MessagesDocumentSource) -> String {
    let mt = source.media_type.unwrap_or_else(|| "unknown".to_owned());
    format!("[Unsupported document type: {mt}]")
}

/// Text, image and document blocks of a tool result, in order (`path` names the tool result).
pub(super) fn tool_result_parts(
    content: Option<Vec<MessagesToolResultBlock>>,
    path: &str,
    version: ModelVersion,
) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    for (k, block) in content.unwrap_or_default().into_iter().enumerate() {
        match block {
            MessagesToolResultBlock::Text { text } => parts.push(Part::Text(text)),
            MessagesToolResultBlock::Image { source } => {
                parts.extend(image_part(
                    &source,
                    &format!("{path}.content[{k}]"),
                    version,
                )?);
            }
            MessagesToolResultBlock::Document { source } => {
                parts.push(Part::Text(document_text(source)))
            }
            MessagesToolResultBlock::ToolReference { tool_name } => {
                parts.push(Part::Text(tool_name))
            }
        }
    }
    Ok(parts)
}

/// The parts of a mid-conversation system message, and the names of the declared tools its
/// `tool_addition` blocks announce (each must name a declared tool).
pub(super) fn system_parts(
    content: Vec<MessagesContentBlock>,
    i: usize,
    version: ModelVersion,
    declared: &[DeclaredTool],
) -> Result<(Vec<Part>, Vec<String>), String> {
    let mut parts = Vec::new();
    let mut added = Vec::new();
    for (j, block) in content.into_iter().enumerate() {
        // Blocks are read in order: a misplaced one fails where it stands.
        if let Some(e) = block.misplaced_outside_assistant(i, Role::System) {
            return Err(e);
        }
        match block {
            MessagesContentBlock::ToolAddition {
                tool: MessagesToolReference::ToolReference { name },
            } => {
                if !declared.iter().any(|t| t.name == name) {
                    return Err(format!(
                        "messages.{i}.content.{j}: `tool_addition` references unknown tool '{name}'"
                    ));
                }
                added.push(name);
            }
            MessagesContentBlock::Text { text } => parts.push(Part::Text(text)),
            MessagesContentBlock::Image { source } => {
                parts.extend(image_part(
                    &source,
                    &format!("messages.{i}.content[{j}]"),
                    version,
                )?);
            }
            MessagesContentBlock::Document { source } => {
                parts.push(Part::Text(document_text(source)))
            }
            _ => {}
        }
    }
    Ok((parts, added))
}
