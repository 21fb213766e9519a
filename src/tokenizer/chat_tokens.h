// Literal strings of the DeepSeek-V4 chat format (model-spec section 6.2). The tokenizer maps the special tokens to
// single ids; everything in src/tokenizer/chat_* and output_parser* works on these strings.
// The texts below are facts copied byte-exact from DeepSeek's encoding/encoding_dsv4.py (original V4 and 0731).
#pragma once

#include <string_view>

namespace dsv4::chat_tokens {

inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";
inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";
inline constexpr std::string_view kDsml = "｜DSML｜";    // one special token (id 128825)
inline constexpr std::string_view kFullwidthBar = "｜";  // U+FF5C, the bar inside every special token
inline constexpr std::string_view kSpecialOpen = "<｜";  // start of every special token
inline constexpr std::string_view kToolResultOpen = "<tool_result>";
inline constexpr std::string_view kToolResultClose = "</tool_result>";

// Tool calls: "\n\n" + kToolCallsOpen + "\n" + invokes joined by "\n" + "\n" + kToolCallsClose.
inline constexpr std::string_view kToolCallsOpen = "<｜DSML｜tool_calls>";
inline constexpr std::string_view kToolCallsClose = "</｜DSML｜tool_calls>";
inline constexpr std::string_view kInvokeOpenPrefix = "<｜DSML｜invoke name=\"";  // + name + "\">\n"
inline constexpr std::string_view kInvokeClose = "</｜DSML｜invoke>";
inline constexpr std::string_view kParameterOpenPrefix = "<｜DSML｜parameter name=\"";  // + key + "\" string=\"…\">"
inline constexpr std::string_view kParameterClose = "</｜DSML｜parameter>";

// Internal quick-instruction task tokens (DeepSeek's search pipeline; not exposed by the server).
inline constexpr std::string_view kTaskAction = "<｜action｜>";
inline constexpr std::string_view kTaskQuery = "<｜query｜>";
inline constexpr std::string_view kTaskAuthority = "<｜authority｜>";
inline constexpr std::string_view kTaskDomain = "<｜domain｜>";
inline constexpr std::string_view kTaskTitle = "<｜title｜>";
inline constexpr std::string_view kTaskReadUrl = "<｜read_url｜>";

inline constexpr std::string_view kResponseFormatPrefix =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

// The "## Tools" block: kToolsTemplateHead + schemas (one JSON object per line) + kToolsTemplateTail.
inline constexpr std::string_view kToolsTemplateHead =
    "## Tools\n"
    "\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "
    "\"<｜DSML｜tool_calls>\" block like the following:\n"
    "\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n"
    "\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, booleans, "
    "arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n"
    "\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
    "<think>...</think> BEFORE any tool calls or final response.\n"
    "\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n"
    "\n"
    "### Available Tool Schemas\n"
    "\n";
inline constexpr std::string_view kToolsTemplateTail =
    "\n"
    "\n"
    "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

// Reasoning-effort prompts, prepended before message 0 in thinking mode.
// Original V4: "max" uses kEffortAbsoluteMaximum. 0731: "high" uses kEffortAbsoluteMaximum, "max" kEffortBeyondMaximum.
inline constexpr std::string_view kEffortAbsoluteMaximum =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, "
    "rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";
inline constexpr std::string_view kEffortBeyondMaximum =
    "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: exhaustively decompose "
    "the problem into its most fundamental components, trace every causal chain to its root, and resolve the "
    "underlying cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple angles and are certain "
    "that no assumption remains unchecked and no error remains undiscovered.\n\n";

}  // namespace dsv4::chat_tokens
