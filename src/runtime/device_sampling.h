// DeviceDraws: a step's draws for ModelOps::sample_rows, built from each request's sampling parameters and state. The
// request's logits processors become sparse edits of its row (min_tokens bans, logit_bias, penalties over its
// history) and its structured-output mask travels as bits, so the host sampler's order of operations holds
// (src/sample/sampler.h) and only the chosen ids come back to the host.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/sample_rows.h"
#include "core/logprobs.h"
#include "dsv4/sampling_params.h"
#include "sample/sampler_state.h"

namespace dsv4 {

class DeviceDraws {
  public:
    explicit DeviceDraws(int64_t vocab) : vocab_(vocab) {}

    // Whether the request can be sampled on the device now. Not when it gives a logit_bias token twice (the host adds
    // and rounds duplicates one at a time), or has a logit_bias token outside the vocabulary or a repetition penalty
    // its state does not track (the host sampler reports those).
    static bool supports(const SamplingParams& params, const SamplerState& state);

    // Adds one draw from logits row `row` for the request's next token (its constraint mask is prepared here), with its
    // raw logprobs when the request asks for them.
    void add(int64_t row, const SamplingParams& params, SamplerState& state);
    // Adds the k + 1 draws of a verify entry with one-hot drafts (sample/spec_verify.h verify_device_rows): draft row
    // row + i probes drafts[i] with the residual lane's uniform, under the history with drafts 0..i-1; row row + k is
    // the bonus draw at position base + k. The state is as it was afterwards. Not for greedy requests.
    void add_verify(int64_t row, std::span<const int32_t> drafts, const SamplingParams& params, SamplerState& state);

    size_t size() const { return draws_.size(); }
    SampleRowsArgs args() const { return {draws_, edits_, masks_}; }

  private:
    void add_edits(const SamplingParams& params, const SamplerState& state, RowDraw& draw);

    int64_t vocab_ = 0;
    std::vector<RowDraw> draws_;
    std::vector<LogitEdit> edits_;
    std::vector<uint64_t> masks_;
};

// A draw's logprobs as the host sampler reports them (sample/sampler.h SampleResult::logprobs).
SampledLogprobs to_sampled_logprobs(const DrawLogprobs& logprobs);

}  // namespace dsv4
