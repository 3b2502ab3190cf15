//! DeepSeek V4.1 (Flash).

use super::*;

pub(super) static PROFILE: ModelProfile = ModelProfile {
    name: "V4.1",
    float_style: FloatStyle::Python,
    effort: EffortLines {
        low: "Reasoning Effort: 50 (range 1-100, the higher the value, the more thorough the \
reasoning)\n\n",
        high: "Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the \
reasoning)\n\n",
        max: "Reasoning Effort: 100 (range 1-100, the higher the value, the more thorough the \
reasoning)\n\n",
    },
    dsml: DsmlDialect {
        calls: " calls",
        invoke: " invoke",
        parameter: " parameter",
        invoke_close_without_parameters: "\n</",
    },
    header: HeaderTexts {
        json_object_block: "\n\n## Response Format:\n\nYou MUST strictly adhere to the following \
schema to reply:\n{\"type\": \"json_object\"}",
        gap_after_empty_schema_list: "\n\n",
    },
    system_handling: SystemHandling::LeadingOpensHeader,
    tool_result_order: ToolResultOrder::CallOrderWithinTurn,
    user_turn_join: UserTurnJoin::BlankLineBetweenAll,
    prefix_turn: PrefixTurn::ContinuesReasoning,
    turns: TurnRules {
        tool_result_after_user_opens_turn: false,
        repeated_reminders_collapse: true,
    },
    history: HistoryRules {
        reasoning_kept_without_thinking: false,
        missing_reasoning_written_as_empty_block: true,
        empty_block_dropped_when_end_spelled_empty: true,
        empty_call_list_written: false,
        calls_sorted_by_id: false,
    },
    conversion: ConversionRules {
        images: ImageHandling::Placeholder,
        developer_message: DeveloperMessage::System,
        system_turn: SystemTurn::System,
        namespace_separator: "::",
        namespace_description_prefixed: true,
        deferred_tools: true,
        top_p: TopPRules {
            thinking: TopP::RequestedAtLeast(0.95),
            non_thinking: TopP::Fixed(1.0),
        },
    },
};
