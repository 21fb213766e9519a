#include "runtime/device_sampling.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "sample/logits_processors.h"
#include "sample/sampling_params.h"
#include "sample/spec_verify.h"

namespace dsv4 {

bool DeviceDraws::supports(const SamplingParams& params, const SamplerState& state) {
    if (params.repetition_penalty != 1.0 && !state.tracks_prompt()) return false;
    std::vector<int64_t> biased;
    biased.reserve(params.logit_bias.size());
    for (const auto& [token, bias] : params.logit_bias) {
        if (token < 0 || token >= state.vocab_size()) return false;  // the host sampler reports it
        biased.push_back(token);
    }
    std::sort(biased.begin(), biased.end());
    return std::adjacent_find(biased.begin(), biased.end()) == biased.end();
}

void DeviceDraws::add_edits(const SamplingParams& params, const SamplerState& state, RowDraw& draw) {
    std::map<int64_t, LogitEdit> edits;  // ordered: the same edits in the same order for the same request
    auto edit = [&](int64_t token) -> LogitEdit& {
        LogitEdit& e = edits[token];
        e.token = static_cast<int32_t>(token);
        return e;
    };
    if (masks_stop_tokens(params, state)) {
        for (int64_t token : state.min_tokens_masked_ids()) edit(token).masked = true;
    }
    for (const auto& [token, bias] : params.logit_bias) {
        DSV4_CHECK(token >= 0 && token < vocab_, "logit_bias token id {} is outside the vocabulary [0, {})", token,
                   vocab_);
        LogitEdit& e = edit(token);
        e.has_bias = true;
        e.bias = bias;
    }
    if (has_penalties(params)) {
        for (const auto& [token, seen] : state.history()) {
            LogitEdit& e = edit(token);
            e.penalized = true;
            e.repeat = seen.in_prompt || seen.output_count > 0;
            e.repetition = params.repetition_penalty;
            if (seen.output_count > 0) {
                e.frequency = params.frequency_penalty * seen.output_count;
                e.presence = params.presence_penalty;
            }
        }
    }
    draw.edit_begin = static_cast<int64_t>(edits_.size());
    draw.edit_count = static_cast<int64_t>(edits.size());
    for (const auto& [token, e] : edits) edits_.push_back(e);
}

void DeviceDraws::add(int64_t row, const SamplingParams& params, SamplerState& state) {
    DSV4_CHECK(state.vocab_size() == vocab_, "device sampling: a request over {} tokens in a step over {}",
               state.vocab_size(), vocab_);
    RowDraw draw;
    draw.row = row;
    if (state.has_constraint()) {  // first: whether min_tokens bans the end tokens depends on the mask
        state.prepare_constraint_mask();
        draw.mask = static_cast<int64_t>(masks_.size()) / sample_mask_words(vocab_);
        const std::span<const uint64_t> mask = state.constraint_mask();
        masks_.insert(masks_.end(), mask.begin(), mask.end());
    }
    add_edits(params, state, draw);
    draw.greedy = is_greedy(params);
    draw.temperature = params.temperature;
    draw.top_k = params.top_k;
    draw.top_p = params.top_p;
    draw.min_p = params.min_p;
    draw.uniform = uniform_at(state.seed(), static_cast<uint64_t>(state.num_output_tokens()));
    draw.logprobs = params.logprobs ? *params.logprobs : -1;
    draws_.push_back(draw);
}

void DeviceDraws::add_verify(int64_t row, std::span<const int32_t> drafts, const SamplingParams& params,
                             SamplerState& state) {
    const double residual_uniform =
        uniform_at(state.seed(), static_cast<uint64_t>(state.num_output_tokens()), kResidualLane);
    std::vector<int64_t> walked;  // the drafts recorded so far: the history of the next row's edits
    for (size_t i = 0; i < drafts.size(); ++i) {
        add(row + static_cast<int64_t>(i), params, state);
        RowDraw& d = draws_.back();
        d.probe = drafts[i];
        d.uniform = residual_uniform;
        d.logprobs = -1;
        state.record_output(drafts[i]);
        walked.push_back(drafts[i]);
    }
    add(row + static_cast<int64_t>(drafts.size()), params, state);
    state.unrecord_outputs(walked);
}

SampledLogprobs to_sampled_logprobs(const DrawLogprobs& logprobs) {
    SampledLogprobs out;
    out.logprob = logprobs.logprob;
    out.rank = logprobs.rank;
    for (int32_t i = 0; i < logprobs.count; ++i) out.top.push_back({logprobs.top_tokens[i], logprobs.top_logprobs[i]});
    return out;
}

}  // namespace dsv4
