// SamplingParams: how one request turns logits into tokens. Part of the public API (include/dsv4): plain data,
// no tensor or CUDA types. Validation lives in src/sample/sampling_params.cpp (validate_sampling_params); the
// semantics follow vLLM's v1 sampler (see src/sample/sampler.h for the exact order of operations).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dsv4/token_constraint.h"

namespace dsv4 {

struct SamplingParams {
    // Distribution shaping. A temperature below 1e-5 means greedy (argmax, ties -> lowest token id), and then
    // top_p / top_k / min_p have no effect.
    double temperature = 1.0;  // >= 0, finite
    double top_p = 1.0;        // (0, 1]; 1 = off. Tokens tied with the last kept one are kept too.
    int top_k = 0;             // >= -1; 0 or -1 = off. Tokens tied with the k-th are kept too (vLLM).
    double min_p = 0.0;        // [0, 1]; keeps tokens with p >= min_p * p_max (after temperature)

    // Logits processors, applied to the raw logits before temperature.
    double repetition_penalty = 1.0;  // > 0; 1 = off. Tokens seen in prompt or output: logit > 0 is divided by it,
                                      // logit <= 0 multiplied by it (vLLM / CTRL semantics).
    double presence_penalty = 0.0;    // [-2, 2]; subtracted once from every token that appears in the output
    double frequency_penalty = 0.0;   // [-2, 2]; subtracted once per occurrence in the output
    std::vector<std::pair<int64_t, float>> logit_bias;  // token id -> bias added to its logit; duplicates add up.
                                                        // The HTTP layer clamps OpenAI values to [-100, 100].
    std::optional<uint64_t> seed;  // same seed + same logits = same tokens, whatever else is in the batch;
                                   // completion i of n uses seed + i. Unset: a fresh random seed per completion.

    // Length and stopping.
    int max_tokens = 16;      // >= 1
    int min_tokens = 0;       // [0, max_tokens]; EOS and stop_token_ids are masked, stop strings ignored, until then
    bool ignore_eos = false;  // EOS does not finish the request (still masked under min_tokens)
    std::vector<int64_t> stop_token_ids;      // finish the request; the token is not detokenized into the output text
    std::vector<std::string> stop;            // stop strings, matched on detokenized text across token boundaries
    bool include_stop_str_in_output = false;  // false: the matched stop string is cut from the output text

    // Output options.
    std::optional<int> logprobs;  // [0, 20]; number of top logprobs per token (0 = only the sampled token's).
                                  // Values are "raw": log_softmax of the model logits before any processing.
    int n = 1;                    // [1, 128]; completions sharing the prompt's state
    bool skip_special_tokens = true;

    // Structured output: when set, every token is sampled among those the constraint allows (the mask is applied
    // to the logits first, before min_tokens, logit_bias and penalties), and the end tokens only where the
    // constraint may end. Each completion gets its own state (constraint->start()).
    std::shared_ptr<const TokenConstraint> constraint;
};

}  // namespace dsv4
