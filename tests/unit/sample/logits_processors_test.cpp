// The logits processors change exactly the logits they should, by exactly the specified amounts.
#include "sample/logits_processors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "sample/sampler.h"

namespace dsv4 {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> processed(std::vector<float> logits, const SamplingParams& params, SamplerState& state) {
    apply_logits_processors(logits, params, state);
    return logits;
}

TEST(LogitsProcessors, RepetitionPenaltyDividesPositiveAndMultipliesNegativeSeenLogits) {
    SamplingParams params;
    params.repetition_penalty = 2.0;
    std::vector<int64_t> prompt = {0, 1, 1};
    SamplerState state(params, prompt, {}, 6);
    state.record_output(2);
    state.record_output(4);
    state.record_output(4);
    std::vector<float> logits = {3.0f, -3.0f, 0.5f, 1.0f, -0.25f, 0.0f};
    auto out = processed(logits, params, state);
    std::vector<float> expected = {1.5f, -6.0f, 0.25f, 1.0f, -0.5f, 0.0f};  // 3 and 5 unseen: unchanged
    EXPECT_EQ(out, expected);
}

TEST(LogitsProcessors, RepetitionPenaltyBelowOneRewardsSeenTokens) {
    SamplingParams params;
    params.repetition_penalty = 0.5;
    std::vector<int64_t> prompt = {0, 1};
    SamplerState state(params, prompt, {}, 3);
    auto out = processed({2.0f, -2.0f, 2.0f}, params, state);
    EXPECT_EQ(out, (std::vector<float>{4.0f, -1.0f, 2.0f}));
}

TEST(LogitsProcessors, FrequencyAndPresenceUseOutputCountsOnly) {
    SamplingParams params;
    params.frequency_penalty = 0.5;
    params.presence_penalty = 1.25;
    std::vector<int64_t> prompt = {3, 3, 3};  // the prompt does not count for these two
    SamplerState state(params, prompt, {}, 5);
    for (int64_t token : {1, 1, 1, 2}) state.record_output(token);
    auto out = processed({1.0f, 1.0f, 1.0f, 1.0f, 1.0f}, params, state);
    // token 1: 1 - 0.5 * 3 - 1.25 = -1.75; token 2: 1 - 0.5 - 1.25 = -0.75
    EXPECT_EQ(out, (std::vector<float>{1.0f, -1.75f, -0.75f, 1.0f, 1.0f}));
}

TEST(LogitsProcessors, NegativePenaltiesEncourageRepeats) {
    SamplingParams params;
    params.frequency_penalty = -2.0;
    params.presence_penalty = -1.0;
    SamplerState state(params, {}, {}, 2);
    state.record_output(0);
    state.record_output(0);
    EXPECT_EQ(processed({0.0f, 0.0f}, params, state), (std::vector<float>{5.0f, 0.0f}));
}

TEST(LogitsProcessors, AllPenaltiesComposeInVllmOrder) {
    SamplingParams params;
    params.repetition_penalty = 1.5;
    params.frequency_penalty = 0.25;
    params.presence_penalty = 0.5;
    params.logit_bias = {{0, 1.5f}};
    SamplerState state(params, {}, {}, 2);
    state.record_output(0);
    state.record_output(0);
    // bias: 1.5 + 1.5 = 3.0; repetition: 3.0 / 1.5 = 2.0; frequency: 2.0 - 0.5 = 1.5; presence: 1.5 - 0.5 = 1.0
    EXPECT_EQ(processed({1.5f, 1.0f}, params, state), (std::vector<float>{1.0f, 1.0f}));
}

TEST(LogitsProcessors, LogitBiasAddsAndDuplicatesAccumulate) {
    SamplingParams params;
    params.logit_bias = {{2, 1.0f}, {0, -0.5f}, {2, 0.25f}};
    SamplerState state(params, {}, {}, 4);
    EXPECT_EQ(processed({1.0f, 1.0f, 1.0f, 1.0f}, params, state), (std::vector<float>{0.5f, 1.0f, 2.25f, 1.0f}));
}

TEST(LogitsProcessors, HugeEditsSaturateInsteadOfProducingInfinity) {
    SamplingParams params;
    params.repetition_penalty = 1e-38;
    params.logit_bias = {{1, -3e38f}};
    std::vector<int64_t> prompt = {0};
    SamplerState state(params, prompt, {}, 3);
    auto out = processed({1000.0f, -3e38f, 0.0f}, params, state);
    EXPECT_EQ(out[0], std::numeric_limits<float>::max());
    EXPECT_EQ(out[1], -kInf);  // pushed below -FLT_MAX: a ban
    EXPECT_EQ(out[2], 0.0f);
}

TEST(LogitsProcessors, MinTokensMasksEosAndStopTokensUntilReached) {
    SamplingParams params;
    params.min_tokens = 2;
    params.stop_token_ids = {3, 1};
    std::vector<int64_t> eos = {1, 4};
    SamplerState state(params, {}, eos, 6);
    EXPECT_EQ(state.min_tokens_masked_ids(), (std::vector<int64_t>{1, 3, 4}));
    std::vector<float> logits = {0.0f, 9.0f, 0.0f, 9.0f, 9.0f, 0.0f};
    EXPECT_EQ(processed(logits, params, state), (std::vector<float>{0.0f, -kInf, 0.0f, -kInf, -kInf, 0.0f}));
    state.record_output(0);
    EXPECT_EQ(processed(logits, params, state)[4], -kInf);
    state.record_output(0);
    EXPECT_EQ(processed(logits, params, state), logits);  // two tokens exist: nothing masked
}

TEST(LogitsProcessors, MinTokensKeepsGreedyOffEosEvenWithIgnoreEos) {
    SamplingParams params;
    params.temperature = 0.0;
    params.min_tokens = 3;
    params.ignore_eos = true;  // vLLM masks EOS under min_tokens either way
    std::vector<int64_t> eos = {1};
    SamplerState state(params, {}, eos, 3);
    std::vector<float> logits = {0.0f, 10.0f, 5.0f};
    std::vector<int64_t> tokens;
    for (int i = 0; i < 5; ++i) tokens.push_back(sample(logits, params, state).token);
    EXPECT_EQ(tokens, (std::vector<int64_t>{2, 2, 2, 1, 1}));
}

TEST(LogitsProcessors, DefaultParamsChangeNothing) {
    SamplingParams params;
    SamplerState state(params, {}, {}, 3);
    state.record_output(1);
    std::vector<float> logits = {0.1f, -0.2f, 0.3f};
    EXPECT_EQ(processed(logits, params, state), logits);
}

TEST(LogitsProcessors, RejectsMismatchedInputs) {
    SamplingParams params;
    SamplerState state(params, {}, {}, 3);
    std::vector<float> logits = {0.0f, 0.0f};
    EXPECT_THROW(apply_logits_processors(logits, params, state), Error);
    std::vector<float> row = {0.0f, 0.0f, 0.0f};
    params.repetition_penalty = 1.2;  // the state was built without the prompt
    EXPECT_THROW(apply_logits_processors(row, params, state), Error);
    std::vector<int64_t> bad_prompt = {0, 3};
    EXPECT_THROW(SamplerState(params, bad_prompt, {}, 3), Error);
    EXPECT_THROW(state.record_output(-1), Error);
}

}  // namespace
}  // namespace dsv4
