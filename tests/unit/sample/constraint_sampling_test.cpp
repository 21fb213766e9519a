// Structured output in the sampler: with a constraint, every sampling mode picks only allowed tokens, and it picks
// exactly what the unconstrained sampler picks from the same logits with the disallowed ones set to -inf by hand
// (the reference), for the same seed; the end tokens follow the constraint (min_tokens cannot hold back an end the
// constraint requires); a disallowed token recorded from elsewhere throws; ignore_eos is refused.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "core/error.h"
#include "sample/sampler.h"
#include "sample/sampling_params.h"
#include "sample/spec_verify.h"

namespace dsv4 {
namespace {

const std::vector<int64_t> kEos = {0};

uint64_t mix(uint64_t x) {
    x = (x ^ (x >> 31)) * 0x7fb5d329728ea185ULL;
    x = (x ^ (x >> 27)) * 0x81dadef4bc2dd44dULL;
    return x ^ (x >> 33);
}

// A stand-in for a grammar: at position p token t is allowed when mix(seed, p, t) % 4 == 0, token 3 always; the end
// token 0 is allowed from position `end_from` on, and from `only_end_from` on nothing else is.
struct SubsetRule {
    uint64_t seed = 1;
    int end_from = 3;
    int only_end_from = 1 << 30;
    bool allowed(int position, int32_t token) const {
        if (token == 0) return position >= end_from;
        if (position >= only_end_from) return false;
        return token == 3 ||
               mix(seed ^ (static_cast<uint64_t>(position) << 20) ^ static_cast<uint64_t>(token)) % 4 == 0;
    }
};

class SubsetState final : public TokenConstraintState {
  public:
    SubsetState(SubsetRule rule, int64_t vocab) : rule_(rule), vocab_(vocab) {}
    TokenMaskSummary fill_allowed(std::span<uint64_t> allowed) override {
        std::fill(allowed.begin(), allowed.end(), 0);
        TokenMaskSummary summary;
        for (int32_t t = 0; t < vocab_; ++t) {
            if (!rule_.allowed(position_, t)) continue;
            allowed[static_cast<size_t>(t) / 64] |= uint64_t{1} << (t % 64);
            (t == 0 ? summary.end_allowed : summary.any_token) = true;
        }
        return summary;
    }
    bool accept(int32_t token) override {
        if (!rule_.allowed(position_, token)) return false;
        ++position_;
        return true;
    }
    void rollback(int count) override { position_ -= count; }

  private:
    SubsetRule rule_;
    int64_t vocab_;
    int position_ = 0;
};

class SubsetConstraint final : public TokenConstraint {
  public:
    SubsetConstraint(SubsetRule rule, int64_t vocab) : rule_(rule), vocab_(vocab) {}
    std::unique_ptr<TokenConstraintState> start() const override {
        return std::make_unique<SubsetState>(rule_, vocab_);
    }
    int64_t vocab_size() const override { return vocab_; }

  private:
    SubsetRule rule_;
    int64_t vocab_;
};

std::vector<SamplingParams> every_mode() {
    std::vector<SamplingParams> modes(8);
    modes[0].temperature = 0.0;
    modes[1].temperature = 0.7;
    modes[2].top_p = 0.6;
    modes[3].top_k = 5;
    modes[4].min_p = 0.2;
    modes[5].repetition_penalty = 1.3;
    modes[5].frequency_penalty = 0.5;
    modes[5].presence_penalty = 0.4;
    modes[6].logit_bias = {{7, 100.0f}, {8, 50.0f}};  // large biases cannot unmask a disallowed token
    modes[7].temperature = 1.5;
    modes[7].top_k = 40;
    modes[7].top_p = 0.9;
    for (size_t i = 0; i < modes.size(); ++i) modes[i].seed = 1000 + i;
    return modes;
}

TEST(ConstraintSampling, EveryModeMatchesTheHandMaskedReference) {
    constexpr int64_t kVocab = 300;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    const SubsetRule rule{.seed = 99, .end_from = 6};
    for (SamplingParams params : every_mode()) {
        SamplingParams reference_params = params;
        params.constraint = std::make_shared<SubsetConstraint>(rule, kVocab);
        validate_sampling_params(params, kVocab);
        for (int completion = 0; completion < 3; ++completion) {  // n > 1: seed + completion index
            SamplerState constrained(params, {}, kEos, kVocab, completion);
            SamplerState reference(reference_params, {}, kEos, kVocab, completion);
            for (int position = 0; position < 12; ++position) {
                std::vector<float> logits(kVocab);
                for (float& x : logits) x = normal(rng);
                std::vector<float> masked = logits;
                for (int32_t t = 0; t < kVocab; ++t) {
                    if (!rule.allowed(position, t))
                        masked[static_cast<size_t>(t)] = -std::numeric_limits<float>::infinity();
                }
                const int64_t token = sample(logits, params, constrained).token;
                EXPECT_TRUE(rule.allowed(position, static_cast<int32_t>(token)));
                EXPECT_EQ(token, sample(masked, reference_params, reference).token) << "position " << position;
                if (token == 0) break;
            }
        }
    }
}

TEST(ConstraintSampling, EndTokensFollowTheConstraintDespiteMinTokens) {
    constexpr int64_t kVocab = 64;
    SamplingParams params;
    params.temperature = 0.0;
    params.min_tokens = 10;
    params.max_tokens = 20;
    params.constraint =
        std::make_shared<SubsetConstraint>(SubsetRule{.seed = 5, .end_from = 2, .only_end_from = 4}, kVocab);
    SamplerState state(params, {}, kEos, kVocab);
    std::vector<float> logits(kVocab, 0.0f);
    logits[0] = 10.0f;  // the model wants to end at once
    for (int position = 0; position < 4; ++position) EXPECT_NE(sample(logits, params, state).token, 0);  // min_tokens
    EXPECT_EQ(sample(logits, params, state).token, 0);  // only the end is left: min_tokens gives way
}

TEST(ConstraintSampling, DisallowedTokensAndIgnoreEosAreRefused) {
    constexpr int64_t kVocab = 64;
    SamplingParams params;
    params.constraint = std::make_shared<SubsetConstraint>(SubsetRule{}, kVocab);
    SamplerState state(params, {}, kEos, kVocab);
    EXPECT_THROW(state.record_output(0), Error);  // the end is not allowed at position 0
    params.ignore_eos = true;
    EXPECT_THROW(validate_sampling_params(params, kVocab), Error);
    params.ignore_eos = false;
    EXPECT_THROW(validate_sampling_params(params, kVocab + 1), Error);  // the mask does not cover the vocabulary
}

// Speculative verification under a constraint: whatever the drafts (allowed or not), every emitted token is one the
// constraint allows at its position, the constraint's state moves exactly along the emitted tokens (the next mask is
// the position after them), and a forbidden draft is never accepted. Both verification methods, greedy and sampled.
TEST(ConstraintSampling, VerifiedDraftsKeepToTheConstraint) {
    constexpr int64_t kVocab = 200;
    constexpr int kDrafts = 4;
    const SubsetRule rule{.seed = 5, .end_from = 100};
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (const VerifyMethod method : {VerifyMethod::kStandard, VerifyMethod::kBlock}) {
        for (const double temperature : {0.0, 1.0}) {
            SamplingParams params;
            params.temperature = temperature;
            params.seed = 3;
            params.constraint = std::make_shared<SubsetConstraint>(rule, kVocab);
            SamplerState state(params, {}, kEos, kVocab);
            int position = 0;
            for (int step = 0; step < 20; ++step) {
                DraftProposal draft;
                for (int i = 0; i < kDrafts; ++i) {  // every other step's drafts follow the rule where they can
                    int32_t t = static_cast<int32_t>(rng() % kVocab);
                    if (step % 2 == 0 && rule.allowed(position + i, 3)) t = 3;
                    draft.tokens.push_back(t);
                }
                std::vector<float> logits((kDrafts + 1) * kVocab);
                for (float& x : logits) x = normal(rng);
                const VerifyOutcome v = verify_drafts(logits, draft, params, state, method);
                ASSERT_EQ(v.tokens.size(), static_cast<size_t>(v.accepted) + 1);
                for (int i = 0; i < static_cast<int>(v.tokens.size()); ++i) {
                    const auto token = static_cast<int32_t>(v.tokens[static_cast<size_t>(i)].token);
                    ASSERT_TRUE(rule.allowed(position + i, token)) << "step " << step << " token " << i;
                    if (i < v.accepted) {
                        ASSERT_EQ(token, draft.tokens[static_cast<size_t>(i)]);
                    }
                }
                position += static_cast<int>(v.tokens.size());
                ASSERT_EQ(state.num_output_tokens(), position);
                state.prepare_constraint_mask();  // the mask of the position after the emitted tokens
                for (int32_t t = 0; t < kVocab; ++t) {
                    const bool bit = (state.constraint_mask()[static_cast<size_t>(t) / 64] >> (t % 64)) & 1;
                    ASSERT_EQ(bit, rule.allowed(position, t)) << "step " << step << " token " << t;
                }
            }
        }
    }
}

}  // namespace
}  // namespace dsv4
