// Sampling where the logits are (ModelOps::sample_rows through runtime/device_sampling.h) against the host sampler
// (src/sample/sampler.h), on the CPU backend whose sample_rows is backend/sample_rows.h's definition: the same tokens
// for the same seeds over every shaping parameter, logits processor and structured-output mask, step after step, with
// the same raw logprobs; the drawn frequencies are the host distribution's; rows without a choice and bad arguments
// are refused.
#include "runtime/device_sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/sample_rows_math.h"
#include "backend/tensor_reads.h"
#include "core/error.h"
#include "logits_on_backend.h"
#include "sample/sampler.h"
#include "sample/sampling_params.h"

namespace dsv4 {
namespace {

constexpr int64_t kVocab = 700;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Logits of a few shapes: peaked, flat, with ties and with banned (-inf) tokens.
std::vector<float> random_row(std::mt19937_64& rng, int shape) {
    std::normal_distribution<double> normal(0.0, shape == 0 ? 4.0 : 1.0);
    std::uniform_int_distribution<int> coarse(-6, 6);
    std::vector<float> x(kVocab);
    for (float& v : x) v = shape == 2 ? 0.5f * static_cast<float>(coarse(rng)) : static_cast<float>(normal(rng));
    if (shape == 3) {
        for (size_t i = 0; i < x.size(); i += 3) x[i] = kNegInf;
    }
    return x;
}

// Allows, at even positions, the tokens not congruent to 1 mod 3; everything at odd positions; token 0 (the end)
// from position 4 on.
class ModuloState final : public TokenConstraintState {
  public:
    TokenMaskSummary fill_allowed(std::span<uint64_t> allowed) override {
        std::fill(allowed.begin(), allowed.end(), 0);
        TokenMaskSummary summary;
        for (int32_t t = 0; t < kVocab; ++t) {
            if (!allows(t)) continue;
            allowed[static_cast<size_t>(t) / 64] |= uint64_t{1} << (t % 64);
            (t == 0 ? summary.end_allowed : summary.any_token) = true;
        }
        return summary;
    }
    bool accept(int32_t token) override {
        if (!allows(token)) return false;
        ++position_;
        return true;
    }
    void rollback(int count) override { position_ -= count; }

  private:
    bool allows(int32_t t) const {
        if (t == 0) return position_ >= 4;
        return position_ % 2 == 1 || t % 3 != 1;
    }
    int position_ = 0;
};
class ModuloConstraint final : public TokenConstraint {
  public:
    std::unique_ptr<TokenConstraintState> start() const override { return std::make_unique<ModuloState>(); }
    int64_t vocab_size() const override { return kVocab; }
};

SamplingParams random_params(std::mt19937_64& rng, uint64_t seed) {
    auto pick = [&](auto... values) { return pick_one(rng, values...); };
    SamplingParams p;
    p.seed = seed;
    p.temperature = pick(0.0, 0.3, 0.7, 1.0, 1.6);
    p.top_k = pick(0, -1, 1, 5, 50, static_cast<int>(kVocab));
    p.top_p = pick(1.0, 0.95, 0.5, 0.1);
    p.min_p = pick(0.0, 0.0, 0.05, 0.3);
    p.min_tokens = pick(0, 0, 3);
    p.repetition_penalty = pick(1.0, 1.0, 1.3, 0.8);
    p.frequency_penalty = pick(0.0, 0.0, 0.5, -0.4);
    p.presence_penalty = pick(0.0, 0.0, 0.7);
    if (pick(0, 1) == 1) p.logit_bias = {{5, 3.5f}, {9, -100.0f}, {11, 2.5f}};
    if (pick(0, 0, 1) == 1) p.constraint = std::make_shared<ModuloConstraint>();
    if (pick(0, 0, 1) == 1) p.logprobs = pick(0, 1, 5, 20);
    return p;
}

using Fixture = LogitsOnBackend<kVocab>;

// The masses' exp (sample_exp: fused multiply-adds only, so the CUDA kernel computes the same bits): within one ulp
// of the host's exp over the range a mass can take, exact at 0, zero below the subnormals, never increasing.
TEST(DeviceSampling, MassExpIsWithinAnUlpOfExp) {
    EXPECT_EQ(sample_exp(0.0), 1.0);
    EXPECT_EQ(sample_exp(-0.0), 1.0);
    EXPECT_EQ(sample_exp(-746.0), 0.0);
    EXPECT_EQ(sample_exp(-std::numeric_limits<double>::infinity()), 0.0);
    EXPECT_GT(sample_exp(-744.0), 0.0);
    // candidate_mass skips the exp below -33, where every mass rounds to 0 anyway.
    EXPECT_EQ(std::rint(sample_exp(-33.0) * 70368744177664.0), 0.0);
    EXPECT_GT(std::rint(sample_exp(-32.5) * 70368744177664.0), 0.0);
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> wide(-40.0, 0.0), narrow(-1.0, 0.0);
    double previous_a = 0.0, previous = 1.0;
    for (int i = 0; i < 200000; ++i) {
        const double a = i % 2 == 0 ? wide(rng) : narrow(rng);
        const double want = std::exp(a), got = sample_exp(a);
        ASSERT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), -52)) << "a = " << a;
        if (a < previous_a) {
            EXPECT_LE(got, previous) << "a = " << a;
        }
        previous_a = a, previous = got;
    }
}

TEST(DeviceSampling, SameTokensAsTheHostSamplerStepAfterStep) {
    Fixture f;
    std::mt19937_64 rng(2026);
    const std::vector<int64_t> prompt = {5, 17, 17, 230, 699};
    const std::vector<int64_t> eos = {0, 2};
    int draws = 0, greedy = 0, with_logprobs = 0;
    for (int c = 0; c < 160; ++c) {
        const SamplingParams params = random_params(rng, 1000 + c);
        SamplerState host(params, prompt, eos, kVocab), device(params, prompt, eos, kVocab);
        for (int step = 0; step < 6; ++step) {
            const std::vector<float> row = random_row(rng, (c + step) % 4);
            DeviceDraws d(kVocab);
            ASSERT_TRUE(DeviceDraws::supports(params, device));
            d.add(0, params, device);
            const SampledRows got = read_sampled_rows(*f.backend, f.upload(row), d.args());
            const SampleResult want = sample(row, params, host);
            ASSERT_EQ(got.ids.size(), 1u);
            ASSERT_EQ(got.ids[0], want.token)
                << "case " << c << " step " << step << " temperature " << params.temperature << " top_k "
                << params.top_k << " top_p " << params.top_p << " min_p " << params.min_p;
            ASSERT_EQ(got.logprobs.empty(), !want.logprobs.has_value());
            if (want.logprobs) {  // the same function on both sides: the same bits
                const SampledLogprobs reported = to_sampled_logprobs(got.logprobs[0]);
                EXPECT_EQ(reported.logprob, want.logprobs->logprob);
                EXPECT_EQ(reported.rank, want.logprobs->rank);
                ASSERT_EQ(reported.top.size(), want.logprobs->top.size());
                for (size_t i = 0; i < reported.top.size(); ++i) {
                    EXPECT_EQ(reported.top[i].token, want.logprobs->top[i].token);
                    EXPECT_EQ(reported.top[i].logprob, want.logprobs->top[i].logprob);
                }
                ++with_logprobs;
            }
            record_chosen(got.ids[0], device);
            ++draws;
            greedy += is_greedy(params) ? 1 : 0;
        }
    }
    EXPECT_GT(greedy, 0);
    EXPECT_GT(draws - greedy, 500);
    EXPECT_GT(with_logprobs, 100);
}

// Several draws on one step: rows in any order, one row drawn by several requests (n > 1), each with its own seed.
TEST(DeviceSampling, DrawsOfOneStepAreIndependent) {
    Fixture f;
    std::mt19937_64 rng(7);
    std::vector<float> rows;
    for (int r = 0; r < 3; ++r) {
        const std::vector<float> row = random_row(rng, 1);
        rows.insert(rows.end(), row.begin(), row.end());
    }
    const Tensor logits = f.upload(rows);
    const std::vector<int64_t> order = {2, 0, 0, 1, 2};
    std::vector<SamplingParams> params;
    std::vector<SamplerState> states;
    for (size_t i = 0; i < order.size(); ++i) {
        params.push_back(random_params(rng, 50 + i));
        params.back().constraint = nullptr;
    }
    for (const SamplingParams& p : params)
        states.emplace_back(p, std::vector<int64_t>{3}, std::vector<int64_t>{0}, kVocab);
    DeviceDraws d(kVocab);
    for (size_t i = 0; i < order.size(); ++i) d.add(order[i], params[i], states[i]);
    const std::vector<int32_t> ids = read_sampled_rows(*f.backend, logits, d.args()).ids;
    ASSERT_EQ(ids.size(), order.size());
    for (size_t i = 0; i < order.size(); ++i) {
        const auto row = std::span<const float>(rows).subspan(static_cast<size_t>(order[i] * kVocab), kVocab);
        SamplerState host(params[i], std::vector<int64_t>{3}, std::vector<int64_t>{0}, kVocab);
        EXPECT_EQ(ids[i], sample(row, params[i], host).token) << "draw " << i;
    }
}

// Over a fine grid of uniforms, each token is drawn as often as the host distribution gives it.
TEST(DeviceSampling, DrawnFrequenciesFollowTheHostDistribution) {
    std::mt19937_64 rng(11);
    std::vector<float> row = random_row(rng, 1);
    for (const double top_p : {1.0, 0.8}) {
        SamplingParams params;
        params.temperature = 0.9;
        params.top_p = top_p;
        params.top_k = 300;
        params.min_p = 0.01;
        const TokenDistribution want = sampling_distribution(row, params);
        RowDraw draw;
        draw.temperature = params.temperature;
        draw.top_p = top_p;
        draw.top_k = params.top_k;
        draw.min_p = params.min_p;
        constexpr int kGrid = 40000;
        std::vector<int> hits(kVocab, 0);
        for (int j = 0; j < kGrid; ++j) {
            draw.uniform = (j + 0.5) / kGrid;
            const int32_t id = sample_row_reference(row, draw, {}, {});
            ASSERT_GE(id, 0);
            ++hits[static_cast<size_t>(id)];
        }
        int on_candidates = 0;  // every draw lands on a token of the host distribution
        for (int64_t token : want.tokens) on_candidates += hits[static_cast<size_t>(token)];
        EXPECT_EQ(on_candidates, kGrid) << "top_p " << top_p;
        for (size_t i = 0; i < want.tokens.size(); ++i) {
            EXPECT_NEAR(hits[static_cast<size_t>(want.tokens[i])] / static_cast<double>(kGrid), want.probs[i],
                        2.0 / kGrid)
                << "token " << want.tokens[i];
        }
    }
}

TEST(DeviceSampling, RowsWithoutAChoiceAreLeftToTheHostSampler) {
    std::mt19937_64 rng(3);
    RowDraw draw;
    for (const bool greedy : {true, false}) {
        draw.greedy = greedy;
        std::vector<float> row = random_row(rng, 1);
        row[17] = std::numeric_limits<float>::quiet_NaN();
        EXPECT_EQ(sample_row_reference(row, draw, {}, {}), kNoSample);
        row[17] = std::numeric_limits<float>::infinity();
        EXPECT_EQ(sample_row_reference(row, draw, {}, {}), kNoSample);
        std::vector<float> banned(kVocab, kNegInf);
        EXPECT_EQ(sample_row_reference(banned, draw, {}, {}), kNoSample);
        // Every token the mask allows is banned by an edit.
        std::vector<uint64_t> mask(static_cast<size_t>(sample_mask_words(kVocab)), 0);
        mask[0] = 1u << 4;
        LogitEdit ban;
        ban.token = 4;
        ban.masked = true;
        draw.edit_count = 1;
        EXPECT_EQ(sample_row_reference(random_row(rng, 1), draw, std::span(&ban, 1), mask), kNoSample);
        draw.edit_count = 0;
        EXPECT_EQ(sample_row_reference(random_row(rng, 1), draw, {}, mask), 4);
    }
}

TEST(DeviceSampling, BadArgumentsAreRefused) {
    Fixture f;
    std::mt19937_64 rng(5);
    const Tensor logits = f.upload(random_row(rng, 1));
    Tensor out = f.backend->alloc(DType::kI32, {1});
    std::vector<LogitEdit> edits(2);
    edits[0].token = 3;
    edits[1].token = 3;
    auto refused = [&](RowDraw d, std::span<const LogitEdit> e = {}, std::span<const uint64_t> m = {}) {
        const RowDraw draws[] = {d};
        EXPECT_THROW(f.backend->sample_rows(logits, {draws, e, m}, out), Error);
    };
    RowDraw d;
    d.row = 1;  // of one
    refused(d);
    d = RowDraw{};
    d.uniform = 1.0;
    refused(d);
    d = RowDraw{};
    d.temperature = 0.0;
    refused(d);
    d = RowDraw{};
    d.top_p = 0.0;
    refused(d);
    d = RowDraw{};
    d.edit_count = 2;  // one token twice
    refused(d, edits);
    edits[1].token = static_cast<int32_t>(kVocab);
    refused(d, edits);
    d = RowDraw{};
    d.mask = 0;  // no mask words given
    refused(d);
    d = RowDraw{};
    d.logprobs = kMaxDrawLogprobs + 1;
    refused(d);
    d.logprobs = 3;  // asked for, but no output for them
    refused(d);
    const RowDraw two[] = {RowDraw{}, RowDraw{}};
    EXPECT_THROW(f.backend->sample_rows(logits, {two, {}, {}}, out), Error);  // out holds one id
}

TEST(DeviceSampling, RequestsTheDeviceCannotSampleStayOnTheHost) {
    SamplingParams plain;
    const std::vector<int64_t> prompt = {1, 2};
    EXPECT_TRUE(DeviceDraws::supports(plain, SamplerState(plain, prompt, {}, kVocab)));
    SamplingParams logprobs = plain;
    logprobs.logprobs = 2;
    EXPECT_TRUE(DeviceDraws::supports(logprobs, SamplerState(logprobs, prompt, {}, kVocab)));
    SamplingParams outside = plain;
    outside.logit_bias = {{kVocab, 1.0f}};
    EXPECT_FALSE(DeviceDraws::supports(outside, SamplerState(outside, prompt, {}, kVocab)));
    SamplingParams twice = plain;
    twice.logit_bias = {{4, 1.0f}, {4, 2.0f}};
    EXPECT_FALSE(DeviceDraws::supports(twice, SamplerState(twice, prompt, {}, kVocab)));
    SamplingParams repetition = plain;
    repetition.repetition_penalty = 1.2;
    SamplerState untracked(plain, prompt, {}, kVocab);  // built without the repetition penalty: no prompt history
    EXPECT_FALSE(DeviceDraws::supports(repetition, untracked));
}

}  // namespace
}  // namespace dsv4
