// SamplingParams: how one request turns logits into tokens. Part of the public API (include/dsv4): plain data,
// no tensor or CUDA types. Validation lives in src/sample/sampling_params.cpp (validate_sampling_params).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dsv4 {

struct SamplingParams {
    double temperature = 1.0;  // 0 = greedy
    double top_p = 1.0;        // (0, 1]
    int top_k = 0;             // 0 or -1 = disabled
    double min_p = 0.0;        // [0, 1]
    double repetition_penalty = 1.0;  // > 0; 1 = off (applies to prompt + output tokens, vLLM semantics)
    double presence_penalty = 0.0;    // [-2, 2], output tokens only
    double frequency_penalty = 0.0;   // [-2, 2], output tokens only
    std::vector<std::pair<int64_t, float>> logit_bias;  // token id -> bias added to the logit
    std::optional<uint64_t> seed;     // per-request seed: same seed + same logits = same tokens

    int max_tokens = 16;
    int min_tokens = 0;               // EOS and stop tokens are masked until this many tokens exist
    bool ignore_eos = false;
    std::vector<int64_t> stop_token_ids;
    std::vector<std::string> stop;    // stop strings; matched on detokenized text, never emitted
    bool include_stop_str_in_output = false;

    std::optional<int> logprobs;      // number of top logprobs to return per token (0 = only the sampled one)
    int n = 1;                        // completions sharing the prompt's state
    bool skip_special_tokens = true;
};

}  // namespace dsv4
