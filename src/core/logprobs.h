// Logprobs returned to the client (in core: the host sampler (src/sample) and the backends' sampling
// (backend/sample_rows.h) report the same ones). They are "raw" logprobs, vLLM v1's default
// (logprobs_mode=raw_logprobs): log_softmax of the model's logits before logit_bias, penalties, temperature or any
// filtering, so they describe the model, not the sampling distribution (a greedy or top_k request still reports the
// model's probabilities).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dsv4 {

// (Named TopLogprob, not TokenLogprob: include/dsv4/engine.h owns dsv4::TokenLogprob, the public int32 one.)
struct TopLogprob {
    int64_t token = 0;
    float logprob = 0.0f;
};

struct SampledLogprobs {
    float logprob = 0.0f;         // the sampled token's raw logprob
    int64_t rank = 0;             // 1-based: how many tokens have a raw logprob >= the sampled one (vLLM)
    std::vector<TopLogprob> top;  // the num_top most likely tokens, descending; ties -> lower id first
};

// log_softmax(logits) at token, its rank and the num_top best tokens, computed in double. logits must be free of
// NaN and +inf and have at least one finite entry (sample() checks this before calling).
SampledLogprobs compute_raw_logprobs(std::span<const float> logits, int64_t token, int num_top);

}  // namespace dsv4
