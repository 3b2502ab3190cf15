//! Model profiles: everything that differs between the V4 and V4.1 prompt templates, as data.
//!
//! Each template version has one [`ModelProfile`], a `static` in its own file (`v4.rs`,
//! `v41.rs`). The renderer (`encoding/render/`) and the request conversion (`recipe-protocol`)
//! read the profile instead of asking which version they serve, so the difference between two
//! versions can be read by putting their two profile files side by side.
//!
//! Most fields are plain data: spellings of the tool-call markup, the reasoning-effort lines,
//! the float style of JSON in the prompt, switches for small template habits. A few template
//! rules are code rather than data (where system messages go, how tool results are ordered, how a
//! prefix turn is written); for those the profile names a rule ([`SystemHandling`],
//! [`ToolResultOrder`], [`UserTurnJoin`], [`PrefixTurn`]) and the renderer keeps one
//! implementation per rule, in the module of the version that introduced it
//! (`encoding/render/v4.rs`, `encoding/render/v41.rs`).
//!
//! A new model version is a new profile file plus one arm in [`EncodingVersion::profile`]; it
//! reuses the existing rules, or adds a rule variant with its implementation beside the others.
//! `docs/model-versions.md` walks through the steps.

mod v4;
mod v41;

use serde::Serialize;

use crate::conversation::ReasoningEffort;
use crate::encoding::json::FloatStyle;
use crate::encoding::EncodingVersion;
use crate::ModelVersion;

/// What one template version writes differently from another.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ModelProfile {
    /// Short name for messages and listings (`"V4"`, `"V4.1"`).
    pub name: &'static str,
    /// How JSON numbers that are not integers are spelled (tool schemas, arguments, response
    /// schemas).
    pub float_style: FloatStyle,
    /// The reasoning-effort text of the header (thinking mode only).
    pub effort: EffortLines,
    /// Spellings of the DSML tool-call markup.
    pub dsml: DsmlDialect,
    /// Texts of the tools and response-format blocks of the header.
    pub header: HeaderTexts,
    /// Where system messages are rendered.
    pub system_handling: SystemHandling,
    /// How tool results are put in the order of the calls they answer.
    pub tool_result_order: ToolResultOrder,
    /// How the pieces of a merged user turn are separated.
    pub user_turn_join: UserTurnJoin,
    /// How an assistant prefix turn (one the model continues) is written.
    pub prefix_turn: PrefixTurn,
    /// Small rules of the message sequence.
    pub turns: TurnRules,
    /// How earlier assistant turns are written back into the prompt.
    pub history: HistoryRules,
    /// What request conversion does differently for this version.
    pub conversion: ConversionRules,
}

impl ModelProfile {
    /// The effort text for `effort` (the empty string where the version writes none).
    pub fn effort_line(&self, effort: Option<ReasoningEffort>) -> &'static str {
        match effort {
            Some(ReasoningEffort::Low) => self.effort.low,
            Some(ReasoningEffort::Max) => self.effort.max,
            Some(ReasoningEffort::High | ReasoningEffort::XHigh) | None => self.effort.high,
        }
    }
}

impl EncodingVersion {
    /// The profile of this template version. Adding a version means adding its arm here.
    pub fn profile(self) -> &'static ModelProfile {
        match self {
            EncodingVersion::V4 => &v4::PROFILE,
            EncodingVersion::V41 => &v41::PROFILE,
        }
    }
}

impl ModelVersion {
    /// The profile of the template this model is rendered with.
    pub fn profile(self) -> &'static ModelProfile {
        EncodingVersion::for_model(self).profile()
    }
}

/// Reasoning-effort text by requested effort. `high` also serves `xhigh` and an unset effort.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct EffortLines {
    pub low: &'static str,
    pub high: &'static str,
    pub max: &'static str,
}

/// The DSML markup around tool calls: `<｜DSML｜{calls}>`, `<｜DSML｜{invoke} name="…">`,
/// `<｜DSML｜{parameter} name="…" string="…">`, and the closing forms with `</`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DsmlDialect {
    /// Name of the block that holds all calls of a turn.
    pub calls: &'static str,
    /// Name of one call.
    pub invoke: &'static str,
    /// Name of one argument.
    pub parameter: &'static str,
    /// What closes a call that has no arguments, before the DSML token of `</…invoke>`
    /// (with arguments it is always a newline and `</`).
    pub invoke_close_without_parameters: &'static str,
}

/// Texts of the header blocks that differ between versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HeaderTexts {
    /// The whole response-format block for `json_object` (a JSON schema is written the same way
    /// by every version).
    pub json_object_block: &'static str,
    /// What stands between the tool-schema list and the closing instruction of the tools block
    /// when every tool is deferred (the list is empty); otherwise it is a blank line.
    pub gap_after_empty_schema_list: &'static str,
}

/// Where system messages go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum SystemHandling {
    /// Every non-empty system message, wherever it stands, is joined (blank lines between them)
    /// into a header of plain text that the effort text opens; no System token is written.
    /// Rendered by `render/v4.rs`.
    JoinedIntoHeader,
    /// A header opened by the System token, written when it has anything to hold; only a leading
    /// system message joins it (with its "Updated Tool Schemas"), later system messages are
    /// turns of their own. Rendered by `render/v41.rs`.
    LeadingOpensHeader,
}

/// How tool results are put in the order of the calls they answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ToolResultOrder {
    /// Before rendering, the messages after each assistant turn with two or more calls are
    /// sorted as units (results without an ID, then results by call ID, then the rest); a run of
    /// user messages is one unit. Rendered by `render/v4.rs`.
    SortedAfterCallingTurn,
    /// Inside each merged user turn, results with an ID are sorted by the position of their
    /// call in the latest assistant turn that made calls. Rendered by `render/v41.rs`.
    CallOrderWithinTurn,
}

/// How the pieces (user texts, tool results) of one merged user turn are separated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum UserTurnJoin {
    /// Blank lines between tool results and before the first user text after them; among the
    /// texts of one run of user messages, empty texts are left out. Rendered by `render/v4.rs`.
    SkipEmptyUserTexts,
    /// A blank line between every two pieces. Rendered by `render/v41.rs`.
    BlankLineBetweenAll,
}

/// How an assistant turn marked as a prefix (continued by the model) is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum PrefixTurn {
    /// The reasoning block is opened only when reasoning is given, and closed when there is
    /// content or thinking is off; a prefix turn that is not the last message is closed with
    /// EOS. Rendered by `render/v4.rs`.
    ReasoningWhenGiven,
    /// In thinking mode the turn continues its reasoning (closed when content or calls follow),
    /// unless it opens the conversation right after a header that holds at most the effort line.
    /// Rendered by `render/v41.rs`.
    ContinuesReasoning,
}

/// Small rules of the message sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TurnRules {
    /// A tool result that follows a user message opens a new user turn instead of joining it.
    pub tool_result_after_user_opens_turn: bool,
    /// Of consecutive latest-reminder messages only the first is written.
    pub repeated_reminders_collapse: bool,
}

/// How earlier assistant turns are written back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HistoryRules {
    /// Historical reasoning is kept whenever tools are offered, also with thinking off
    /// (otherwise it is kept only when tools are offered in thinking mode).
    pub reasoning_kept_without_thinking: bool,
    /// A kept reasoning block is written (empty) for a turn that has no reasoning.
    pub missing_reasoning_written_as_empty_block: bool,
    /// A kept reasoning block with empty reasoning is left out altogether when the closing
    /// thinking token is spelled empty.
    pub empty_block_dropped_when_end_spelled_empty: bool,
    /// An empty (but present) list of calls still writes the calls block.
    pub empty_call_list_written: bool,
    /// Historical calls are listed stably sorted by call ID (byte order), not as given.
    pub calls_sorted_by_id: bool,
}

/// What request conversion (`recipe-protocol`) does differently for this version.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ConversionRules {
    /// How image parts of a request are shown to the model.
    pub images: ImageHandling,
    /// What a Responses `developer` message becomes.
    pub developer_message: DeveloperMessage,
    /// What an Anthropic Messages system turn in the middle of the conversation becomes.
    pub system_turn: SystemTurn,
    /// Separator between a Responses namespace and a tool name in the tool's full name.
    pub namespace_separator: &'static str,
    /// A namespace's description is put on the first line of each of its tools' descriptions.
    pub namespace_description_prefixed: bool,
    /// A declared tool may be deferred (`defer_loading`): declared, but left out of the rendered
    /// tool list. Without this every declared tool is listed.
    pub deferred_tools: bool,
    /// How `top_p` is chosen.
    pub top_p: TopPRules,
}

/// How image parts of a request are shown to the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ImageHandling {
    /// The model sees no images: every image (and file) part becomes the text
    /// `[Unsupported Image]`, and its source is neither checked nor kept.
    UnsupportedText,
    /// Images become the image placeholder and their sources are checked and kept; file parts,
    /// images without a usable source and images in assistant messages are refused.
    Placeholder,
}

/// What a Responses `developer` message becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum DeveloperMessage {
    User,
    System,
}

/// What an Anthropic Messages system turn in the middle of the conversation becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum SystemTurn {
    /// A system message.
    System,
    /// A user message wrapping the text in `<system-reminder>` tags (nothing when empty).
    UserReminder,
}

/// How `top_p` is chosen, with thinking on and off.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TopPRules {
    pub thinking: TopP,
    pub non_thinking: TopP,
}

/// One rule for `top_p`. Listed (serialized) as its Rust form, `ByTools { with_tools: 0.95, … }`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TopP {
    /// Always this value; the request's value is ignored.
    Fixed(f32),
    /// The request's value, or 1.0 when it has none.
    Requested,
    /// The request's value raised to at least this floor, or 1.0 when it has none.
    RequestedAtLeast(f32),
    /// One value when tools are active, another when not; the request's value is ignored.
    ByTools { with_tools: f32, without_tools: f32 },
}

impl Serialize for TopP {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!("{self:?}"))
    }
}

impl TopPRules {
    /// The `top_p` to sample with.
    pub fn resolve(&self, thinking: bool, tools_active: bool, requested: Option<f32>) -> f32 {
        let rule = if thinking {
            self.thinking
        } else {
            self.non_thinking
        };
        match rule {
            TopP::Fixed(p) => p,
            TopP::Requested => requested.unwrap_or(1.0),
            TopP::RequestedAtLeast(floor) => requested.map(|p| p.max(floor)).unwrap_or(1.0),
            TopP::ByTools {
                with_tools,
                without_tools,
            } => {
                if tools_active {
                    with_tools
                } else {
                    without_tools
                }
            }
        }
    }
}
