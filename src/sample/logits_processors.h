// Logits processors: the request-dependent edits to one row of raw logits that come before temperature and can
// change the argmax. Order (vLLM v1): min_tokens masking, logit_bias, then the penalties (repetition, frequency,
// presence). Temperature, min_p, top_k and top_p live in sampler.cpp.
#pragma once

#include <span>

#include "dsv4/sampling_params.h"
#include "sample/sampler_state.h"

namespace dsv4 {

// Edits logits (length state.vocab_size()) in place:
//   0. with a structured-output constraint: every token it does not allow -> -inf (apply_constraint_mask)
//   1. while state.num_output_tokens() < params.min_tokens: EOS and stop token ids -> -inf (not once the
//      constraint is complete and only an end token may follow)
//   2. logit_bias: logits[id] += bias
//   3. repetition_penalty r (tokens in prompt or output): logit > 0 -> logit / r, else logit * r
//   4. frequency_penalty f: logit -= f * output_count
//   5. presence_penalty p: logit -= p if output_count > 0
// Arithmetic is in double, rounded once to float per token. Throws dsv4::Error on a length mismatch or when the
// repetition penalty is on but the state was built without it (so the prompt was not recorded).
void apply_logits_processors(std::span<float> logits, const SamplingParams& params, SamplerState& state);

// Whether apply_logits_processors would leave every logit as it is for this request now: no constraint, min_tokens
// reached, no logit bias, no penalty.
bool logits_processors_are_identity(const SamplingParams& params, const SamplerState& state);

// Whether step 1 applies now: fewer than min_tokens outputs and the constraint (if any) does not require the end.
// Call after the constraint mask is prepared.
bool masks_stop_tokens(const SamplingParams& params, const SamplerState& state);
// Whether steps 3-5 can change anything.
bool has_penalties(const SamplingParams& params);

// Step 0 alone: sets the logits of tokens outside state's constraint mask to -inf (computing the mask if needed).
void apply_constraint_mask(std::span<float> logits, SamplerState& state);

}  // namespace dsv4
