//! What a request says its output must look like, read from the converted request: the shape
//! the grammar is built from (no Lark text yet).

use recipe_core::{ModelVersion, ToolChoice};
use recipe_protocol::{ConversationRequest, OutputConstraintKind};
use serde_json::Value;

use crate::error::{GrammarError, GrammarResult};
use crate::schema::ToolParameters;

/// Where the model's output begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Inside the reasoning that the prompt's `<think>` opened: reasoning, `</think>`, answer.
    Reasoning,
    /// At the answer (thinking off, or a prefix continuation past its reasoning).
    Answer,
}

/// What comes after the reasoning.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// Tool calls in the version's DSML dialect.
    Calls(CallsPlan),
    /// JSON matching a schema (`{"type": "object"}` for `json_object`).
    Json(Value),
    /// Text matching a regular expression.
    Regex(String),
    /// Text matching a caller-given Lark grammar (llguidance's dialect; its `start` rule).
    Lark(String),
}

/// How tool calls may appear.
#[derive(Clone, Debug, PartialEq)]
pub struct CallsPlan {
    pub tools: Vec<ToolSpec>,
    /// At least one call (`required`, or a named tool); otherwise content may stand alone.
    pub required: bool,
    /// The prompt already opened the calls block (`ParsingOptions::starts_in_tool_calls`): the
    /// output starts at the first call.
    pub opened_by_prompt: bool,
    /// More than one call per block.
    pub parallel: bool,
}

/// A tool as the grammar sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub params: ToolParameters,
}

/// The whole shape of a valid output.
#[derive(Clone, Debug, PartialEq)]
pub struct GrammarPlan {
    pub version: ModelVersion,
    pub start: Start,
    pub answer: Answer,
    /// Most tokens of reasoning before `</think>` is forced.
    pub thinking_budget: Option<u32>,
}

impl GrammarPlan {
    /// The plan of `request`'s output constraint, or of the caller's Lark grammar (`lark`, which
    /// then replaces the request's answer constraint). `None`: nothing to constrain.
    pub fn from_request(
        request: &ConversationRequest,
        thinking_budget: Option<u32>,
        lark: Option<&str>,
    ) -> GrammarResult<Option<Self>> {
        let constraint = request.inference_options.output_constraint.as_ref();
        let answer = match (lark, constraint) {
            (Some(l), _) => Answer::Lark(l.to_owned()),
            (None, None) => return Ok(None),
            (None, Some(c)) => match c.kind {
                OutputConstraintKind::Json => Answer::Json(json_schema(&c.schema)?),
                OutputConstraintKind::Regex => Answer::Regex(c.schema.clone()),
                OutputConstraintKind::ToolCall | OutputConstraintKind::ToolCallRequired => {
                    Answer::Calls(calls_plan(request, c.kind.clone())?)
                }
            },
        };
        let opened = matches!(&answer, Answer::Calls(c) if c.opened_by_prompt);
        let reasoning = request
            .parsing_options
            .thinking_initial_stage
            .is_some_and(|s| s.starts_in_reasoning());
        let start = if reasoning && !opened {
            Start::Reasoning
        } else {
            Start::Answer
        };
        Ok(Some(GrammarPlan {
            version: request.model_version,
            start,
            answer,
            thinking_budget,
        }))
    }
}

/// The schema of a `json` constraint: `""` is `json_object` (any JSON object).
fn json_schema(text: &str) -> GrammarResult<Value> {
    if text.is_empty() {
        return Ok(serde_json::json!({"type": "object"}));
    }
    let v: Value = serde_json::from_str(text)
        .map_err(|e| GrammarError::Invalid(format!("the response schema is not JSON: {e}")))?;
    match v {
        Value::Object(_) | Value::Bool(_) => Ok(v),
        _ => Err(GrammarError::UnsupportedSchema(
            "the response schema must be an object".to_owned(),
        )),
    }
}

fn calls_plan(
    request: &ConversationRequest,
    kind: OutputConstraintKind,
) -> GrammarResult<CallsPlan> {
    let conv = &request.conversation;
    if conv.tools.is_empty() || conv.tool_choice == ToolChoice::None {
        return Err(GrammarError::Invalid(
            "a tool-call constraint without tools to call".to_owned(),
        ));
    }
    let tools = conv
        .tools
        .iter()
        .map(|t| {
            Ok(ToolSpec {
                name: t.name.clone(),
                params: ToolParameters::from_schema(&t.name, &t.parameters)?,
            })
        })
        .collect::<GrammarResult<Vec<_>>>()?;
    Ok(CallsPlan {
        tools,
        required: kind == OutputConstraintKind::ToolCallRequired,
        opened_by_prompt: request.parsing_options.starts_in_tool_calls,
        parallel: request
            .inference_options
            .parallel_tool_calls
            .unwrap_or(true),
    })
}
