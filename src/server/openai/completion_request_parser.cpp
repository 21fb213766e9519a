// /v1/completions, /tokenize and /detokenize bodies.
#include <climits>

#include "server/http/api_error.h"
#include "server/openai/request_parser.h"

namespace dsv4::server {
namespace {

constexpr int64_t kMaxTokenId = INT_MAX;

std::vector<int64_t> parse_token_ids(const Json& list, const std::string& path) {
    std::vector<int64_t> tokens;
    tokens.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) tokens.push_back(to_int(list[i], index_path(path, i), 0, kMaxTokenId));
    return tokens;
}

CompletionPrompt parse_prompt_entry(const Json& entry, const std::string& path) {
    CompletionPrompt prompt;
    if (entry.is_string()) {
        prompt.text = entry.get<std::string>();
    } else if (entry.is_array()) {
        prompt.is_text = false;
        prompt.tokens = parse_token_ids(entry, path);
        if (prompt.tokens.empty()) fail_request(path, "'{}' is an empty token list", path);
    } else {
        fail_request(path, "'{}' must be a string or an array of token ids, not {}", path, json_type_name(entry));
    }
    return prompt;
}

// prompt: "text" | [token ids] | ["text", ...] | [[token ids], ...]
std::vector<CompletionPrompt> parse_prompts(const Json& body) {
    if (!body.contains("prompt") || body.at("prompt").is_null()) fail_request("prompt", "'prompt' is required");
    const Json& prompt = body.at("prompt");
    if (prompt.is_string()) return {parse_prompt_entry(prompt, "prompt")};
    if (!prompt.is_array()) {
        fail_request("prompt", "'prompt' must be a string, an array of token ids, or an array of either, not {}",
                     json_type_name(prompt));
    }
    if (prompt.empty()) fail_request("prompt", "'prompt' must not be an empty array");
    if (prompt.front().is_number()) return {parse_prompt_entry(prompt, "prompt")};  // one token-id list
    if (prompt.size() > static_cast<size_t>(kMaxPromptsPerRequest)) {
        fail_request("prompt", "'prompt' lists {} prompts; at most {} are allowed per request", prompt.size(),
                     kMaxPromptsPerRequest);
    }
    std::vector<CompletionPrompt> prompts;
    size_t index = 0;
    for (const Json& entry : prompt) {
        prompts.push_back(parse_prompt_entry(entry, index_path("prompt", index)));
        ++index;
    }
    return prompts;
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body_text) {
    const Json body = parse_request_json(body_text);
    CompletionRequest request;
    request.options = parse_generation_options(body, /*chat=*/false);
    request.prompts = parse_prompts(body);
    request.echo = get_bool(body, "echo", "").value_or(false);
    request.add_special_tokens = get_bool(body, "add_special_tokens", "").value_or(true);
    if (request.echo && request.options.logprobs) {
        fail_request("echo", "'echo' together with 'logprobs' needs prompt logprobs, which are not supported");
    }
    if (auto suffix = get_string(body, "suffix", ""); suffix && !suffix->empty()) {
        fail_request("suffix", "'suffix' is not supported");
    }
    return request;
}

TokenizeRequest parse_tokenize_request(std::string_view body_text) {
    const Json body = parse_request_json(body_text);
    TokenizeRequest request;
    request.model = get_string(body, "model", "").value_or("");
    if (body.contains("messages")) {
        request.is_chat = true;
        parse_chat_fields(body, request.chat);
        request.add_special_tokens = get_bool(body, "add_special_tokens", "").value_or(false);
    } else {
        const std::optional<std::string> prompt = get_string(body, "prompt", "");
        if (!prompt) fail_request("prompt", "'prompt' (a string) or 'messages' is required");
        request.prompt = *prompt;
        request.add_special_tokens = get_bool(body, "add_special_tokens", "").value_or(true);
    }
    return request;
}

DetokenizeRequest parse_detokenize_request(std::string_view body_text) {
    const Json body = parse_request_json(body_text);
    DetokenizeRequest request;
    request.model = get_string(body, "model", "").value_or("");
    const Json* tokens = get_array(body, "tokens", "");
    if (tokens == nullptr) fail_request("tokens", "'tokens' (an array of token ids) is required");
    request.tokens = parse_token_ids(*tokens, "tokens");
    return request;
}

}  // namespace dsv4::server
