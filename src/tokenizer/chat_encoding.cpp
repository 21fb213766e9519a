#include "tokenizer/chat_encoding.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "core/error.h"
#include "tokenizer/chat_json.h"
#include "tokenizer/chat_tokens.h"

namespace dsv4 {

namespace ct = chat_tokens;

ReasoningEffort parse_reasoning_effort(std::string_view value) {
    if (value == "none") return ReasoningEffort::kNone;
    if (value == "minimal" || value == "low") return ReasoningEffort::kLow;
    if (value == "medium" || value == "high") return ReasoningEffort::kHigh;
    if (value == "xhigh" || value == "max") return ReasoningEffort::kMax;
    fail("unknown reasoning_effort '{}' (expected none, minimal, low, medium, high, xhigh or max)", value);
}

std::string_view reasoning_effort_prompt(ChatTemplateRevision revision, ReasoningEffort effort) {
    switch (revision) {
        case ChatTemplateRevision::kV4:
            return effort == ReasoningEffort::kMax ? ct::kEffortAbsoluteMaximum : std::string_view();
        case ChatTemplateRevision::kV4_0731:
            if (effort == ReasoningEffort::kHigh) return ct::kEffortAbsoluteMaximum;
            if (effort == ReasoningEffort::kMax) return ct::kEffortBeyondMaximum;
            return {};
    }
    return {};
}

ChatRole parse_chat_role(std::string_view role) {
    if (role == "system") return ChatRole::kSystem;
    if (role == "developer") return ChatRole::kDeveloper;
    if (role == "user") return ChatRole::kUser;
    if (role == "assistant") return ChatRole::kAssistant;
    if (role == "tool") return ChatRole::kTool;
    if (role == "latest_reminder") return ChatRole::kLatestReminder;
    fail("unknown message role '{}' (expected system, developer, user, assistant, tool or latest_reminder)", role);
}

std::string_view chat_role_name(ChatRole role) {
    switch (role) {
        case ChatRole::kSystem:
            return "system";
        case ChatRole::kDeveloper:
            return "developer";
        case ChatRole::kUser:
            return "user";
        case ChatRole::kAssistant:
            return "assistant";
        case ChatRole::kTool:
            return "tool";
        case ChatRole::kLatestReminder:
            return "latest_reminder";
    }
    return "unknown";
}

ChatTask parse_chat_task(std::string_view task) {
    if (task == "action") return ChatTask::kAction;
    if (task == "query") return ChatTask::kQuery;
    if (task == "authority") return ChatTask::kAuthority;
    if (task == "domain") return ChatTask::kDomain;
    if (task == "title") return ChatTask::kTitle;
    if (task == "read_url") return ChatTask::kReadUrl;
    fail("unknown task '{}' (expected action, query, authority, domain, title or read_url)", task);
}

namespace {

std::string_view task_token(ChatTask task) {
    switch (task) {
        case ChatTask::kNone:
            return {};
        case ChatTask::kAction:
            return ct::kTaskAction;
        case ChatTask::kQuery:
            return ct::kTaskQuery;
        case ChatTask::kAuthority:
            return ct::kTaskAuthority;
        case ChatTask::kDomain:
            return ct::kTaskDomain;
        case ChatTask::kTitle:
            return ct::kTaskTitle;
        case ChatTask::kReadUrl:
            return ct::kTaskReadUrl;
    }
    return {};
}

bool is_blank(std::string_view text) {
    return std::all_of(text.begin(), text.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
}

// Arguments as the reference reads them: json.loads(arguments), or {"arguments": raw} when that fails.
// Deviation: blank arguments (clients send "" for no-argument calls) mean {} instead of {"arguments": ""}.
nlohmann::ordered_json parse_tool_arguments(const ChatToolCall& call) {
    if (is_blank(call.arguments)) return nlohmann::ordered_json::object();
    auto parsed = nlohmann::ordered_json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return nlohmann::ordered_json{{"arguments", call.arguments}};
    DSV4_CHECK(parsed.is_object(), "tool call '{}': arguments must be a JSON object, got: {}", call.name,
               call.arguments);
    return parsed;
}

std::string render_invoke(const ChatToolCall& call) {
    std::vector<std::string> params;
    const nlohmann::ordered_json arguments = parse_tool_arguments(call);
    for (const auto& [key, value] : arguments.items()) {
        std::string param(ct::kParameterOpenPrefix);
        param += key;
        param += value.is_string() ? "\" string=\"true\">" : "\" string=\"false\">";
        param += value.is_string() ? value.get_ref<const std::string&>() : to_python_json(value);
        param += ct::kParameterClose;
        params.push_back(std::move(param));
    }
    std::string out(ct::kInvokeOpenPrefix);
    out += call.name;
    out += "\">\n";
    for (std::size_t i = 0; i < params.size(); ++i) {
        if (i > 0) out += '\n';
        out += params[i];
    }
    out += '\n';
    out += ct::kInvokeClose;
    return out;
}

// One turn of the merged conversation: tool messages folded into user turns as tool-result blocks.
struct Block {
    bool is_tool_result = false;
    std::string_view text;
    std::string_view tool_call_id;
};

struct Turn {
    ChatRole role = ChatRole::kUser;
    const ChatMessage* message = nullptr;                        // the source message (first one for user turns)
    const std::vector<nlohmann::ordered_json>* tools = nullptr;  // system / developer
    std::vector<Block> blocks;                                   // user turns
    ChatTask task = ChatTask::kNone;
};

void validate_message(const std::vector<ChatMessage>& messages, std::size_t index) {
    const ChatMessage& message = messages[index];
    const std::string_view role = chat_role_name(message.role);
    const bool carries_tools = message.role == ChatRole::kSystem || message.role == ChatRole::kDeveloper;
    DSV4_CHECK(carries_tools || (message.tools.empty() && !message.response_format),
               "message {} ({}): only system and developer messages can carry tools or response_format", index, role);
    for (const auto& tool : message.tools) {
        DSV4_CHECK(tool.is_object(), "message {} ({}): each tool must be a JSON object", index, role);
    }
    DSV4_CHECK(message.task == ChatTask::kNone || message.role == ChatRole::kUser,
               "message {} ({}): only user messages can carry a task", index, role);
    DSV4_CHECK(
        message.role == ChatRole::kAssistant || (message.tool_calls.empty() && message.reasoning_content.empty()),
        "message {} ({}): only assistant messages can carry tool_calls or reasoning_content", index, role);
    DSV4_CHECK(message.role == ChatRole::kTool || message.tool_call_id.empty(),
               "message {} ({}): only tool messages can carry tool_call_id", index, role);
    DSV4_CHECK(message.role != ChatRole::kDeveloper || !message.content.empty(),
               "message {} (developer): content must not be empty", index);
    for (const auto& call : message.tool_calls) {
        DSV4_CHECK(!call.name.empty(), "message {} (assistant): a tool call has no function name", index);
        try {
            parse_tool_arguments(call);
        } catch (const Error& error) {
            fail("message {} (assistant): {}", index, error.what());
        }
    }
    if (message.role != ChatRole::kTool) return;

    // A tool message answers a call of the nearest preceding assistant message (other tool messages may intervene).
    std::size_t prev = index;
    while (prev > 0 && messages[prev - 1].role == ChatRole::kTool) --prev;
    DSV4_CHECK(prev > 0 && messages[prev - 1].role == ChatRole::kAssistant && !messages[prev - 1].tool_calls.empty(),
               "message {} (tool): a tool message must follow an assistant message with tool_calls", index);
    if (message.tool_call_id.empty()) return;
    const auto& calls = messages[prev - 1].tool_calls;
    const bool known = std::any_of(calls.begin(), calls.end(),
                                   [&](const ChatToolCall& call) { return call.id == message.tool_call_id; });
    DSV4_CHECK(known, "message {} (tool): tool_call_id '{}' matches no tool call of assistant message {}", index,
               message.tool_call_id, prev - 1);
}

void validate(const ChatConversation& conversation) {
    for (const auto& tool : conversation.tools) DSV4_CHECK(tool.is_object(), "each tool must be a JSON object");
    for (std::size_t i = 0; i < conversation.messages.size(); ++i) validate_message(conversation.messages, i);
}

// merge_tool_messages: user and tool messages following a user turn join it; a tool message elsewhere opens one.
std::vector<Turn> merge_turns(const ChatConversation& conversation, const ChatMessage& tools_holder) {
    std::vector<Turn> turns;
    const auto& messages = conversation.messages;
    const bool attach_to_first = !conversation.tools.empty() && !messages.empty() &&
                                 (messages[0].role == ChatRole::kSystem || messages[0].role == ChatRole::kDeveloper);
    if (!conversation.tools.empty() && !attach_to_first) {
        turns.push_back(Turn{ChatRole::kSystem, &tools_holder, &conversation.tools, {}, ChatTask::kNone});
    }
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& message = messages[i];
        const bool user_turn_open = !turns.empty() && turns.back().role == ChatRole::kUser;
        if (message.role == ChatRole::kTool) {
            Block block{true, message.content, message.tool_call_id};
            if (user_turn_open) {
                turns.back().blocks.push_back(block);
            } else {
                turns.push_back(Turn{ChatRole::kUser, &message, nullptr, {block}, ChatTask::kNone});
            }
        } else if (message.role == ChatRole::kUser) {
            Block block{false, message.content, {}};
            if (user_turn_open && turns.back().task == ChatTask::kNone) {
                turns.back().blocks.push_back(block);
            } else {
                turns.push_back(Turn{ChatRole::kUser, &message, nullptr, {block}, message.task});
            }
        } else {
            const bool gets_request_tools = i == 0 && attach_to_first;
            turns.push_back(Turn{message.role,
                                 &message,
                                 gets_request_tools ? &conversation.tools : &message.tools,
                                 {},
                                 ChatTask::kNone});
        }
    }
    return turns;
}

// sort_tool_results_by_call_order: tool results of a user turn follow the call order of the last assistant turn with
// tool calls; unknown ids sort as position 0 (stable).
void sort_tool_results(std::vector<Turn>& turns) {
    std::map<std::string_view, std::size_t> call_order;
    for (Turn& turn : turns) {
        if (turn.role == ChatRole::kAssistant && !turn.message->tool_calls.empty()) {
            call_order.clear();
            const auto& calls = turn.message->tool_calls;
            for (std::size_t i = 0; i < calls.size(); ++i) {
                if (!calls[i].id.empty()) call_order[calls[i].id] = i;
            }
            continue;
        }
        if (turn.role != ChatRole::kUser || call_order.empty()) continue;
        std::vector<Block> results;
        for (const Block& block : turn.blocks) {
            if (block.is_tool_result) results.push_back(block);
        }
        if (results.size() < 2) continue;
        auto position = [&](const Block& block) {
            auto it = call_order.find(block.tool_call_id);
            return it == call_order.end() ? std::size_t{0} : it->second;
        };
        std::stable_sort(results.begin(), results.end(),
                         [&](const Block& a, const Block& b) { return position(a) < position(b); });
        std::size_t next = 0;
        for (Block& block : turn.blocks) {
            if (block.is_tool_result) block = results[next++];
        }
    }
}

int last_user_index(const std::vector<Turn>& turns) {
    for (int i = static_cast<int>(turns.size()) - 1; i >= 0; --i) {
        const ChatRole role = turns[static_cast<std::size_t>(i)].role;
        if (role == ChatRole::kUser || role == ChatRole::kDeveloper) return i;
    }
    return -1;
}

// _drop_thinking_messages: developer turns before the last user turn disappear (assistant reasoning before it is
// dropped at render time by the same index rule).
std::vector<Turn> drop_old_developer_turns(std::vector<Turn> turns) {
    const int last_user = last_user_index(turns);
    std::vector<Turn> kept;
    for (std::size_t i = 0; i < turns.size(); ++i) {
        if (turns[i].role == ChatRole::kDeveloper && static_cast<int>(i) < last_user) continue;
        kept.push_back(std::move(turns[i]));
    }
    return kept;
}

struct RenderContext {
    const std::vector<Turn>& turns;
    bool thinking = false;
    bool drop_thinking = false;
    int last_user = -1;
    std::string_view effort_prompt;
};

void append_system_extras(std::string& out, const Turn& turn) {
    if (turn.tools != nullptr && !turn.tools->empty()) {
        out += "\n\n";
        out += render_tools_block(*turn.tools);
    }
    if (turn.message->response_format) {
        out += "\n\n";
        out += ct::kResponseFormatPrefix;
        out += to_python_json(*turn.message->response_format);
    }
}

void append_user_blocks(std::string& out, const Turn& turn) {
    out += ct::kUser;
    for (std::size_t i = 0; i < turn.blocks.size(); ++i) {
        if (i > 0) out += "\n\n";
        const Block& block = turn.blocks[i];
        if (block.is_tool_result) out += ct::kToolResultOpen;
        out += block.text;
        if (block.is_tool_result) out += ct::kToolResultClose;
    }
}

void append_assistant(std::string& out, const RenderContext& ctx, std::size_t index) {
    const ChatMessage& message = *ctx.turns[index].message;
    const bool previous_has_task = index > 0 && ctx.turns[index - 1].task != ChatTask::kNone;
    if (ctx.thinking && !previous_has_task && (!ctx.drop_thinking || static_cast<int>(index) > ctx.last_user)) {
        out += message.reasoning_content;
        out += ct::kThinkClose;
    }
    out += message.content;
    out += render_dsml_tool_calls(message.tool_calls);
    out += ct::kEos;
}

// What follows a turn when the next turn is the assistant's (or the conversation ends): the generation prompt.
void append_transition(std::string& out, const RenderContext& ctx, std::size_t index) {
    const Turn& turn = ctx.turns[index];
    if (index + 1 < ctx.turns.size()) {
        const ChatRole next = ctx.turns[index + 1].role;
        if (next != ChatRole::kAssistant && next != ChatRole::kLatestReminder) return;
    }
    if (turn.task != ChatTask::kNone) {
        if (turn.task == ChatTask::kAction) {
            out += ct::kAssistant;
            out += ctx.thinking ? ct::kThinkOpen : ct::kThinkClose;
        }
        out += task_token(turn.task);
        return;
    }
    if (turn.role != ChatRole::kUser && turn.role != ChatRole::kDeveloper) return;
    out += ct::kAssistant;
    const bool open_thinking = ctx.thinking && (!ctx.drop_thinking || static_cast<int>(index) >= ctx.last_user);
    out += open_thinking ? ct::kThinkOpen : ct::kThinkClose;
}

void render_turn(std::string& out, const RenderContext& ctx, std::size_t index) {
    if (index == 0 && ctx.thinking) out += ctx.effort_prompt;
    const Turn& turn = ctx.turns[index];
    switch (turn.role) {
        case ChatRole::kSystem:
            out += turn.message->content;
            append_system_extras(out, turn);
            break;
        case ChatRole::kDeveloper:
            out += ct::kUser;
            out += turn.message->content;
            append_system_extras(out, turn);
            break;
        case ChatRole::kUser:
            append_user_blocks(out, turn);
            break;
        case ChatRole::kLatestReminder:
            out += ct::kLatestReminder;
            out += turn.message->content;
            break;
        case ChatRole::kAssistant:
            append_assistant(out, ctx, index);
            break;
        case ChatRole::kTool:
            fail("internal error: tool message left after merging");
    }
    append_transition(out, ctx, index);
}

}  // namespace

std::string render_dsml_tool_calls(const std::vector<ChatToolCall>& calls) {
    if (calls.empty()) return {};
    std::string out = "\n\n";
    out += ct::kToolCallsOpen;
    out += '\n';
    for (std::size_t i = 0; i < calls.size(); ++i) {
        if (i > 0) out += '\n';
        out += render_invoke(calls[i]);
    }
    out += '\n';
    out += ct::kToolCallsClose;
    return out;
}

std::string render_tools_block(const std::vector<nlohmann::ordered_json>& tools) {
    std::string out(ct::kToolsTemplateHead);
    for (std::size_t i = 0; i < tools.size(); ++i) {
        if (i > 0) out += '\n';
        out += to_python_json(tools[i]);
    }
    out += ct::kToolsTemplateTail;
    return out;
}

std::string ChatEncoder::encode(const ChatConversation& conversation, const ChatOptions& options) const {
    validate(conversation);
    const ChatMessage tools_holder{ChatRole::kSystem, {}, {}, {}, {}, {}, std::nullopt, ChatTask::kNone};
    std::vector<Turn> turns = merge_turns(conversation, tools_holder);
    sort_tool_results(turns);

    const bool thinking = options.effective_thinking_mode() == ThinkingMode::kThinking;
    const bool any_tools = std::any_of(turns.begin(), turns.end(),
                                       [](const Turn& turn) { return turn.tools != nullptr && !turn.tools->empty(); });
    const bool drop_thinking = options.drop_thinking && !any_tools;
    if (thinking && drop_thinking) turns = drop_old_developer_turns(std::move(turns));

    const RenderContext ctx{turns, thinking, drop_thinking, last_user_index(turns),
                            reasoning_effort_prompt(revision_, options.reasoning_effort)};
    std::string prompt = options.add_bos ? std::string(ct::kBos) : std::string();
    for (std::size_t i = 0; i < turns.size(); ++i) render_turn(prompt, ctx, i);
    return prompt;
}

}  // namespace dsv4
