#include "sample/sampling_params.h"

#include <cmath>
#include <string_view>

#include "core/error.h"

namespace dsv4 {
namespace {

// Every check is written as "fail unless the value is inside the range", so NaN always fails.

void check_range(std::string_view name, double value, double lo, double hi) {
    if (!(value >= lo && value <= hi))
        fail("sampling parameter '{}' must be in [{}, {}] (got {})", name, lo, hi, value);
}

void check_token_id(std::string_view name, int64_t token, int64_t vocab_size) {
    if (token < 0 || token >= vocab_size) {
        fail("sampling parameter '{}' has token id {} outside the vocabulary [0, {})", name, token, vocab_size);
    }
}

void check_distribution_params(const SamplingParams& params) {
    if (!(params.temperature >= 0.0 && std::isfinite(params.temperature))) {
        fail("sampling parameter 'temperature' must be finite and >= 0 (got {})", params.temperature);
    }
    if (!(params.top_p > 0.0 && params.top_p <= 1.0)) {
        fail("sampling parameter 'top_p' must be in (0, 1] (got {})", params.top_p);
    }
    if (params.top_k < -1) {
        fail("sampling parameter 'top_k' must be -1 or 0 (disabled) or a positive count (got {})", params.top_k);
    }
    check_range("min_p", params.min_p, 0.0, 1.0);
}

void check_penalties(const SamplingParams& params, int64_t vocab_size) {
    if (!(params.repetition_penalty > 0.0 && std::isfinite(params.repetition_penalty))) {
        fail("sampling parameter 'repetition_penalty' must be finite and > 0 (got {})", params.repetition_penalty);
    }
    check_range("presence_penalty", params.presence_penalty, -kMaxAbsPresencePenalty, kMaxAbsPresencePenalty);
    check_range("frequency_penalty", params.frequency_penalty, -kMaxAbsPresencePenalty, kMaxAbsPresencePenalty);
    for (const auto& [token, bias] : params.logit_bias) {
        check_token_id("logit_bias", token, vocab_size);
        if (!std::isfinite(bias))
            fail("sampling parameter 'logit_bias' for token {} must be finite (got {})", token, bias);
    }
}

void check_length_params(const SamplingParams& params, int64_t vocab_size) {
    if (params.max_tokens < 1) fail("sampling parameter 'max_tokens' must be >= 1 (got {})", params.max_tokens);
    if (params.min_tokens < 0 || params.min_tokens > params.max_tokens) {
        fail("sampling parameter 'min_tokens' must be in [0, max_tokens = {}] (got {})", params.max_tokens,
             params.min_tokens);
    }
    for (int64_t token : params.stop_token_ids) check_token_id("stop_token_ids", token, vocab_size);
    if (params.stop.size() > static_cast<size_t>(kMaxStopStrings)) {
        fail("sampling parameter 'stop' has {} strings; at most {} are allowed", params.stop.size(), kMaxStopStrings);
    }
    for (size_t i = 0; i < params.stop.size(); ++i) {
        const std::string& stop = params.stop[i];
        if (stop.empty()) fail("sampling parameter 'stop' entry {} is empty; stop strings must be non-empty", i);
        if (stop.size() > static_cast<size_t>(kMaxStopStringBytes)) {
            fail("sampling parameter 'stop' entry {} is {} bytes; at most {} are allowed", i, stop.size(),
                 kMaxStopStringBytes);
        }
    }
}

void check_constraint(const SamplingParams& params, int64_t vocab_size) {
    if (!params.constraint) return;
    if (params.ignore_eos) {
        fail(
            "sampling parameter 'ignore_eos' cannot be combined with structured output: the grammar decides where "
            "the output ends");
    }
    if (params.constraint->vocab_size() != vocab_size) {
        fail("the structured-output constraint covers {} tokens, the vocabulary has {}",
             params.constraint->vocab_size(), vocab_size);
    }
}

void check_output_params(const SamplingParams& params) {
    if (params.logprobs && (*params.logprobs < 0 || *params.logprobs > kMaxLogprobs)) {
        fail("sampling parameter 'logprobs' must be in [0, {}] (got {})", kMaxLogprobs, *params.logprobs);
    }
    if (params.n < 1 || params.n > kMaxCompletions) {
        fail("sampling parameter 'n' must be in [1, {}] (got {})", kMaxCompletions, params.n);
    }
}

}  // namespace

void validate_sampling_params(const SamplingParams& params, int64_t vocab_size) {
    DSV4_CHECK(vocab_size > 0, "validate_sampling_params: vocab_size must be positive (got {})", vocab_size);
    check_distribution_params(params);
    check_penalties(params, vocab_size);
    check_length_params(params, vocab_size);
    check_output_params(params);
    check_constraint(params, vocab_size);
}

}  // namespace dsv4
