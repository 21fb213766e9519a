#include "sample/logits_processors.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace dsv4 {
namespace {

// Rounds a processed logit back to float. Overflow saturates: +inf would poison the softmax (inf - inf), while a
// logit pushed below -FLT_MAX (a huge negative bias) is a ban and becomes -inf.
float to_logit(double value) {
    constexpr double kMax = std::numeric_limits<float>::max();
    if (value > kMax) return std::numeric_limits<float>::max();
    if (value < -kMax) return -std::numeric_limits<float>::infinity();
    return static_cast<float>(value);
}

void mask_stop_tokens(std::span<float> logits, const SamplerState& state) {
    for (int64_t token : state.min_tokens_masked_ids()) {
        logits[static_cast<size_t>(token)] = -std::numeric_limits<float>::infinity();
    }
}

void add_logit_bias(std::span<float> logits, const SamplingParams& params) {
    for (const auto& [token, bias] : params.logit_bias) {
        DSV4_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size(),
                   "logit_bias token id {} is outside the vocabulary [0, {})", token, logits.size());
        float& logit = logits[static_cast<size_t>(token)];
        logit = to_logit(static_cast<double>(logit) + static_cast<double>(bias));
    }
}

// One token's penalties, in vLLM's order: repetition, then frequency, then presence.
float penalize(float logit, const TokenHistory& seen, const SamplingParams& params) {
    double value = logit;
    if (seen.in_prompt || seen.output_count > 0) {
        value = value > 0.0 ? value / params.repetition_penalty : value * params.repetition_penalty;
    }
    if (seen.output_count > 0) {
        value -= params.frequency_penalty * seen.output_count;
        value -= params.presence_penalty;
    }
    return to_logit(value);
}

}  // namespace

bool has_penalties(const SamplingParams& params) {
    return params.repetition_penalty != 1.0 || params.frequency_penalty != 0.0 || params.presence_penalty != 0.0;
}

bool masks_stop_tokens(const SamplingParams& params, const SamplerState& state) {
    return state.num_output_tokens() < params.min_tokens && !state.constraint_requires_end();
}

bool logits_processors_are_identity(const SamplingParams& params, const SamplerState& state) {
    return !state.has_constraint() && state.num_output_tokens() >= params.min_tokens && params.logit_bias.empty() &&
           !has_penalties(params);
}

void apply_constraint_mask(std::span<float> logits, SamplerState& state) {
    if (!state.has_constraint()) return;
    state.prepare_constraint_mask();
    const std::span<const uint64_t> mask = state.constraint_mask();
    const size_t n = logits.size();
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    for (size_t w = 0; w < mask.size(); ++w) {
        const uint64_t word = mask[w];
        if (word == ~uint64_t{0}) continue;
        const size_t begin = w * 64;
        const size_t end = std::min(n, begin + 64);
        if (word == 0) {  // most words of a narrow mask: a plain fill vectorizes
            std::fill(logits.begin() + static_cast<std::ptrdiff_t>(begin),
                      logits.begin() + static_cast<std::ptrdiff_t>(end), kNegInf);
            continue;
        }
        for (size_t i = begin; i < end; ++i) {
            if (!((word >> (i & 63)) & 1)) logits[i] = kNegInf;
        }
    }
}

void apply_logits_processors(std::span<float> logits, const SamplingParams& params, SamplerState& state) {
    DSV4_CHECK(static_cast<int64_t>(logits.size()) == state.vocab_size(),
               "apply_logits_processors: logits row has {} entries, vocabulary has {}", logits.size(),
               state.vocab_size());
    DSV4_CHECK(params.repetition_penalty == 1.0 || state.tracks_prompt(),
               "apply_logits_processors: repetition_penalty is {} but the SamplerState was built without it",
               params.repetition_penalty);
    apply_constraint_mask(logits, state);
    if (masks_stop_tokens(params, state)) mask_stop_tokens(logits, state);
    add_logit_bias(logits, params);
    if (!has_penalties(params)) return;
    for (const auto& [token, seen] : state.history()) {
        float& logit = logits[static_cast<size_t>(token)];
        logit = penalize(logit, seen, params);
    }
}

}  // namespace dsv4
