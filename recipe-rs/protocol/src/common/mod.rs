//! Rules shared by the three request formats, one job per module. The order in which a
//! conversion applies them lives in [`crate::driver`].

pub mod assemble;
pub mod content;
pub mod image_url;
pub mod reasoning;
pub mod response_format;
pub mod sampling;
pub mod schema;
pub mod thinking;
pub mod tool_choice;
pub mod tools;

pub use assemble::{assemble, tools_constraint_json, Assembly};
pub use content::{
    image_data_from_url, join_parts, shows_images, ImagePart, Part, UNSUPPORTED_IMAGE,
};
pub use reasoning::{apply_reasoning_policy, thinking_stage, ReasoningField};
pub use response_format::{check_response_schema, mentions_json, JSON_WORD_REQUIRED};
pub use sampling::{
    check_max_tokens, check_stop_list, check_temperature, check_top_p, resolve_temperature,
    resolve_top_p,
};
pub use schema::schema_error;
pub use thinking::{resolve_model, resolve_thinking, RequestEffort};
pub use tool_choice::{apply_tool_choice, drop_tools_for_none, RequestToolChoice};
pub use tools::{
    check_parameters, check_tool_name, check_tools, declare_strict, finish_tools,
    is_valid_tool_name, meta_check, DeclaredTool, Tools,
};
