// JSON pieces shared by the chat and completions responses: identity (id, created, model), usage, logprobs.
// The *_text functions build streaming chunks as text (per-token hot path); the *_json ones build DOM values for the
// one-shot responses.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/generation/choice_pipeline.h"
#include "server/generation/response_sink.h"

namespace dsv4::server {

struct ResponseIdentity {
    std::string id;       // chatcmpl-… / cmpl-…
    std::string model;    // the served model name
    int64_t created = 0;  // Unix seconds
};

// {"prompt_tokens":…,"completion_tokens":…,"total_tokens":…,"prompt_tokens_details":{"cached_tokens":…}
//  ,"completion_tokens_details":{"reasoning_tokens":…}}   (reasoning_tokens 0 unless with_reasoning)
nlohmann::json usage_json(const UsageCounts& usage, bool with_reasoning);

// Chat logprobs: {"content":[{"token","logprob","bytes","top_logprobs":[…]}, …]}
void append_chat_logprobs_text(std::string& out, const std::vector<LogprobEntry>& entries);
nlohmann::json chat_logprobs_json(const std::vector<LogprobEntry>& entries);

// Completions logprobs: {"tokens":[…],"token_logprobs":[…],"top_logprobs":[{text: logprob}, …],"text_offset":[…]}.
// `offset` is the text offset of the first entry and is advanced past them.
nlohmann::json completion_logprobs_json(const std::vector<LogprobEntry>& entries, size_t& offset);

// vLLM's stop_reason: the matched stop string, the stop token id, or null.
nlohmann::json stop_reason_json(const ChoiceEnd& end);

}  // namespace dsv4::server
