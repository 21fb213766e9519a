// Native request structs for the OpenAI-compatible routes: what request_parser.h produces from JSON and what the
// route handlers act on. No JSON type and no engine type is needed to use them beyond SamplingParams and the chat
// encoder's conversation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dsv4/sampling_params.h"
#include "structured/grammar_spec.h"
#include "tokenizer/chat_encoding.h"

namespace dsv4::server {

struct StreamOptions {
    bool include_usage = false;           // a last chunk with usage (choices: [])
    bool continuous_usage_stats = false;  // usage on every chunk (vLLM extension)
};

// A structured-output request (response_format, guided_*, structured_outputs, grammar, json_schema, or a forced
// tool_choice): what to compile and which field asked for it (named by errors).
struct StructuredOutputRequest {
    structured::GrammarSpec spec;
    std::string param;
    std::optional<nlohmann::ordered_json> prompt_schema;  // response_format json_schema: shown to the model too
};

// What chat and completion requests share.
struct GenerationOptions {
    std::string model;              // empty: the served model
    SamplingParams sampling;        // max_tokens filled in later when the request did not give one
    std::optional<int> max_tokens;  // as requested (max_tokens or max_completion_tokens)
    bool stream = false;
    StreamOptions stream_options;
    bool logprobs = false;  // return logprobs of the sampled tokens
    int top_logprobs = 0;   // alternatives per position
    std::string user;       // informational only
    std::optional<StructuredOutputRequest> structured;
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct ChatRequest {
    GenerationOptions options;
    ChatConversation conversation;  // messages and request-level tools (function objects)
    ToolChoice tool_choice = ToolChoice::kAuto;
    std::string tool_choice_name;  // kNamed
    bool parallel_tool_calls = true;
    // Reasoning controls; unset fields take the server defaults.
    std::optional<bool> thinking;                     // chat_template_kwargs.thinking / enable_thinking
    std::optional<ReasoningEffort> reasoning_effort;  // reasoning_effort or chat_template_kwargs.reasoning_effort
    std::optional<bool> drop_thinking;                // chat_template_kwargs.drop_thinking
};

// One prompt of a completion request: text or token ids.
struct CompletionPrompt {
    bool is_text = true;
    std::string text;
    std::vector<int64_t> tokens;  // checked against the vocabulary later
};

struct CompletionRequest {
    GenerationOptions options;
    std::vector<CompletionPrompt> prompts;  // a list prompt runs one engine request per entry
    bool echo = false;                      // prepend the prompt text to each choice
    bool add_special_tokens = true;         // text prompts start with BOS (vLLM default)
};

struct TokenizeRequest {
    std::string model;
    bool is_chat = false;
    std::string prompt;  // !is_chat
    ChatRequest chat;    // is_chat: the conversation is rendered like /v1/chat/completions would
    bool add_special_tokens = true;
};

struct DetokenizeRequest {
    std::string model;
    std::vector<int64_t> tokens;
};

}  // namespace dsv4::server
