// Speculative verification where the logits are (DeviceDraws::add_verify, ModelOps::sample_rows with probes,
// verify_device_rows) against the host's verify_drafts on the same rows, on the CPU backend whose sample_rows is
// backend/sample_rows.h's definition: for one-hot drafts, standard and block verification emit the same tokens and
// accept the same drafts, over temperatures, top_k / top_p / min_p, penalties, logit bias and min_tokens; a probe's
// masses are the draft's probability and its draw never returns the draft; bad probes are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/tensor_reads.h"
#include "core/error.h"
#include "logits_on_backend.h"
#include "runtime/device_sampling.h"
#include "sample/logits_processors.h"
#include "sample/sampler.h"
#include "sample/spec_verify.h"

namespace dsv4 {
namespace {

constexpr int64_t kVocab = 300;
using Fixture = LogitsOnBackend<kVocab>;

std::vector<float> random_rows(std::mt19937_64& rng, int rows, double scale) {
    std::normal_distribution<double> normal(0.0, scale);
    std::vector<float> x(static_cast<size_t>(rows * kVocab));
    for (float& v : x) v = static_cast<float>(normal(rng));
    return x;
}

SamplingParams random_params(std::mt19937_64& rng, uint64_t seed) {
    auto pick = [&](auto... values) { return pick_one(rng, values...); };
    SamplingParams p;
    p.seed = seed;
    p.temperature = pick(0.3, 0.7, 1.0, 1.6);
    p.top_k = pick(0, 1, 5, 50);
    p.top_p = pick(1.0, 0.95, 0.5);
    p.min_p = pick(0.0, 0.0, 0.05);
    p.min_tokens = pick(0, 0, 3);
    p.repetition_penalty = pick(1.0, 1.0, 1.3);
    p.frequency_penalty = pick(0.0, 0.0, 0.5);
    p.presence_penalty = pick(0.0, 0.0, 0.7);
    if (pick(0, 1) == 1) p.logit_bias = {{5, 3.5f}, {9, -100.0f}, {11, 2.5f}};
    return p;
}

// Drafts a drafter might propose: mostly each row's most likely raw token (accepted often), some random tokens
// (rejected often).
std::vector<int32_t> random_drafts(std::mt19937_64& rng, const std::vector<float>& rows, int k) {
    std::vector<int32_t> drafts;
    for (int i = 0; i < k; ++i) {
        const auto row = std::span<const float>(rows).subspan(static_cast<size_t>(i * kVocab), kVocab);
        const bool likely = std::uniform_int_distribution<int>(0, 3)(rng) != 0;
        drafts.push_back(likely ? static_cast<int32_t>(argmax_token(row))
                                : std::uniform_int_distribution<int32_t>(0, kVocab - 1)(rng));
    }
    return drafts;
}

VerifyOutcome verify_on_backend(Fixture& f, const std::vector<float>& rows, const std::vector<int32_t>& drafts,
                                const SamplingParams& params, SamplerState& state, VerifyMethod method) {
    DeviceDraws draws(kVocab);
    draws.add_verify(0, drafts, params, state);
    const SampledRows got = read_sampled_rows(*f.backend, f.upload(rows), draws.args());
    EXPECT_EQ(got.ids.size(), drafts.size() + 1);
    EXPECT_EQ(got.probes.size(), drafts.size() + 1);
    std::vector<DeviceDraftRow> device(drafts.size());
    for (size_t i = 0; i < drafts.size(); ++i) {
        device[i].p_draft = static_cast<double>(got.probes[i].probe) / static_cast<double>(got.probes[i].kept);
        device[i].residual = got.ids[i];
    }
    return verify_device_rows(device, got.ids[drafts.size()], drafts, state, method);
}

TEST(DeviceVerify, SameOutcomeAsHostVerification) {
    Fixture f;
    std::mt19937_64 rng(731);
    const std::vector<int64_t> prompt = {5, 17, 17, 120, 299};
    const std::vector<int64_t> eos = {0, 2};
    int cases = 0, all_accepted = 0, rejected = 0;
    for (VerifyMethod method : {VerifyMethod::kStandard, VerifyMethod::kBlock}) {
        for (int c = 0; c < 400; ++c) {
            const SamplingParams params = random_params(rng, 7000 + c);
            const int k = std::uniform_int_distribution<int>(1, 5)(rng);
            const double scale[] = {1.0, 3.0, 8.0};  // 8: peaked rows, where drafts are accepted with high probability
            const std::vector<float> rows = random_rows(rng, k + 1, scale[c % 3]);
            const std::vector<int32_t> drafts = random_drafts(rng, rows, k);
            SamplerState host(params, prompt, eos, kVocab), device(params, prompt, eos, kVocab);
            for (int warm = 0; warm < c % 4; ++warm) {  // some output history for the penalties and min_tokens
                host.record_output(40 + warm);
                device.record_output(40 + warm);
            }
            const VerifyOutcome want = verify_drafts(rows, DraftProposal{drafts, {}}, params, host, method);
            ASSERT_TRUE(DeviceDraws::supports(params, device));
            const VerifyOutcome got = verify_on_backend(f, rows, drafts, params, device, method);
            ASSERT_EQ(got.accepted, want.accepted) << "case " << c << " " << verify_method_name(method);
            ASSERT_EQ(got.tokens.size(), want.tokens.size());
            for (size_t i = 0; i < got.tokens.size(); ++i) {
                EXPECT_EQ(got.tokens[i].token, want.tokens[i].token) << "case " << c << " token " << i;
            }
            EXPECT_EQ(device.num_output_tokens(), host.num_output_tokens());
            ++cases;
            all_accepted += got.accepted == k ? 1 : 0;
            rejected += got.accepted < k ? 1 : 0;
        }
    }
    EXPECT_EQ(cases, 800);
    EXPECT_GT(all_accepted, 100) << "bonus draws were compared";
    EXPECT_GT(rejected, 100) << "corrections were compared";
}

// One row: the probe's share of the kept mass is the host distribution's probability of the draft, the draw never
// returns the draft while anything else is kept, and a draft holding all the mass is returned with probability 1.
TEST(DeviceVerify, ProbeMassesAreTheDraftsProbability) {
    Fixture f;
    std::mt19937_64 rng(99);
    const std::vector<float> row = random_rows(rng, 1, 2.0);
    SamplingParams params;
    params.temperature = 0.8;
    params.top_p = 0.9;
    const TokenDistribution dist = sampling_distribution(row, params);
    const int32_t draft = static_cast<int32_t>(argmax_token(row));
    std::vector<RowDraw> draws;
    for (int u = 0; u < 64; ++u) {
        RowDraw d;
        d.temperature = params.temperature;
        d.top_p = params.top_p;
        d.uniform = (u + 0.5) / 64.0;
        d.probe = draft;
        draws.push_back(d);
    }
    const SampledRows got = read_sampled_rows(*f.backend, f.upload(row), {draws, {}, {}});
    double p_host = 0.0;
    for (size_t i = 0; i < dist.tokens.size(); ++i) p_host += dist.tokens[i] == draft ? dist.probs[i] : 0.0;
    const double p_device = static_cast<double>(got.probes[0].probe) / static_cast<double>(got.probes[0].kept);
    EXPECT_NEAR(p_device, p_host, 1e-12);
    EXPECT_GT(p_device, 0.0);
    EXPECT_LT(p_device, 1.0);
    for (int32_t id : got.ids) EXPECT_NE(id, draft);

    draws.resize(1);
    draws[0].top_k = 1;  // only the draft is kept: the draw is the draft, and p(draft) = 1
    const SampledRows only = read_sampled_rows(*f.backend, f.upload(row), {draws, {}, {}});
    EXPECT_EQ(only.ids[0], draft);
    EXPECT_EQ(only.probes[0].probe, only.probes[0].kept);
}

TEST(DeviceVerify, BadProbesAreRefused) {
    Fixture f;
    std::mt19937_64 rng(3);
    const Tensor logits = f.upload(random_rows(rng, 1, 1.0));
    Tensor out = f.backend->alloc(DType::kI32, {1});
    Tensor probes = f.backend->alloc(DType::kI32, {1, kProbeMassWords});
    RowDraw d;
    d.probe = static_cast<int32_t>(kVocab);  // outside the vocabulary
    EXPECT_THROW(f.backend->sample_rows(logits, {std::span(&d, 1), {}, {}}, out, nullptr, &probes), Error);
    d.probe = 3;
    d.greedy = true;  // greedy draws compare argmax ids instead
    EXPECT_THROW(f.backend->sample_rows(logits, {std::span(&d, 1), {}, {}}, out, nullptr, &probes), Error);
    d.greedy = false;
    EXPECT_THROW(f.backend->sample_rows(logits, {std::span(&d, 1), {}, {}}, out), Error) << "no output for the masses";
    Tensor small = f.backend->alloc(DType::kI32, {1});
    EXPECT_THROW(f.backend->sample_rows(logits, {std::span(&d, 1), {}, {}}, out, nullptr, &small), Error);
    EXPECT_NO_THROW(f.backend->sample_rows(logits, {std::span(&d, 1), {}, {}}, out, nullptr, &probes));
}

}  // namespace
}  // namespace dsv4
