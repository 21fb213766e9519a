// JSON request bodies -> native request structs (api_types.h). Pure functions: no engine, no tokenizer, no I/O, so
// they are unit-tested and fuzzed on their own (tests/fuzz/fuzz_request_parser.cpp). Every rejection is a 400
// ApiError whose param names the offending field; nothing else is ever thrown. Checks that need the model (token ids
// inside the vocabulary, prompt length against the context) happen later, in the route handlers.
#pragma once

#include <string_view>

#include "server/openai/api_types.h"
#include "server/openai/json_fields.h"

namespace dsv4::server {

inline constexpr int kMaxPromptsPerRequest = 256;  // entries of a completion prompt list (each one engine request)
inline constexpr int kMaxLogitBiasEntries = 1024;
inline constexpr double kMaxLogitBias = 100.0;  // OpenAI's range; larger values are clamped

ChatRequest parse_chat_request(std::string_view body);
CompletionRequest parse_completion_request(std::string_view body);
TokenizeRequest parse_tokenize_request(std::string_view body);
DetokenizeRequest parse_detokenize_request(std::string_view body);

// Shared pieces (exposed for tests). `chat` selects the chat spelling of logprobs (bool + top_logprobs) over the
// completions one (an integer).
GenerationOptions parse_generation_options(const Json& body, bool chat);
// The chat-specific fields of `body` (messages, tools, tool_choice, reasoning controls) into `request`.
void parse_chat_fields(const Json& body, ChatRequest& request);
// The structured-output fields (response_format, vLLM's guided_json / guided_regex / guided_choice / guided_grammar /
// structured_outputs, llama-server's grammar / json_schema): at most one may be given.
std::optional<StructuredOutputRequest> parse_structured_output(const Json& body);
// 400 for fields other servers accept that would change what is generated and that this server does not implement
// (e.g. use_beam_search, typical_p, mirostat); neutral values (false, 1.0, 0, empty) are accepted.
void reject_unsupported_generation_fields(const Json& body);

}  // namespace dsv4::server
