// Deterministic behaviour of sample(): greedy, seeds and their independence from other requests, the exact
// random-number mechanism, raw logprobs, bad input, and the large-vocabulary fast paths against the reference.
#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "core/error.h"
#include "sample/sampler_state.h"
#include "sampler_reference.h"

namespace dsv4 {
namespace {

std::vector<float> random_logits(size_t vocab, uint64_t seed, double scale) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, scale);
    std::vector<float> logits(vocab);
    for (float& x : logits) x = static_cast<float>(normal(rng));
    return logits;
}

SamplingParams seeded(uint64_t seed) {
    SamplingParams params;
    params.seed = seed;
    return params;
}

std::vector<int64_t> generate(const std::vector<float>& logits, const SamplingParams& params, int steps,
                              int completion_index = 0) {
    SamplerState state(params, {}, {}, static_cast<int64_t>(logits.size()), completion_index);
    std::vector<int64_t> tokens;
    for (int i = 0; i < steps; ++i) tokens.push_back(sample(logits, params, state).token);
    return tokens;
}

TEST(Sampler, GreedyPicksTheArgmaxAndTheLowestIdOnTies) {
    SamplingParams params;
    params.temperature = 0.0;
    params.top_k = 1;
    std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
    SamplerState state(params, {}, {}, 5);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(sample(logits, params, state).token, 1);
    EXPECT_EQ(state.num_output_tokens(), 5);
}

// Which requests may have their argmax chosen where the logits are: greedy with nothing that edits or reports the row.
TEST(Sampler, RawArgmaxOnlyWhenNothingEditsOrReportsTheRow) {
    SamplingParams plain;
    plain.temperature = 0.0;
    const std::vector<int64_t> prompt = {1};
    EXPECT_TRUE(samples_raw_argmax(plain, SamplerState(plain, prompt, {}, 8)));
    auto with = [&](auto edit) {
        SamplingParams p = plain;
        edit(p);
        return samples_raw_argmax(p, SamplerState(p, prompt, {}, 8));
    };
    EXPECT_FALSE(with([](SamplingParams& p) { p.temperature = 0.7; }));
    EXPECT_FALSE(with([](SamplingParams& p) { p.logprobs = 0; }));
    EXPECT_FALSE(with([](SamplingParams& p) { p.logit_bias = {{3, 1.0f}}; }));
    EXPECT_FALSE(with([](SamplingParams& p) { p.repetition_penalty = 1.1; }));
    EXPECT_FALSE(with([](SamplingParams& p) { p.frequency_penalty = 0.5; }));
    EXPECT_FALSE(with([](SamplingParams& p) { p.presence_penalty = 0.5; }));
    SamplingParams min_tokens = plain;
    min_tokens.min_tokens = 1;
    SamplerState state(min_tokens, prompt, {}, 8);
    EXPECT_FALSE(samples_raw_argmax(min_tokens, state));  // the stop tokens are masked until one output
    EXPECT_EQ(record_chosen(5, state).token, 5);
    EXPECT_TRUE(samples_raw_argmax(min_tokens, state));
    EXPECT_EQ(state.num_output_tokens(), 1);
    EXPECT_THROW(record_chosen(8, state), Error);
    EXPECT_THROW(record_chosen(-1, state), Error);
}

TEST(Sampler, TinyTemperatureIsGreedyAndIgnoresFilters) {
    SamplingParams params;
    params.temperature = 1e-6;
    params.top_p = 0.01;
    params.min_p = 1.0;
    std::vector<float> logits = {0.0f, 0.1f, 0.2f, 5.0f};
    SamplerState state(params, {}, {}, 4);
    EXPECT_EQ(sample(logits, params, state).token, 3);
}

TEST(Sampler, GreedyFollowsTheProcessedLogits) {
    SamplingParams params;
    params.temperature = 0.0;
    params.logit_bias = {{0, 1.5f}};
    std::vector<float> logits = {1.0f, 2.0f, 0.0f};
    SamplerState state(params, {}, {}, 3);
    EXPECT_EQ(sample(logits, params, state).token, 0);  // 1.0 + 1.5 beats 2.0
    params.presence_penalty = 2.0;                      // once token 0 is in the output it drops to 2.5 - 2.0 = 0.5
    SamplerState penalized(params, {}, {}, 3);
    EXPECT_EQ(sample(logits, params, penalized).token, 0);
    EXPECT_EQ(sample(logits, params, penalized).token, 1);
}

TEST(Sampler, DrawIsTheInverseCdfOfTheCounterBasedUniform) {
    auto logits = random_logits(40, 7, 1.5);
    SamplingParams params = seeded(1234);
    params.temperature = 0.8;
    params.top_p = 0.9;
    auto exact = testing::reference_probs(logits, params);
    SamplerState state(params, {}, {}, 40);
    for (uint64_t position = 0; position < 300; ++position) {
        double u = uniform_at(1234, position);
        double cumulative = 0.0;
        int64_t expected = -1;
        for (size_t i = 0; i < exact.size() && expected < 0; ++i) {
            cumulative += exact[i];
            if (exact[i] > 0.0 && u < cumulative) expected = static_cast<int64_t>(i);
        }
        ASSERT_GE(expected, 0);
        // A u within rounding of a CDF step could legitimately land either side; none does for this seed.
        EXPECT_EQ(sample(logits, params, state).token, expected) << "position " << position << " u " << u;
    }
}

TEST(Sampler, SameSeedSameTokensDifferentSeedsDiffer) {
    auto logits = random_logits(50, 3, 0.5);
    auto first = generate(logits, seeded(42), 200);
    EXPECT_EQ(first, generate(logits, seeded(42), 200));
    EXPECT_NE(first, generate(logits, seeded(43), 200));
    std::set<int64_t> distinct(first.begin(), first.end());
    EXPECT_GT(distinct.size(), 20u);  // a flat distribution really is being sampled
}

TEST(Sampler, SeededStreamIgnoresOtherRequestsInTheBatch) {
    auto logits_a = random_logits(30, 5, 1.0);
    auto logits_b = random_logits(30, 6, 3.0);
    SamplingParams params_a = seeded(9);
    SamplingParams params_b = seeded(9);  // even the same seed with other logits and params must not interfere
    params_b.temperature = 0.5;
    params_b.top_k = 5;
    auto alone = generate(logits_a, params_a, 100);
    SamplerState a(params_a, {}, {}, 30);
    SamplerState b(params_b, {}, {}, 30);
    SamplerState c(SamplingParams{}, {}, {}, 30);  // unseeded neighbour
    std::vector<int64_t> interleaved;
    for (int i = 0; i < 100; ++i) {
        sample(logits_b, params_b, b);
        interleaved.push_back(sample(logits_a, params_a, a).token);
        sample(logits_b, SamplingParams{}, c);
        sample(logits_b, SamplingParams{}, c);
    }
    EXPECT_EQ(alone, interleaved);
}

TEST(Sampler, CompletionIndexOffsetsTheSeed) {
    auto logits = random_logits(30, 8, 0.7);
    EXPECT_EQ(generate(logits, seeded(100), 50, 3), generate(logits, seeded(103), 50, 0));
    EXPECT_NE(generate(logits, seeded(100), 50, 0), generate(logits, seeded(100), 50, 1));
}

TEST(Sampler, UnseededRequestsGetDistinctSeeds) {
    SamplerState a(SamplingParams{}, {}, {}, 10);
    SamplerState b(SamplingParams{}, {}, {}, 10);
    EXPECT_NE(a.seed(), b.seed());
    EXPECT_NE(draw_random_seed(), draw_random_seed());
}

TEST(Sampler, UniformIsInRangeAndUnbiased) {
    double sum = 0.0;
    double lane_sum = 0.0;
    constexpr int kCount = 100000;
    for (int i = 0; i < kCount; ++i) {
        double u = uniform_at(77, static_cast<uint64_t>(i));
        double v = uniform_at(77, static_cast<uint64_t>(i), 1);
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
        ASSERT_NE(u, v);
        sum += u;
        lane_sum += v;
    }
    double tolerance = 5.0 * std::sqrt(1.0 / 12.0 / kCount);
    EXPECT_NEAR(sum / kCount, 0.5, tolerance);
    EXPECT_NEAR(lane_sum / kCount, 0.5, tolerance);
}

// log_softmax in double, for comparison.
std::vector<double> log_softmax(const std::vector<float>& logits) {
    double max_logit = -INFINITY;
    for (float x : logits) max_logit = std::max(max_logit, double(x));
    double sum = 0.0;
    for (float x : logits) sum += std::exp(double(x) - max_logit);
    std::vector<double> out;
    for (float x : logits) out.push_back(double(x) - max_logit - std::log(sum));
    return out;
}

TEST(Sampler, LogprobsAreRawLogSoftmaxWithTopN) {
    auto logits = random_logits(50, 21, 2.0);
    logits[7] = logits[8] = 10.0f;  // a tie at the top: lower id first
    auto expected = log_softmax(logits);
    SamplingParams params = seeded(5);
    params.logprobs = 5;
    params.temperature = 0.7;  // none of these change the reported (raw) logprobs
    params.top_k = 3;
    params.logit_bias = {{0, 50.0f}};
    params.frequency_penalty = 1.0;
    SamplerState state(params, {}, {}, 50);
    for (int step = 0; step < 20; ++step) {
        SampleResult result = sample(logits, params, state);
        ASSERT_TRUE(result.logprobs.has_value());
        const SampledLogprobs& lp = *result.logprobs;
        EXPECT_NEAR(lp.logprob, expected[static_cast<size_t>(result.token)], 1e-5);
        int64_t rank = 0;
        for (double x : expected) rank += x >= expected[static_cast<size_t>(result.token)] ? 1 : 0;
        EXPECT_EQ(lp.rank, rank);
        ASSERT_EQ(lp.top.size(), 5u);
        EXPECT_EQ(lp.top[0].token, 7);
        EXPECT_EQ(lp.top[1].token, 8);
        for (size_t i = 0; i < lp.top.size(); ++i) {
            EXPECT_NEAR(lp.top[i].logprob, expected[static_cast<size_t>(lp.top[i].token)], 1e-5);
            if (i > 0) {
                EXPECT_LE(lp.top[i].logprob, lp.top[i - 1].logprob);
            }
        }
        double fifth_best = lp.top[4].logprob;
        int64_t better = 0;
        for (double x : expected) better += x > fifth_best + 1e-6 ? 1 : 0;
        EXPECT_EQ(better, 4);
    }
}

TEST(Sampler, LogprobsZeroGivesOnlyTheSampledToken) {
    std::vector<float> logits = {0.0f, 1.0f, 2.0f};
    SamplingParams params = seeded(1);
    params.logprobs = 0;
    params.temperature = 0.0;
    SamplerState state(params, {}, {}, 3);
    SampleResult result = sample(logits, params, state);
    ASSERT_TRUE(result.logprobs.has_value());
    EXPECT_TRUE(result.logprobs->top.empty());
    EXPECT_NEAR(result.logprobs->logprob, log_softmax(logits)[2], 1e-6);
    EXPECT_EQ(result.logprobs->rank, 1);
    params.logprobs.reset();
    EXPECT_FALSE(sample(logits, params, state).logprobs.has_value());
}

TEST(Sampler, RejectsBadLogitRows) {
    SamplingParams params = seeded(1);
    SamplerState state(params, {}, {}, 4);
    std::vector<float> nan_row = {0.0f, std::numeric_limits<float>::quiet_NaN(), 0.0f, 0.0f};
    std::vector<float> inf_row = {0.0f, 0.0f, std::numeric_limits<float>::infinity(), 0.0f};
    std::vector<float> masked = std::vector<float>(4, -std::numeric_limits<float>::infinity());
    std::vector<float> short_row = {0.0f, 0.0f, 0.0f};
    EXPECT_THROW(sample(nan_row, params, state), Error);
    EXPECT_THROW(sample(inf_row, params, state), Error);
    EXPECT_THROW(sample(masked, params, state), Error);
    EXPECT_THROW(sample(short_row, params, state), Error);
    params.temperature = 0.0;
    EXPECT_THROW(sample(masked, params, state), Error);
    EXPECT_EQ(state.num_output_tokens(), 0);  // failed calls record nothing
}

TEST(Sampler, MaskedTokensAreNeverSampled) {
    float inf = std::numeric_limits<float>::infinity();
    std::vector<float> logits = {-inf, 0.0f, -inf, 0.0f, -inf};
    SamplingParams params = seeded(3);
    SamplerState state(params, {}, {}, 5);
    for (int i = 0; i < 500; ++i) {
        int64_t token = sample(logits, params, state).token;
        EXPECT_TRUE(token == 1 || token == 3) << token;
    }
}

TEST(Sampler, LargeVocabularyDistributionMatchesTheReference) {
    // 129280 entries: exercises the chunked top-p search across several rounds and nth_element top_k.
    auto logits = random_logits(129280, 99, 3.0);
    struct Case {
        double temperature, top_p, min_p;
        int top_k;
    };
    for (Case c : {Case{0.7, 0.9, 0.0, 0}, Case{1.0, 0.999, 0.0, 0}, Case{1.3, 0.5, 0.01, 2000},
                   Case{1.0, 1.0, 0.05, 0}, Case{0.6, 1.0, 0.0, 40}}) {
        SamplingParams params;
        params.temperature = c.temperature;
        params.top_p = c.top_p;
        params.min_p = c.min_p;
        params.top_k = c.top_k;
        auto exact = testing::reference_probs(logits, params);
        auto got = testing::dense_probs(sampling_distribution(logits, params), logits.size());
        size_t kept_exact = 0;
        size_t kept_got = 0;
        for (size_t i = 0; i < exact.size(); ++i) {
            kept_exact += exact[i] > 0.0;
            kept_got += got[i] > 0.0;
            ASSERT_NEAR(got[i], exact[i], 1e-12 + 1e-9 * exact[i]) << "token " << i;
        }
        EXPECT_EQ(kept_got, kept_exact);
        EXPECT_GT(kept_got, 1u);
    }
}

void expect_distribution_matches_reference(const std::vector<float>& logits, const SamplingParams& params) {
    auto exact = testing::reference_probs(logits, params);
    auto got = testing::dense_probs(sampling_distribution(logits, params), logits.size());
    size_t kept_exact = 0;
    size_t kept_got = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
        kept_exact += exact[i] > 0.0;
        kept_got += got[i] > 0.0;
        ASSERT_NEAR(got[i], exact[i], 1e-12 + 1e-9 * exact[i]) << "token " << i;
    }
    EXPECT_EQ(kept_got, kept_exact);
}

TEST(Sampler, TopPWithManyTiesMatchesTheReference) {
    auto logits = random_logits(129280, 31, 2.0);
    for (float& x : logits) x = std::round(x * 2.0f) / 2.0f;  // about 25 distinct values
    for (double top_p : {0.3, 0.7, 0.95}) {
        SamplingParams params;
        params.top_p = top_p;
        expect_distribution_matches_reference(logits, params);
    }
}

TEST(Sampler, TopKOnCloselySpacedLogitsMatchesTheReference) {
    auto logits = random_logits(129280, 33, 0.01);     // neighbours ~1e-6 apart: any slack in selection shows
    for (int top_k : {1, 2, 100, 1024, 1025, 5000}) {  // both the heap (<= 1024) and the nth_element path
        SamplingParams params;
        params.top_k = top_k;
        auto dist = sampling_distribution(logits, params);
        EXPECT_EQ(dist.tokens.size(), static_cast<size_t>(top_k));
        expect_distribution_matches_reference(logits, params);
    }
}

TEST(Sampler, TopPBoundaryAmongTinyTokens) {
    // One dominant token and 129279 tokens of weight ~e^-20 (about 29 octaves down the top_p buckets) holding
    // ~2.6e-4 of the mass: top_p = 0.99999 puts the boundary deep among them.
    auto logits = random_logits(129280, 32, 0.01);
    for (float& x : logits) x -= 20.0f;
    logits.back() = 0.0f;
    SamplingParams params;
    params.top_p = 0.99999;
    auto dist = sampling_distribution(logits, params);
    EXPECT_GT(dist.tokens.size(), 1000u);
    EXPECT_LT(dist.tokens.size(), 129280u);
    expect_distribution_matches_reference(logits, params);
}

TEST(Sampler, SamplingDistributionRejectsGreedyAndBadRows) {
    SamplingParams params;
    params.temperature = 0.0;
    std::vector<float> logits = {1.0f, 2.0f};
    EXPECT_THROW(sampling_distribution(logits, params), Error);
    params.temperature = 1.0;
    std::vector<float> bad = {1.0f, std::numeric_limits<float>::infinity()};
    EXPECT_THROW(sampling_distribution(bad, params), Error);
}

}  // namespace
}  // namespace dsv4
