//! DeepSeek V4 (Pro).

use super::*;

pub(super) static PROFILE: ModelProfile = ModelProfile {
    name: "V4",
    float_style: FloatStyle::Compact,
    effort: EffortLines {
        low: "",
        high: "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n\
You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve \
the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and \
adversarial scenarios.\n\
Explicitly write out your entire deliberation process, documenting every intermediate step, \
considered alternative, and rejected hypothesis to ensure absolutely no assumption is left \
unchecked.\n\n",
        max: "Reasoning Effort: Beyond maximum \u{2014} exhaustive, relentless, and \
uncompromising.\n\
You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: \
exhaustively decompose the problem into its most fundamental components, trace every causal chain \
to its root, and resolve the underlying cause rather than any surface symptom.\n\
Do not stop reasoning until you have independently verified the solution from multiple angles and \
are certain that no assumption remains unchecked and no error remains undiscovered.\n\n",
    },
    dsml: DsmlDialect {
        calls: "tool_calls",
        invoke: "invoke",
        parameter: "parameter",
        invoke_close_without_parameters: "</",
    },
    header: HeaderTexts {
        json_object_block: "\n\nYou are a helpful assistant designed to output JSON.\n\
## Response Format:\n\nReply with JSON object ONLY.",
        gap_after_empty_schema_list: "\n",
    },
    system_handling: SystemHandling::JoinedIntoHeader,
    tool_result_order: ToolResultOrder::SortedAfterCallingTurn,
    user_turn_join: UserTurnJoin::SkipEmptyUserTexts,
    prefix_turn: PrefixTurn::ReasoningWhenGiven,
    turns: TurnRules {
        tool_result_after_user_opens_turn: true,
        repeated_reminders_collapse: false,
    },
    history: HistoryRules {
        reasoning_kept_without_thinking: true,
        missing_reasoning_written_as_empty_block: false,
        empty_block_dropped_when_end_spelled_empty: false,
        empty_call_list_written: true,
        calls_sorted_by_id: true,
    },
    conversion: ConversionRules {
        images: ImageHandling::UnsupportedText,
        developer_message: DeveloperMessage::User,
        system_turn: SystemTurn::UserReminder,
        namespace_separator: "__",
        namespace_description_prefixed: false,
        deferred_tools: false,
        top_p: TopPRules {
            thinking: TopP::ByTools {
                with_tools: 0.95,
                without_tools: 1.0,
            },
            non_thinking: TopP::Requested,
        },
    },
};
