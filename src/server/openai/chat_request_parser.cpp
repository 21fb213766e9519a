// /v1/chat/completions bodies: messages, tools, tool_choice and the reasoning controls.
#include "core/error.h"
#include "server/http/api_error.h"
#include "server/openai/request_parser.h"

namespace dsv4::server {
namespace {

const Json kNullJson;

// OpenAI's "developer" role means what "system" means for older models; DeepSeek's encoder has an internal
// developer role with other semantics, which API clients never intend. So developer -> system.
ChatRole parse_role(const Json& message, const std::string& path) {
    const std::optional<std::string> role = get_string(message, "role", path);
    if (!role) fail_request(field_path(path, "role"), "'{}' is required", field_path(path, "role"));
    if (*role == "developer") return ChatRole::kSystem;
    try {
        return parse_chat_role(*role);
    } catch (const Error&) {
        fail_request(field_path(path, "role"),
                     "'{}' must be one of system, developer, user, assistant, tool (got '{}')",
                     field_path(path, "role"), *role);
    }
}

// content: a string, null, or an array of {"type": "text", "text": ...} parts (joined by "\n", as vLLM does).
std::string parse_content(const Json& message, const std::string& path) {
    if (!message.contains("content")) return {};
    const Json& content = message.at("content");
    if (content.is_null()) return {};
    const std::string content_path = field_path(path, "content");
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) {
        fail_request(content_path, "'{}' must be a string or an array of content parts, not {}", content_path,
                     json_type_name(content));
    }
    std::string text;
    for (size_t i = 0; i < content.size(); ++i) {
        const Json& part = content.at(i);
        const std::string part_path = index_path(content_path, i);
        if (!part.is_object())
            fail_request(part_path, "'{}' must be an object, not {}", part_path, json_type_name(part));
        const std::string type = get_string(part, "type", part_path).value_or("");
        if (type != "text") {
            fail_request(part_path, "'{}' has type '{}'; only 'text' content parts are supported", part_path, type);
        }
        const std::optional<std::string> part_text = get_string(part, "text", part_path);
        if (!part_text) fail_request(field_path(part_path, "text"), "'{}' is required", field_path(part_path, "text"));
        if (i > 0) text += '\n';
        text += *part_text;
    }
    return text;
}

ChatToolCall parse_tool_call(const Json& call, const std::string& path) {
    if (!call.is_object()) fail_request(path, "'{}' must be an object, not {}", path, json_type_name(call));
    ChatToolCall out;
    out.id = get_string(call, "id", path).value_or("");
    const std::string type = get_string(call, "type", path).value_or("function");
    if (type != "function") fail_request(field_path(path, "type"), "'{}' must be 'function'", field_path(path, "type"));
    const Json* function = get_object(call, "function", path);
    const std::string function_path = field_path(path, "function");
    if (function == nullptr) fail_request(function_path, "'{}' is required", function_path);
    out.name = get_string(*function, "name", function_path).value_or("");
    if (out.name.empty()) fail_request(field_path(function_path, "name"), "'{}.name' is required", function_path);
    if (function->contains("arguments")) {
        const Json& arguments = function->at("arguments");
        // OpenAI sends a JSON string; some clients send the object itself.
        if (!arguments.is_null())
            out.arguments = arguments.is_string() ? arguments.get<std::string>() : arguments.dump();
    }
    return out;
}

ChatMessage parse_message(const Json& message, const std::string& path) {
    if (!message.is_object()) fail_request(path, "'{}' must be an object, not {}", path, json_type_name(message));
    ChatMessage out;
    out.role = parse_role(message, path);
    out.content = parse_content(message, path);
    if (out.role == ChatRole::kAssistant) {
        // Reasoning of earlier turns, under either field name (vLLM renamed it).
        if (auto reasoning = get_string(message, "reasoning_content", path)) {
            out.reasoning_content = *reasoning;
        } else if (auto alias = get_string(message, "reasoning", path)) {
            out.reasoning_content = *alias;
        }
        if (const Json* calls = get_array(message, "tool_calls", path)) {
            for (size_t i = 0; i < calls->size(); ++i) {
                out.tool_calls.push_back(parse_tool_call((*calls)[i], index_path(field_path(path, "tool_calls"), i)));
            }
        }
    }
    if (out.role == ChatRole::kTool) out.tool_call_id = get_string(message, "tool_call_id", path).value_or("");
    return out;
}

void parse_messages(const Json& body, ChatConversation& conversation) {
    const Json* messages = get_array(body, "messages", "");
    if (messages == nullptr) fail_request("messages", "'messages' is required");
    if (messages->empty()) fail_request("messages", "'messages' must contain at least one message");
    for (size_t i = 0; i < messages->size(); ++i) {
        conversation.messages.push_back(parse_message((*messages)[i], index_path("messages", i)));
    }
}

void parse_tools(const Json& body, ChatConversation& conversation) {
    const Json* tools = get_array(body, "tools", "");
    if (tools == nullptr) return;
    for (size_t i = 0; i < tools->size(); ++i) {
        const Json& tool = (*tools)[i];
        const std::string path = index_path("tools", i);
        if (!tool.is_object()) fail_request(path, "'{}' must be an object, not {}", path, json_type_name(tool));
        const std::string type = get_string(tool, "type", path).value_or("function");
        if (type != "function") {
            fail_request(field_path(path, "type"), "'{}' has type '{}'; only 'function' tools are supported", path,
                         type);
        }
        const Json* function = get_object(tool, "function", path);
        const std::string function_path = field_path(path, "function");
        if (function == nullptr) fail_request(function_path, "'{}' is required", function_path);
        const std::string name = get_string(*function, "name", function_path).value_or("");
        if (name.empty()) fail_request(field_path(function_path, "name"), "'{}.name' is required", function_path);
        get_string(*function, "description", function_path);  // type check only
        get_object(*function, "parameters", function_path);
        conversation.tools.push_back(*function);
    }
}

void parse_tool_choice(const Json& body, ChatRequest& request) {
    const Json& choice = body.contains("tool_choice") ? body.at("tool_choice") : kNullJson;
    if (!choice.is_null()) {
        if (choice.is_string()) {
            const std::string value = choice.get<std::string>();
            if (value == "auto") {
                request.tool_choice = ToolChoice::kAuto;
            } else if (value == "none") {
                request.tool_choice = ToolChoice::kNone;
            } else if (value == "required") {
                request.tool_choice = ToolChoice::kRequired;
            } else {
                fail_request("tool_choice",
                             "'tool_choice' must be 'auto', 'none', 'required' or a named function "
                             "(got '{}')",
                             value);
            }
        } else if (choice.is_object()) {
            const Json* function = get_object(choice, "function", "tool_choice");
            const std::optional<std::string> name =
                function != nullptr ? get_string(*function, "name", "tool_choice.function") : std::nullopt;
            if (!name || name->empty()) fail_request("tool_choice", "'tool_choice.function.name' is required");
            request.tool_choice = ToolChoice::kNamed;
            request.tool_choice_name = *name;
        } else {
            fail_request("tool_choice", "'tool_choice' must be a string or an object, not {}", json_type_name(choice));
        }
    }
    const bool has_tools = !request.conversation.tools.empty();
    if (!has_tools && (request.tool_choice == ToolChoice::kRequired || request.tool_choice == ToolChoice::kNamed)) {
        fail_request("tool_choice", "'tool_choice' requires 'tools'");
    }
    if (request.tool_choice == ToolChoice::kNamed) {
        bool found = false;
        for (const auto& tool : request.conversation.tools)
            found = found || tool.value("name", "") == request.tool_choice_name;
        if (!found) {
            fail_request("tool_choice", "'tool_choice' names the function '{}', which is not in 'tools'",
                         request.tool_choice_name);
        }
    }
    if (auto v = get_bool(body, "parallel_tool_calls", "")) request.parallel_tool_calls = *v;
}

std::optional<ReasoningEffort> parse_effort(const Json& object, std::string_view path) {
    const std::optional<std::string> value = get_string(object, "reasoning_effort", path);
    if (!value) return std::nullopt;
    try {
        return parse_reasoning_effort(*value);
    } catch (const Error&) {
        const std::string full = field_path(path, "reasoning_effort");
        fail_request(full, "'{}' must be one of none, minimal, low, medium, high, xhigh, max (got '{}')", full, *value);
    }
}

void parse_reasoning(const Json& body, ChatRequest& request) {
    request.reasoning_effort = parse_effort(body, "");
    const Json* kwargs = get_object(body, "chat_template_kwargs", "");
    if (kwargs == nullptr) return;
    if (auto effort = parse_effort(*kwargs, "chat_template_kwargs")) request.reasoning_effort = effort;
    if (auto thinking = get_bool(*kwargs, "thinking", "chat_template_kwargs")) {
        request.thinking = thinking;
    } else if (auto enable = get_bool(*kwargs, "enable_thinking", "chat_template_kwargs")) {
        request.thinking = enable;
    }
    request.drop_thinking = get_bool(*kwargs, "drop_thinking", "chat_template_kwargs");
}

void reject_unsupported_chat(const Json& body) {
    if (body.contains("functions") || body.contains("function_call")) {
        fail_request(body.contains("functions") ? "functions" : "function_call",
                     "the legacy 'functions' / 'function_call' fields are not supported; use 'tools' / 'tool_choice'");
    }
    if (get_bool(body, "continue_final_message", "").value_or(false)) {
        fail_request("continue_final_message", "'continue_final_message' is not supported");
    }
}

// tool_choice "required" or a named function: the output is a DSML tool-call block whose arguments follow the
// tools' parameter schemas (structured/tool_call_grammar). Named: exactly one call of that function.
void force_tool_calls(ChatRequest& request) {
    if (request.tool_choice != ToolChoice::kRequired && request.tool_choice != ToolChoice::kNamed) return;
    if (request.options.structured) {
        fail_request(request.options.structured->param,
                     "'tool_choice' forces a tool call, which cannot be combined with '{}'",
                     request.options.structured->param);
    }
    StructuredOutputRequest forced;
    forced.param = "tool_choice";
    forced.spec.kind = structured::GrammarKind::kToolCalls;
    forced.spec.parallel_tool_calls = request.tool_choice == ToolChoice::kRequired && request.parallel_tool_calls;
    for (const auto& tool : request.conversation.tools) {
        const std::string name = tool.value("name", "");
        if (request.tool_choice == ToolChoice::kNamed && name != request.tool_choice_name) continue;
        const bool has_parameters = tool.contains("parameters") && !tool.at("parameters").is_null();
        forced.spec.tools.push_back({name, has_parameters ? tool.at("parameters").dump() : std::string()});
    }
    request.options.structured = std::move(forced);
}

}  // namespace

void parse_chat_fields(const Json& body, ChatRequest& request) {
    parse_messages(body, request.conversation);
    parse_tools(body, request.conversation);
    parse_tool_choice(body, request);
    parse_reasoning(body, request);
    reject_unsupported_chat(body);
}

ChatRequest parse_chat_request(std::string_view body_text) {
    const Json body = parse_request_json(body_text);
    ChatRequest request;
    request.options = parse_generation_options(body, /*chat=*/true);
    parse_chat_fields(body, request);
    force_tool_calls(request);
    return request;
}

}  // namespace dsv4::server
