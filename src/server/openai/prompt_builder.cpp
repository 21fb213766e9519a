#include "server/openai/prompt_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "core/error.h"
#include "sample/sampling_params.h"
#include "server/http/api_error.h"

namespace dsv4::server {
namespace {

// "sampling parameter 'top_p' must be ..." -> "top_p"
std::string parameter_in_message(std::string_view message) {
    const size_t open = message.find('\'');
    if (open == std::string_view::npos) return {};
    const size_t close = message.find('\'', open + 1);
    if (close == std::string_view::npos) return {};
    return std::string(message.substr(open + 1, close - open - 1));
}

ChatConversation conversation_for(const ChatRequest& request) {
    ChatConversation conversation = request.conversation;
    if (request.tool_choice == ToolChoice::kNone) {
        conversation.tools.clear();
    } else if (request.tool_choice == ToolChoice::kNamed) {
        std::erase_if(conversation.tools,
                      [&](const auto& tool) { return tool.value("name", "") != request.tool_choice_name; });
    }
    // A response_format schema is shown to the model the way DeepSeek's template does it ("## Response Format" in
    // the system prompt), on the first system / developer message or a new system message in front.
    const auto& structured = request.options.structured;
    if (structured && structured->prompt_schema) {
        std::vector<ChatMessage>& messages = conversation.messages;
        const bool has_system =
            !messages.empty() && (messages[0].role == ChatRole::kSystem || messages[0].role == ChatRole::kDeveloper);
        if (has_system) {
            if (!messages[0].response_format) messages[0].response_format = *structured->prompt_schema;
        } else {
            std::vector<ChatMessage> with_system(1);
            with_system[0].role = ChatRole::kSystem;
            with_system[0].response_format = *structured->prompt_schema;
            std::move(messages.begin(), messages.end(), std::back_inserter(with_system));
            messages = std::move(with_system);
        }
    }
    return conversation;
}

}  // namespace

ChatOptions chat_options_for(const ChatRequest& request, ThinkingMode default_thinking) {
    ChatOptions options;
    options.reasoning_effort = request.reasoning_effort.value_or(ReasoningEffort::kDefault);
    if (request.thinking) {
        options.thinking_mode = *request.thinking ? ThinkingMode::kThinking : ThinkingMode::kChat;
    } else if (request.reasoning_effort && *request.reasoning_effort != ReasoningEffort::kDefault) {
        // An effort other than "none" asks for reasoning; "none" maps to chat mode inside ChatOptions.
        options.thinking_mode = ThinkingMode::kThinking;
    } else {
        options.thinking_mode = default_thinking;
    }
    options.drop_thinking = request.drop_thinking.value_or(true);
    return options;
}

PreparedChat prepare_chat_prompt(const ChatRequest& request, const ModelContext& model, ThinkingMode default_thinking) {
    const ChatOptions options = chat_options_for(request, default_thinking);
    std::string text;
    try {
        text = model.encoder.encode(conversation_for(request), options);
    } catch (const Error& e) {
        fail_request("messages", "{}", e.what());
    }
    PreparedChat prepared;
    prepared.thinking = options.effective_thinking_mode() == ThinkingMode::kThinking;
    try {
        prepared.prompt_tokens = model.tokenizer->encode(text, true);
    } catch (const Error& e) {
        fail_request("messages", "{}", e.what());
    }
    return prepared;
}

std::vector<int32_t> prepare_completion_prompt(const CompletionPrompt& prompt, bool add_special_tokens,
                                               const ModelContext& model, const std::string& param) {
    std::vector<int32_t> tokens;
    if (prompt.is_text) {
        if (add_special_tokens) tokens.push_back(model.bos_token);
        try {
            const std::vector<int32_t> text_tokens = model.tokenizer->encode(prompt.text, true);
            tokens.insert(tokens.end(), text_tokens.begin(), text_tokens.end());
        } catch (const Error& e) {
            fail_request(param, "{}", e.what());
        }
    } else {
        for (size_t i = 0; i < prompt.tokens.size(); ++i) {
            const int64_t id = prompt.tokens[i];
            if (id < 0 || id >= model.info.vocab_size) {
                fail_request(param, "'{}[{}]' is token id {}, outside the vocabulary [0, {})", param, i, id,
                             model.info.vocab_size);
            }
            tokens.push_back(static_cast<int32_t>(id));
        }
    }
    if (tokens.empty()) fail_request(param, "'{}' is empty", param);
    return tokens;
}

void finalize_sampling(GenerationOptions& options, size_t longest_prompt, const ModelContext& model,
                       int default_max_tokens, const std::string& prompt_param) {
    const int64_t context = model.info.max_model_len;
    const auto prompt_len = static_cast<int64_t>(longest_prompt);
    if (context > 0 && prompt_len >= context) {
        throw ApiError(400, "invalid_request_error",
                       fmt::format("This model's maximum context length is {} tokens. However, your prompt is {} "
                                   "tokens long, which leaves no room for a completion.",
                                   context, prompt_len),
                       prompt_param, "context_length_exceeded");
    }
    int64_t max_tokens = options.max_tokens ? *options.max_tokens : default_max_tokens;
    if (max_tokens <= 0) max_tokens = context > 0 ? context - prompt_len : 16;
    if (context > 0 && prompt_len + max_tokens > context) {
        throw ApiError(400, "invalid_request_error",
                       fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens "
                                   "({} in the prompt, {} for the completion). Please reduce the prompt or max_tokens.",
                                   context, prompt_len + max_tokens, prompt_len, max_tokens),
                       options.max_tokens ? "max_tokens" : prompt_param, "context_length_exceeded");
    }
    options.sampling.max_tokens = static_cast<int>(max_tokens);
    try {
        validate_sampling_params(options.sampling, model.info.vocab_size);
    } catch (const Error& e) {
        fail_request(parameter_in_message(e.what()), "{}", e.what());
    }
}

void check_model_name(const std::string& requested, const ModelContext& model) {
    if (!requested.empty() && requested != model.served_name) {
        throw not_found_error(
            fmt::format("The model '{}' does not exist; this server serves '{}'", requested, model.served_name),
            "model_not_found");
    }
}

}  // namespace dsv4::server
