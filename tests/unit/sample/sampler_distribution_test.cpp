// Statistical tests: tokens drawn by sample() follow the exact distribution of each sampling mode.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "sample/sampler.h"
#include "sample/sampler_state.h"
#include "sampler_reference.h"

namespace dsv4 {
namespace {

using testing::expect_matches_distribution;
using testing::logits_from_probs;
using testing::reference_probs;

constexpr int64_t kDraws = 20000;

std::vector<int64_t> draw_counts(const std::vector<float>& logits, const SamplingParams& params, uint64_t seed) {
    SamplingParams seeded = params;
    seeded.seed = seed;
    SamplerState state(seeded, {}, {}, static_cast<int64_t>(logits.size()));
    std::vector<int64_t> counts(logits.size(), 0);
    for (int64_t i = 0; i < kDraws; ++i) ++counts[static_cast<size_t>(sample(logits, seeded, state).token)];
    return counts;
}

std::vector<double> normalized(std::vector<double> weights) {
    double total = 0.0;
    for (double w : weights) total += w;
    for (double& w : weights) w /= total;
    return weights;
}

std::vector<float> random_logits(size_t vocab, uint64_t seed, double scale) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, scale);
    std::vector<float> logits(vocab);
    for (float& x : logits) x = static_cast<float>(normal(rng));
    return logits;
}

TEST(SamplerDistribution, PlainSoftmaxAtTemperatureOne) {
    std::vector<double> probs = {0.05, 0.1, 0.15, 0.2, 0.25, 0.125, 0.075, 0.05};
    auto counts = draw_counts(logits_from_probs(probs), SamplingParams{}, 11);
    expect_matches_distribution(counts, probs, kDraws);
}

TEST(SamplerDistribution, TemperatureRaisesProbabilitiesToOneOverT) {
    std::vector<double> probs = {0.5, 0.25, 0.125, 0.0625, 0.0625};
    for (double temperature : {0.5, 2.0}) {
        SamplingParams params;
        params.temperature = temperature;
        std::vector<double> expected;
        for (double p : probs) expected.push_back(std::pow(p, 1.0 / temperature));
        auto counts = draw_counts(logits_from_probs(probs), params, 12);
        expect_matches_distribution(counts, normalized(expected), kDraws);
    }
}

TEST(SamplerDistribution, TopKKeepsTheKMostLikely) {
    std::vector<double> probs = {0.1, 0.4, 0.05, 0.3, 0.15};
    SamplingParams params;
    params.top_k = 3;
    auto counts = draw_counts(logits_from_probs(probs), params, 13);
    expect_matches_distribution(counts, normalized({0.0, 0.4, 0.0, 0.3, 0.15}), kDraws);
}

TEST(SamplerDistribution, TopKKeepsTiesWithTheKthToken) {
    std::vector<float> logits = {3.0f, 1.0f, 2.0f, 2.0f, 0.0f, 2.0f};
    SamplingParams params;
    params.top_k = 2;  // the 2nd largest logit is 2.0, held by three tokens: all stay
    double e1 = std::exp(1.0);
    auto counts = draw_counts(logits, params, 14);
    expect_matches_distribution(counts, normalized({e1, 0.0, 1.0, 1.0, 0.0, 1.0}), kDraws);
}

TEST(SamplerDistribution, TopPKeepsTheSmallestPrefixReachingP) {
    std::vector<double> probs = {0.1, 0.4, 0.05, 0.3, 0.15};
    SamplingParams params;
    params.top_p = 0.75;  // 0.4 + 0.3 = 0.7 < 0.75, so 0.15 joins; 0.1 and 0.05 go
    auto counts = draw_counts(logits_from_probs(probs), params, 15);
    expect_matches_distribution(counts, normalized({0.0, 0.4, 0.0, 0.3, 0.15}), kDraws);
}

TEST(SamplerDistribution, TopPKeepsTokensTiedAtTheBoundary) {
    std::vector<float> logits = {std::log(2.0f), 0.0f, 0.0f, 0.0f, -1.0f};  // weights 2, 1, 1, 1, e^-1
    SamplingParams params;
    params.top_p = 0.5;  // the first "1" reaches the mass; its two ties stay as well, e^-1 goes
    auto counts = draw_counts(logits, params, 16);
    expect_matches_distribution(counts, normalized({2.0, 1.0, 1.0, 1.0, 0.0}), kDraws);
}

TEST(SamplerDistribution, MinPKeepsTokensAboveAFractionOfTheMax) {
    std::vector<double> probs = {0.4, 0.05, 0.2, 0.15, 0.1, 0.1};
    SamplingParams params;
    params.min_p = 0.3;  // threshold 0.12
    auto counts = draw_counts(logits_from_probs(probs), params, 17);
    expect_matches_distribution(counts, normalized({0.4, 0.0, 0.2, 0.15, 0.0, 0.0}), kDraws);
}

TEST(SamplerDistribution, MinPIsAppliedAfterTemperature) {
    std::vector<double> probs = {0.64, 0.16, 0.04, 0.16};
    SamplingParams params;
    params.temperature = 2.0;  // weights become 0.8, 0.4, 0.2, 0.4
    params.min_p = 0.4;        // threshold 0.32 on the tempered distribution keeps 0.8, 0.4, 0.4
    auto counts = draw_counts(logits_from_probs(probs), params, 18);
    expect_matches_distribution(counts, normalized({0.8, 0.4, 0.0, 0.4}), kDraws);
}

TEST(SamplerDistribution, MinPThenTopKThenTopP) {
    // Weights after min_p 0.15 (threshold 0.06 of the max 0.4): 0.4, 0.2, 0.15, 0.1, 0.07 survive; top_k 4 drops
    // 0.07; top_p 0.8 of the remaining 0.85 = 0.68 needs 0.4 + 0.2 + 0.15 (0.6 before 0.15 is < 0.68).
    std::vector<double> probs = {0.02, 0.4, 0.07, 0.2, 0.03, 0.15, 0.1, 0.03};
    SamplingParams params;
    params.min_p = 0.15;
    params.top_k = 4;
    params.top_p = 0.8;
    auto counts = draw_counts(logits_from_probs(probs), params, 19);
    expect_matches_distribution(counts, normalized({0, 0.4, 0, 0.2, 0, 0.15, 0, 0}), kDraws);
}

TEST(SamplerDistribution, RandomCombinationsMatchTheReference) {
    std::mt19937_64 rng(2024);
    for (int trial = 0; trial < 6; ++trial) {
        size_t vocab = 8 + rng() % 43;  // 8..50
        SamplingParams params;
        params.temperature = 0.3 + double(rng() % 1000) / 500.0;
        params.top_k = static_cast<int>(rng() % (vocab + 1));
        params.top_p = 0.2 + double(rng() % 800) / 1000.0;
        params.min_p = double(rng() % 300) / 1000.0;
        auto logits = random_logits(vocab, rng(), 2.0);
        auto exact = reference_probs(logits, params);
        SCOPED_TRACE(::testing::Message()
                     << "trial " << trial << " V=" << vocab << " T=" << params.temperature << " top_k=" << params.top_k
                     << " top_p=" << params.top_p << " min_p=" << params.min_p);
        expect_matches_distribution(draw_counts(logits, params, 100 + trial), exact, kDraws);
    }
}

TEST(SamplerDistribution, LogitBiasShiftsTheDistribution) {
    std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
    SamplingParams params;
    params.logit_bias = {{1, std::log(3.0f)}, {3, -100.0f}};
    double e100 = std::exp(-100.0);
    auto counts = draw_counts(logits, params, 20);
    expect_matches_distribution(counts, normalized({1.0, 3.0, 1.0, e100}), kDraws);
}

}  // namespace
}  // namespace dsv4
