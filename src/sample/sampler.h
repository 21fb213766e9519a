// CPU sampler: one request's float logits row -> one token. This is the reference the GPU sampler is tested
// against and the path for small batches. The order of operations is vLLM v1's:
//   raw logprobs (if requested) = log_softmax(raw logits)          -- see logprobs.h
//   min_tokens masking -> logit_bias -> repetition / frequency / presence penalties   -- logits_processors.h
//   temperature < 1e-5: argmax (ties -> lowest id), done
//   temperature scaling -> min_p -> top_k -> top_p -> draw with uniform_at(seed, num_output_tokens)
// min_p and top_k keep every token at least as likely as the threshold token (ties at the k-th are all kept);
// top_p keeps the smallest most-likely prefix whose mass reaches top_p of the min_p/top_k survivors, plus any
// token tied with its last member, so the result never depends on token ids.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/logprobs.h"
#include "dsv4/sampling_params.h"
#include "sample/sampler_state.h"

namespace dsv4 {

struct SampleResult {
    int64_t token = -1;
    std::optional<SampledLogprobs> logprobs;  // present iff params.logprobs is set; top has *params.logprobs entries
};

// Samples one token from raw logits (length state.vocab_size()) and records it in state (position + 1, history).
// Throws dsv4::Error when the row has the wrong length, contains NaN or +inf, or has no token left to sample
// (every logit -inf after masking). params must have passed validate_sampling_params.
SampleResult sample(std::span<const float> logits, const SamplingParams& params, SamplerState& state);

// Whether sample() returns the raw row's argmax for this request now and nothing else: greedy, no logprobs, and no
// logits processor that could change the row. Then the argmax can be chosen where the logits are (only the id comes to
// the host) and recorded with record_chosen.
bool samples_raw_argmax(const SamplingParams& params, const SamplerState& state);
// Records a token chosen where the logits are, as sample() would have chosen it (the row's argmax for a
// samples_raw_argmax request, or a draw of ModelOps::sample_rows), and returns sample()'s result without logprobs.
// Throws when the id is outside the vocabulary or the structured-output constraint does not allow it.
SampleResult record_chosen(int64_t token, SamplerState& state);

// The distribution a non-greedy request draws from, given logits already through apply_logits_processors:
// candidate ids in ascending order and their probabilities (summing to 1). Exposed for tests and for speculative
// verification, which needs the target probabilities.
struct TokenDistribution {
    std::vector<int64_t> tokens;
    std::vector<double> probs;
};
TokenDistribution sampling_distribution(std::span<const float> processed_logits, const SamplingParams& params);

// Index of the largest logit, lowest index among ties. Throws when no entry is finite.
int64_t argmax_token(std::span<const float> logits);

}  // namespace dsv4
