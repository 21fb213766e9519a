// Speculative verification (sample/spec_verify.h): the emitted tokens follow the target's distribution exactly
// (chi-square over the joint distribution of the first three tokens, tiny vocabulary), for standard and block
// verification at temperature 1, with top-p, and with a penalty; greedy verification emits what greedy decoding
// emits; and a drafter that shares the verifier's random stream is caught.
#include "sample/spec_verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/error.h"
#include "sample/logits_processors.h"
#include "sample/sampler.h"
#include "sample/sampler_state.h"
#include "sampler_reference.h"

namespace dsv4 {
namespace {

constexpr int64_t kVocab = 4;
constexpr int kDrafts = 3;
constexpr int kLength = 3;  // tokens compared: the joint distribution has kVocab^kLength cells

uint64_t hash_prefix(const std::vector<int32_t>& prefix, uint64_t salt) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ salt;
    for (int32_t t : prefix) h = (h ^ static_cast<uint64_t>(t + 1)) * 0x100000001b3ULL;
    return h;
}

// A context-dependent toy model: logits as a fixed pseudo-random function of the whole prefix.
std::vector<float> toy_logits(const std::vector<int32_t>& prefix, uint64_t salt, float scale) {
    std::vector<float> logits(kVocab);
    for (int64_t x = 0; x < kVocab; ++x) {
        logits[x] = scale * static_cast<float>(2.0 * uniform_at(hash_prefix(prefix, salt), x) - 1.0);
    }
    return logits;
}

std::vector<float> target_logits(const std::vector<int32_t>& prefix) {
    return toy_logits(prefix, 1, 2.0f);
}
// The draft: correlated with the target (half its logits) plus its own noise.
std::vector<float> draft_logits(const std::vector<int32_t>& prefix) {
    std::vector<float> t = target_logits(prefix), n = toy_logits(prefix, 2, 1.5f);
    for (int64_t x = 0; x < kVocab; ++x) t[x] = 0.5f * t[x] + n[x];
    return t;
}

// Where the drafter's uniform numbers come from: (seed, the step's first output position, draft index) -> [0, 1).
using DraftNoise = std::function<double(uint64_t seed, uint64_t base, int i)>;

double independent_noise(uint64_t seed, uint64_t base, int i) {
    return draft_uniform(seed, base, i);
}
double shared_noise(uint64_t seed, uint64_t base, int i) {  // the bug: the verifier's own acceptance coin
    return uniform_at(seed, base, kAcceptLane + static_cast<uint64_t>(i));
}

// One sequence decoded speculatively until kLength tokens exist; returns the first kLength as a cell index.
int64_t speculative_sequence(const SamplingParams& params, uint64_t seed, VerifyMethod method,
                             const DraftNoise& noise) {
    SamplingParams seeded = params;
    seeded.seed = seed;
    const std::vector<int32_t> prompt = {1, 2};
    const std::vector<int64_t> prompt64(prompt.begin(), prompt.end());
    SamplerState state(seeded, prompt64, {}, kVocab);
    std::vector<int32_t> seq = prompt;
    while (static_cast<int64_t>(seq.size() - prompt.size()) < kLength) {
        DraftProposal draft;
        draft.probs.resize(kDrafts * kVocab);
        std::vector<int32_t> ctx = seq;
        std::vector<float> rows;
        for (int i = 0; i < kDrafts; ++i) {
            const std::vector<float> t = target_logits(ctx);
            rows.insert(rows.end(), t.begin(), t.end());
            const double u = noise(seed, static_cast<uint64_t>(state.num_output_tokens()), i);
            const int32_t d = sample_draft_token(draft_logits(ctx), seeded.temperature, u,
                                                 std::span<float>(draft.probs).subspan(i * kVocab, kVocab));
            draft.tokens.push_back(d);
            ctx.push_back(d);
        }
        const std::vector<float> last = target_logits(ctx);
        rows.insert(rows.end(), last.begin(), last.end());
        const VerifyOutcome out = verify_drafts(rows, draft, seeded, state, method);
        EXPECT_EQ(static_cast<int>(out.tokens.size()), out.accepted + 1);
        for (const SampleResult& r : out.tokens) seq.push_back(static_cast<int32_t>(r.token));
    }
    int64_t cell = 0;
    for (int i = 0; i < kLength; ++i) cell = cell * kVocab + seq[prompt.size() + i];
    return cell;
}

// The exact joint distribution of the first kLength tokens under the normal sampler's processing.
std::vector<double> exact_joint(const SamplingParams& params) {
    std::vector<double> joint(static_cast<size_t>(std::pow(kVocab, kLength)), 0.0);
    const std::vector<int64_t> prompt64 = {1, 2};
    std::function<void(std::vector<int32_t>&, SamplerState&, double, int64_t)> walk =
        [&](std::vector<int32_t>& seq, SamplerState& state, double prob, int64_t cell) {
            if (static_cast<int64_t>(seq.size()) == 2 + kLength) {
                joint[cell] = prob;
                return;
            }
            std::vector<float> processed = target_logits(seq);
            apply_logits_processors(processed, params, state);
            const std::vector<double> p = testing::dense_probs(sampling_distribution(processed, params), kVocab);
            for (int32_t x = 0; x < kVocab; ++x) {
                if (p[x] == 0.0) continue;
                state.record_output(x);  // down the tree and back: the state is the same for every x
                seq.push_back(x);
                walk(seq, state, prob * p[x], cell * kVocab + x);
                seq.pop_back();
                const int64_t undone[] = {x};
                state.unrecord_outputs(undone);
            }
        };
    SamplingParams seeded = params;
    seeded.seed = 0;
    SamplerState state(seeded, prompt64, {}, kVocab);
    std::vector<int32_t> seq = {1, 2};
    walk(seq, state, 1.0, 0);
    return joint;
}

std::vector<int64_t> speculative_counts(const SamplingParams& params, VerifyMethod method, const DraftNoise& noise,
                                        int64_t draws) {
    std::vector<int64_t> counts(static_cast<size_t>(std::pow(kVocab, kLength)), 0);
    for (int64_t s = 0; s < draws; ++s) ++counts[speculative_sequence(params, 1000 + s, method, noise)];
    return counts;
}

// Pearson's statistic and its 1e-4 upper quantile (Wilson-Hilferty), over the cells with probability > 0.
bool chi_square_rejects(const std::vector<int64_t>& counts, const std::vector<double>& exact, int64_t draws) {
    double chi = 0.0;
    int cells = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
        if (exact[i] == 0.0) {
            if (counts[i] > 0) return true;
            continue;
        }
        const double expected = exact[i] * static_cast<double>(draws);
        chi += (static_cast<double>(counts[i]) - expected) * (static_cast<double>(counts[i]) - expected) / expected;
        ++cells;
    }
    const double df = cells - 1, z = 3.719;
    return chi > df * std::pow(1.0 - 2.0 / (9.0 * df) + z * std::sqrt(2.0 / (9.0 * df)), 3.0);
}

constexpr int64_t kDraws = 5000;

struct Setting {
    const char* name;
    SamplingParams params;
};

std::vector<Setting> settings() {
    SamplingParams plain;
    SamplingParams top_p;
    top_p.top_p = 0.7;
    SamplingParams penalised;
    penalised.frequency_penalty = 1.0;
    penalised.logit_bias = {{3, 0.5f}};
    return {{"temperature 1", plain}, {"top-p 0.7", top_p}, {"penalty + bias", penalised}};
}

TEST(SpecVerify, StandardRejectionSamplingKeepsTheTargetDistribution) {
    for (const Setting& s : settings()) {
        SCOPED_TRACE(s.name);
        const auto counts = speculative_counts(s.params, VerifyMethod::kStandard, independent_noise, kDraws);
        testing::expect_matches_distribution(counts, exact_joint(s.params), kDraws);
    }
}

TEST(SpecVerify, BlockVerificationKeepsTheTargetDistribution) {
    for (const Setting& s : settings()) {
        SCOPED_TRACE(s.name);
        const auto counts = speculative_counts(s.params, VerifyMethod::kBlock, independent_noise, kDraws);
        testing::expect_matches_distribution(counts, exact_joint(s.params), kDraws);
    }
}

TEST(SpecVerify, SharedDraftAndVerifierNoiseIsDetected) {
    // The same test with the drafter reading the verifier's acceptance stream: the output distribution is biased,
    // and the chi-square test must see it (this is how the independence requirement is guarded).
    const SamplingParams plain;
    for (VerifyMethod method : {VerifyMethod::kStandard, VerifyMethod::kBlock}) {
        SCOPED_TRACE(verify_method_name(method));
        const auto shared = speculative_counts(plain, method, shared_noise, kDraws);
        EXPECT_TRUE(chi_square_rejects(shared, exact_joint(plain), kDraws));
        const auto independent = speculative_counts(plain, method, independent_noise, kDraws);
        EXPECT_FALSE(chi_square_rejects(independent, exact_joint(plain), kDraws));
    }
}

TEST(SpecVerify, BlockAcceptsAtLeastAsManyDraftsAsStandardOnAverage) {
    const SamplingParams plain;
    int64_t standard = 0, block = 0;
    for (uint64_t s = 0; s < 4000; ++s) {
        for (VerifyMethod method : {VerifyMethod::kStandard, VerifyMethod::kBlock}) {
            SamplingParams seeded = plain;
            seeded.seed = s;
            SamplerState state(seeded, {}, {}, kVocab);
            std::vector<int32_t> ctx = {0};
            DraftProposal draft;
            draft.probs.resize(kDrafts * kVocab);
            std::vector<float> rows;
            for (int i = 0; i < kDrafts; ++i) {
                const auto t = target_logits(ctx);
                rows.insert(rows.end(), t.begin(), t.end());
                draft.tokens.push_back(sample_draft_token(draft_logits(ctx), 1.0, independent_noise(s, 0, i),
                                                          std::span<float>(draft.probs).subspan(i * kVocab, kVocab)));
                ctx.push_back(draft.tokens.back());
            }
            const auto t = target_logits(ctx);
            rows.insert(rows.end(), t.begin(), t.end());
            (method == VerifyMethod::kBlock ? block : standard) +=
                verify_drafts(rows, draft, seeded, state, method).accepted;
        }
    }
    EXPECT_GT(standard, 0);
    EXPECT_GE(block, standard * 98 / 100);  // optimal in expectation; 2% slack for the finite sample
}

TEST(SpecVerify, GreedyEmitsWhatGreedyDecodingEmits) {
    SamplingParams greedy;
    greedy.temperature = 0.0;
    greedy.presence_penalty = 0.7;  // the history (accepted drafts) changes later rows
    for (uint64_t trial = 0; trial < 50; ++trial) {
        const std::vector<int64_t> prompt64 = {1, 2};
        SamplerState plain_state(greedy, prompt64, {}, kVocab), spec_state(greedy, prompt64, {}, kVocab);
        std::vector<int32_t> ctx = {1, 2};
        DraftProposal draft;  // greedy drafts from the draft model: probs left empty
        std::vector<float> rows;
        for (int i = 0; i < kDrafts; ++i) {
            const auto t = target_logits(ctx);
            rows.insert(rows.end(), t.begin(), t.end());
            auto dl = draft_logits(ctx);
            dl[trial % kVocab] += static_cast<float>(trial % 3);  // vary agreement between trials
            draft.tokens.push_back(sample_draft_token(dl, 0.0, 0.0, {}));
            ctx.push_back(draft.tokens.back());
        }
        const auto t = target_logits(ctx);
        rows.insert(rows.end(), t.begin(), t.end());
        const VerifyOutcome out = verify_drafts(rows, draft, greedy, spec_state, VerifyMethod::kStandard);
        std::vector<int32_t> seq = {1, 2};
        for (size_t i = 0; i < out.tokens.size(); ++i) {
            const int64_t want = sample(target_logits(seq), greedy, plain_state).token;
            ASSERT_EQ(out.tokens[i].token, want) << "trial " << trial << " token " << i;
            if (i < static_cast<size_t>(out.accepted)) {
                EXPECT_EQ(want, draft.tokens[i]);
            }
            seq.push_back(static_cast<int32_t>(want));
        }
        if (out.accepted < kDrafts) {
            EXPECT_NE(out.tokens.back().token, draft.tokens[out.accepted]);
        }
    }
}

// The engine's path for plain greedy requests: the argmax of each verify row chosen where the logits are, then
// verify_greedy_argmax. Same tokens, accepted count and sampler records as verify_drafts on the rows.
TEST(SpecVerify, GreedyFromArgmaxIdsEqualsGreedyFromRows) {
    SamplingParams greedy;
    greedy.temperature = 0.0;
    for (uint64_t trial = 0; trial < 50; ++trial) {
        const std::vector<int64_t> prompt = {1, 2};
        SamplerState rows_state(greedy, prompt, {}, kVocab), ids_state(greedy, prompt, {}, kVocab);
        ASSERT_TRUE(samples_raw_argmax(greedy, ids_state));
        std::vector<int32_t> ctx = {1, 2}, row_argmax;
        DraftProposal draft;
        std::vector<float> rows;
        for (int i = 0; i <= kDrafts; ++i) {
            const auto t = target_logits(ctx);
            rows.insert(rows.end(), t.begin(), t.end());
            row_argmax.push_back(static_cast<int32_t>(argmax_token(t)));
            if (i == kDrafts) break;
            auto dl = draft_logits(ctx);
            dl[trial % kVocab] += static_cast<float>(trial % 3);
            draft.tokens.push_back(sample_draft_token(dl, 0.0, 0.0, {}));
            ctx.push_back(draft.tokens.back());
        }
        const VerifyOutcome want = verify_drafts(rows, draft, greedy, rows_state, VerifyMethod::kStandard);
        const VerifyOutcome got = verify_greedy_argmax(row_argmax, draft.tokens, ids_state);
        ASSERT_EQ(got.accepted, want.accepted) << "trial " << trial;
        ASSERT_EQ(got.tokens.size(), want.tokens.size());
        for (size_t i = 0; i < got.tokens.size(); ++i) EXPECT_EQ(got.tokens[i].token, want.tokens[i].token);
        EXPECT_EQ(ids_state.num_output_tokens(), rows_state.num_output_tokens());
    }
    SamplerState state(greedy, {}, {}, kVocab);
    const std::vector<int32_t> drafts = {1, 2};
    EXPECT_THROW(verify_greedy_argmax(std::vector<int32_t>{1, 2}, drafts, state), Error);     // a row short
    EXPECT_THROW(verify_greedy_argmax(std::vector<int32_t>{1, 2, 9}, drafts, state), Error);  // id outside
    EXPECT_THROW(verify_greedy_argmax(std::vector<int32_t>{1, 2, 0}, std::vector<int32_t>{1, 7}, state), Error);
    EXPECT_EQ(state.num_output_tokens(), 2);  // the id outside was found after two records
}

TEST(SpecVerify, MalformedInputIsAClearError) {
    SamplingParams params;
    params.seed = 1;
    SamplerState state(params, {}, {}, kVocab);
    DraftProposal draft;
    draft.tokens = {1, 2};
    std::vector<float> rows(2 * kVocab, 0.0f);  // one row short
    EXPECT_THROW(verify_drafts(rows, draft, params, state, VerifyMethod::kStandard), Error);
    rows.resize(3 * kVocab, 0.0f);
    draft.tokens = {1, 7};
    EXPECT_THROW(verify_drafts(rows, draft, params, state, VerifyMethod::kBlock), Error);
    draft.tokens = {1, 2};
    draft.probs.assign(2 * kVocab, NAN);
    EXPECT_THROW(verify_drafts(rows, draft, params, state, VerifyMethod::kStandard), Error);
    EXPECT_THROW(parse_verify_method("synthetic"), Error);
    EXPECT_EQ(state.num_output_tokens(), 0);
}

}  // namespace
}  // namespace dsv4
