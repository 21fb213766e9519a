// ChatEncoder: renders an OpenAI-style conversation into DeepSeek-V4 prompt TEXT, byte-exact with DeepSeek's
// encoding/encoding_dsv4.py (model-spec section 6.2). Special tokens appear as their literal strings
// (e.g. "<｜User｜>"); the tokenizer maps them to ids afterwards.
//
// Prompt = BOS + rendered messages:
//   system     {content}[\n\n## Tools …][\n\n## Response Format: …]
//   developer  <｜User｜>{content}[tools][response format]      (DeepSeek-internal role)
//   user       <｜User｜>{blocks joined by "\n\n"}; consecutive user/tool messages merge into one user turn, tool
//              results become <tool_result>…</tool_result> blocks ordered like the preceding assistant's tool_calls
//   assistant  [{reasoning}</think>]{content}[\n\n<｜DSML｜tool_calls>…</｜DSML｜tool_calls>]<｜end▁of▁sentence｜>
//   latest_reminder  <｜latest_reminder｜>{content}                (DeepSeek-internal role)
// A user/developer turn followed by an assistant turn (or ending the conversation) gets <｜Assistant｜> plus <think>
// (thinking mode, current turn) or </think>. In thinking mode reasoning of assistant turns before the last user turn is
// dropped (and developer messages before it removed) unless drop_thinking is off or any message declares tools.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4 {

// Which encoding_dsv4.py the prompt follows; they differ only in the reasoning-effort prompts.
enum class ChatTemplateRevision {
    kV4,       // original DeepSeek-V4-Flash: only "max" adds a prompt
    kV4_0731,  // DeepSeek-V4-Flash-0731: low (default, nothing) / high / max
};

enum class ThinkingMode { kChat, kThinking };

// Reasoning effort after mapping the OpenAI aliases (parse_reasoning_effort):
//   none -> kNone (thinking off: chat mode), minimal/low -> kLow, medium/high -> kHigh, xhigh/max -> kMax.
// Prompt text per revision (thinking mode only; nothing in chat mode):
//   kV4:      kDefault/kLow/kHigh -> nothing, kMax -> "Reasoning Effort: Absolute maximum …"
//   kV4_0731: kDefault/kLow -> nothing, kHigh -> "Reasoning Effort: Absolute maximum …",
//             kMax -> "Reasoning Effort: Beyond maximum …"
enum class ReasoningEffort { kDefault, kNone, kLow, kHigh, kMax };

// Accepts none, minimal, low, medium, high, xhigh, max; throws dsv4::Error for anything else.
ReasoningEffort parse_reasoning_effort(std::string_view value);

// The text prepended before message 0 in thinking mode ("" when none).
std::string_view reasoning_effort_prompt(ChatTemplateRevision revision, ReasoningEffort effort);

enum class ChatRole { kSystem, kDeveloper, kUser, kAssistant, kTool, kLatestReminder };

// Accepts system, developer, user, assistant, tool, latest_reminder; throws dsv4::Error for anything else.
ChatRole parse_chat_role(std::string_view role);
std::string_view chat_role_name(ChatRole role);

// DeepSeek-internal quick-instruction tasks (a user message asking for a classification token). Not for the API.
enum class ChatTask { kNone, kAction, kQuery, kAuthority, kDomain, kTitle, kReadUrl };
ChatTask parse_chat_task(std::string_view task);  // throws dsv4::Error for unknown names

struct ChatToolCall {
    std::string id;         // may be empty; used to order tool results
    std::string name;       // required
    std::string arguments;  // the JSON object text exactly as OpenAI sends it; "" means no arguments
};

struct ChatMessage {
    ChatRole role = ChatRole::kUser;
    std::string content;
    std::string reasoning_content;         // assistant
    std::vector<ChatToolCall> tool_calls;  // assistant
    std::string tool_call_id;              // tool
    // system / developer only: function objects ({"name", "description", "parameters"}), key order preserved.
    std::vector<nlohmann::ordered_json> tools;
    std::optional<nlohmann::ordered_json> response_format;  // system / developer only
    ChatTask task = ChatTask::kNone;                        // user only
};

struct ChatConversation {
    std::vector<ChatMessage> messages;
    // Request-level tools (the function objects of OpenAI's "tools"), attached like vLLM does: to the first message
    // when it is system/developer (replacing its own tools), else to a new empty system message inserted in front.
    // Parse request JSON with nlohmann::ordered_json: the schemas are rendered with their key order.
    std::vector<nlohmann::ordered_json> tools;
};

struct ChatOptions {
    ThinkingMode thinking_mode = ThinkingMode::kThinking;
    ReasoningEffort reasoning_effort = ReasoningEffort::kDefault;  // kNone switches to chat mode
    bool drop_thinking = true;
    bool add_bos = true;

    // The mode the prompt is rendered in (and so the mode the output parser must start in).
    ThinkingMode effective_thinking_mode() const {
        return reasoning_effort == ReasoningEffort::kNone ? ThinkingMode::kChat : thinking_mode;
    }
};

class ChatEncoder {
  public:
    explicit ChatEncoder(ChatTemplateRevision revision) : revision_(revision) {}

    // Renders the prompt text. Throws dsv4::Error naming the message for an invalid conversation: a tool message
    // without a preceding assistant tool call or with an unknown tool_call_id, an empty developer message, a tool call
    // without a name or with arguments that are not a JSON object, tools or response_format on a role that cannot
    // carry them, a task on a non-user message, a tool schema that is not a JSON object.
    std::string encode(const ChatConversation& conversation, const ChatOptions& options) const;

    ChatTemplateRevision revision() const { return revision_; }

  private:
    ChatTemplateRevision revision_;
};

// The DSML text of one assistant turn's tool calls, "\n\n<｜DSML｜tool_calls>\n…\n</｜DSML｜tool_calls>"
// ("" for no calls). Exposed for tests and for re-encoding parsed output.
std::string render_dsml_tool_calls(const std::vector<ChatToolCall>& calls);

// The "## Tools" block for a list of function objects.
std::string render_tools_block(const std::vector<nlohmann::ordered_json>& tools);

}  // namespace dsv4
