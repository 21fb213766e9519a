// Test-only reference for the sampling distribution: full sorts in double, written for clarity, not speed, and
// independent of sampler.cpp's single-pass filters and chunked top-p.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "dsv4/sampling_params.h"
#include "sample/sampler.h"

namespace dsv4::testing {

// Probability of every token (zeros included) after temperature -> min_p -> top_k -> top_p on processed logits.
inline std::vector<double> reference_probs(std::span<const float> logits, const SamplingParams& params) {
    const size_t vocab = logits.size();
    if (vocab == 0) return {};
    double max_logit = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(vocab, 0.0);
    for (size_t i = 0; i < vocab; ++i) p[i] = std::exp((double(logits[i]) - max_logit) / params.temperature);
    double p_max = *std::max_element(p.begin(), p.end());
    for (double& x : p) {
        if (x / p_max < params.min_p) x = 0.0;
    }
    if (params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab) {
        std::vector<float> sorted(logits.begin(), logits.end());
        std::sort(sorted.begin(), sorted.end(), std::greater<float>());
        float kth = sorted[static_cast<size_t>(params.top_k) - 1];
        for (size_t i = 0; i < vocab; ++i) {
            if (logits[i] < kth) p[i] = 0.0;
        }
    }
    if (params.top_p < 1.0) {
        std::vector<double> sorted;
        for (double x : p) {
            if (x > 0.0) sorted.push_back(x);
        }
        std::sort(sorted.begin(), sorted.end(), std::greater<double>());
        double total = std::accumulate(p.begin(), p.end(), 0.0);
        double mass = 0.0;
        double cutoff = 0.0;
        for (double x : sorted) {
            if (mass >= params.top_p * total) break;
            cutoff = x;
            mass += x;
        }
        for (double& x : p) {
            if (x < cutoff) x = 0.0;
        }
    }
    double total = std::accumulate(p.begin(), p.end(), 0.0);
    for (double& x : p) x /= total;
    return p;
}

// Dense view of a sparse TokenDistribution.
inline std::vector<double> dense_probs(const TokenDistribution& dist, size_t vocab) {
    std::vector<double> p(vocab, 0.0);
    for (size_t i = 0; i < dist.tokens.size(); ++i) p[static_cast<size_t>(dist.tokens[i])] = dist.probs[i];
    return p;
}

// Logits whose softmax is exactly proportional to probs (up to float rounding of the logs).
inline std::vector<float> logits_from_probs(const std::vector<double>& probs) {
    std::vector<float> logits;
    for (double p : probs) logits.push_back(p > 0.0 ? static_cast<float>(std::log(p)) : -INFINITY);
    return logits;
}

// Checks empirical counts from `draws` samples against exact probabilities: every token within 5 standard errors
// (plus a tiny slack), zero-probability tokens never drawn, and a chi-square statistic below its 1e-4 upper
// quantile (Wilson-Hilferty). Each test uses fixed seeds, so the outcome is deterministic.
inline void expect_matches_distribution(const std::vector<int64_t>& counts, const std::vector<double>& exact,
                                        int64_t draws) {
    ASSERT_EQ(counts.size(), exact.size());
    double chi_square = 0.0;
    int categories = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
        double observed = double(counts[i]) / double(draws);
        if (exact[i] == 0.0) {
            EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0 but was drawn";
            continue;
        }
        double sigma = std::sqrt(exact[i] * (1.0 - exact[i]) / double(draws));
        EXPECT_LE(std::abs(observed - exact[i]), 5.0 * sigma + 1e-9)
            << "token " << i << ": empirical " << observed << " vs exact " << exact[i];
        double expected = exact[i] * double(draws);
        chi_square += (double(counts[i]) - expected) * (double(counts[i]) - expected) / expected;
        ++categories;
    }
    if (categories >= 2) {
        double df = categories - 1;
        double z = 3.719;  // upper 1e-4 quantile of the standard normal
        double critical = df * std::pow(1.0 - 2.0 / (9.0 * df) + z * std::sqrt(2.0 / (9.0 * df)), 3.0);
        EXPECT_LT(chi_square, critical) << "chi-square over " << categories << " categories";
    }
}

}  // namespace dsv4::testing
