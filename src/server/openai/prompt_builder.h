// Request structs -> engine inputs: chat conversations rendered by the ChatEncoder and tokenized, completion prompts
// tokenized or range-checked, and SamplingParams completed (default max_tokens) and validated against the model
// (vocabulary, context length). Every problem is a 400 ApiError naming the parameter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/http/model_context.h"
#include "server/openai/api_types.h"

namespace dsv4::server {

struct PreparedChat {
    std::vector<int32_t> prompt_tokens;
    bool thinking = false;  // the prompt ends with <think>: the output starts as reasoning
};

// Applies tool_choice (none: tools are not shown to the model; named: only that function is shown), the reasoning
// controls (explicit thinking flag > reasoning_effort > the server default) and renders + tokenizes the prompt.
PreparedChat prepare_chat_prompt(const ChatRequest& request, const ModelContext& model, ThinkingMode default_thinking);

// The ChatOptions a request asks for (exposed for tests).
ChatOptions chat_options_for(const ChatRequest& request, ThinkingMode default_thinking);

// One completion prompt -> token ids (text: BOS first when add_special_tokens; ids: checked against the vocabulary).
std::vector<int32_t> prepare_completion_prompt(const CompletionPrompt& prompt, bool add_special_tokens,
                                               const ModelContext& model, const std::string& param);

// Fills max_tokens (requested, else `default_max_tokens`, else what is left of the context), checks
// prompt + max_tokens against the context and validates every sampling parameter.
void finalize_sampling(GenerationOptions& options, size_t longest_prompt, const ModelContext& model,
                       int default_max_tokens, const std::string& prompt_param);

// 404 when `requested` names another model than the served one (empty = the served one).
void check_model_name(const std::string& requested, const ModelContext& model);

}  // namespace dsv4::server
