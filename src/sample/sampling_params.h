// Validation of SamplingParams (include/dsv4/sampling_params.h) and the limits it enforces. The server calls
// validate_sampling_params on every request before it reaches the engine, so the sampler can trust its input.
#pragma once

#include <cstdint>

#include "dsv4/sampling_params.h"

namespace dsv4 {

inline constexpr int kMaxLogprobs = 20;                // OpenAI top_logprobs and vLLM's default max_logprobs
inline constexpr int kMaxCompletions = 128;            // n
inline constexpr int kMaxStopStrings = 64;             // entries in SamplingParams::stop
inline constexpr int kMaxStopStringBytes = 1024;       // bytes per stop string (bounds the matcher's holdback)
inline constexpr double kMaxAbsPresencePenalty = 2.0;  // OpenAI range for presence and frequency penalties
inline constexpr double kGreedyTemperature = 1e-5;     // temperatures below this sample greedily (vLLM)

// Throws dsv4::Error naming the first offending parameter, its allowed range and the value received.
// vocab_size bounds token ids in logit_bias and stop_token_ids.
void validate_sampling_params(const SamplingParams& params, int64_t vocab_size);

// True when the request samples by argmax (temperature below kGreedyTemperature).
inline bool is_greedy(const SamplingParams& params) {
    return params.temperature < kGreedyTemperature;
}

}  // namespace dsv4
