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

TEST(ConstraintSampling, DraftMasksFollowTheDraftsAndLeaveTheStateUnchanged) {
    constexpr int64_t kVocab = 128;
    const SubsetRule rule{.seed = 17, .end_from = 1};
    SamplingParams params;
    params.constraint = std::make_shared<SubsetConstraint>(rule, kVocab);
    SamplerState state(params, {}, kEos, kVocab);
    state.record_output(3);  // position 1 from here on
    auto allowed_at = [&](int position) {
        std::vector<uint64_t> bits((kVocab + 63) / 64, 0);
        for (int32_t t = 0; t < kVocab; ++t) {
            if (rule.allowed(position, t)) bits[static_cast<size_t>(t) / 64] |= uint64_t{1} << (t % 64);
        }
        return bits;
    };
    int32_t disallowed = 1;
    while (rule.allowed(3, disallowed)) ++disallowed;
    const std::vector<int64_t> drafts = {3, 3, disallowed, 3};  // positions 1, 2 allowed; position 3 not
    const SamplerState::DraftMasks masks = state.draft_constraint_masks(drafts);
    ASSERT_EQ(masks.valid_prefix, 2u);
    ASSERT_EQ(masks.masks.size(), 3u);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(masks.masks[static_cast<size_t>(i)], allowed_at(1 + i)) << i;
    state.prepare_constraint_mask();  // rolled back: the next mask is position 1's again
    EXPECT_TRUE(std::equal(state.constraint_mask().begin(), state.constraint_mask().end(), allowed_at(1).begin()));
}

}  // namespace
}  // namespace dsv4
