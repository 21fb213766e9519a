// The serving engine on the GPU (device "cuda", exact numerics) against the same engine on the CPU: greedy
// completions of prompts that share prefixes (prefix-cache hits restore GPU snapshots and share blocks), several
// requests at once, and n > 1 (slot and block copies); speculative decoding's greedy output. Skipped without a GPU.
#include <gtest/gtest.h>

#include <bit>
#include <filesystem>
#include <tuple>

#include "../../unit/engine/engine_test_util.h"
#include "backend/cuda/cuda_factory.h"
#include "golden_support.h"

namespace dsv4::engine_test {
namespace {

std::vector<std::vector<int32_t>> run_prompts(const std::string& device,
                                              const std::vector<std::vector<int32_t>>& prompts, int n,
                                              int64_t* cached) {
    EngineConfig c = small_config("flash_schedule");
    c.device = device;
    auto engine = Engine::create(c);
    std::vector<std::vector<int32_t>> out;
    *cached = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
        GenerateRequest r;
        r.request_id = "r" + std::to_string(i);
        r.prompt_tokens = prompts[i];
        r.params = greedy(12);
        r.params.n = n;
        r.params.seed = 7;
        SubmitResult s = engine->submit(r);
        EXPECT_TRUE(s.stream) << s.message;
        if (!s.stream) return out;
        for (const Completion& comp : drain(*s.stream, n)) {
            out.push_back(comp.tokens);
            *cached += comp.cached_prompt_tokens;
        }
    }
    engine->shutdown(std::chrono::seconds(5));
    return out;
}

TEST(EngineCuda, MatchesCpuWithPrefixHitsAndForks) {
    std::string why;
    if (!cuda_available(&why)) GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
    const std::vector<int32_t> base = fixture_tokens("flash_schedule");
    std::vector<std::vector<int32_t>> prompts;
    prompts.emplace_back(base.begin(), base.begin() + 270);  // fills two 128-token blocks
    prompts.emplace_back(base.begin(), base.begin() + 290);  // shares them (prefix hit)
    std::vector<int32_t> diverging(base.begin(), base.begin() + 258);
    diverging.push_back(5);  // diverges right after the second block boundary, inside a CSA window
    prompts.push_back(diverging);
    for (int n : {1, 3}) {
        int64_t cached_cpu = 0, cached_gpu = 0;
        const auto cpu = run_prompts("cpu", prompts, n, &cached_cpu);
        const auto gpu = run_prompts("cuda", prompts, n, &cached_gpu);
        EXPECT_EQ(gpu, cpu) << "n = " << n;
        EXPECT_EQ(cached_gpu, cached_cpu) << "n = " << n;
        EXPECT_GT(cached_gpu, 0) << "no prefix-cache hit";
    }
}

}  // namespace
}  // namespace dsv4::engine_test

namespace dsv4::engine_test {
namespace {

// Speculative decoding on the GPU (verify steps graphed like decode steps, drafter substeps after a replay): greedy
// completions with MTP and DSpark drafts equal the GPU's own completions without them, on the trained demo models.
std::vector<int32_t> demo_completion(const std::string& model, const SpeculativeConfig& spec) {
    EngineConfig c;
    c.model_dir = (golden::source_dir() / "models" / model).string();  // the device machine's checkout
    c.device = "cuda";
    c.max_num_seqs = 4;
    c.block_tokens = 64;
    c.max_model_len = 1024;
    c.speculative = spec;
    auto engine = Engine::create(c);
    GenerateRequest r;
    r.request_id = "r";
    r.prompt_tokens = {0, 83, 485, 1754, 489, 328, 1860, 1572, 409, 64, 481, 120, 115, 586, 564, 132};
    r.params = greedy(80);  // crosses the window (64) in verify steps
    SubmitResult s = engine->submit(r);
    EXPECT_TRUE(s.stream) << s.message;
    if (!s.stream) return {};
    std::vector<int32_t> tokens = drain(*s.stream).at(0).tokens;
    if (spec.enabled()) {
        EXPECT_GT(engine->stats().spec_drafts_total, 0);
    }
    engine->shutdown(std::chrono::seconds(5));
    return tokens;
}

TEST(EngineCuda, SpeculativeGreedyEqualsPlainGreedy) {
    std::string why;
    if (!cuda_available(&why)) GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
    for (const auto& [model, method, k] : {std::tuple<std::string, std::string, int>{"demo", "mtp", 3},
                                           std::tuple<std::string, std::string, int>{"demo-dspark", "dspark", 5}}) {
        SpeculativeConfig spec;
        spec.method = method;
        spec.num_speculative_tokens = k;
        EXPECT_EQ(demo_completion(model, spec), demo_completion(model, {})) << method;
    }
}

}  // namespace
}  // namespace dsv4::engine_test

namespace dsv4::engine_test {
namespace {

// Greedy completions (with the sampled token's logprob and the top 5) of fast numerics with --batch-invariant: each
// request alone, one after another, or all submitted at once under a small token budget (prefill chunks of different
// lengths beside other requests' decodes).
std::vector<Completion> fast_invariant(const std::vector<std::vector<int32_t>>& prompts, bool together) {
    EngineConfig c = small_config("flash_schedule");
    c.device = "cuda";
    c.numerics = "fast";
    c.batch_invariant = true;
    c.enable_prefix_caching = false;
    c.max_num_batched_tokens = 96;
    auto engine = Engine::create(c);
    std::vector<std::shared_ptr<ResultStream>> streams;
    std::vector<Completion> out;
    for (size_t i = 0; i < prompts.size(); ++i) {
        GenerateRequest r;
        r.request_id = "r" + std::to_string(i);
        r.prompt_tokens = prompts[i];
        r.params = greedy(10);
        r.params.logprobs = 5;
        SubmitResult s = engine->submit(r);
        EXPECT_TRUE(s.stream) << s.message;
        if (!s.stream) return out;
        if (together) {
            streams.push_back(std::move(s.stream));
        } else {
            out.push_back(drain(*s.stream).at(0));
        }
    }
    for (auto& stream : streams) out.push_back(drain(*stream).at(0));
    engine->shutdown(std::chrono::seconds(5));
    return out;
}

// A request's logprobs do not depend on what else is in its steps (EngineConfig::batch_invariant): the same bits
// alone and batched. Fast numerics without the option differ here (other kernels and splits at other step sizes).
TEST(EngineCuda, BatchInvariantFastNumerics) {
    std::string why;
    if (!cuda_available(&why)) GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
    const std::vector<int32_t> base = fixture_tokens("flash_schedule");
    std::vector<std::vector<int32_t>> prompts;
    for (auto [begin, end] : {std::pair<int, int>{0, 200}, {10, 13}, {30, 77}, {5, 140}, {60, 61}}) {
        prompts.emplace_back(base.begin() + begin, base.begin() + end);
    }
    const std::vector<Completion> alone = fast_invariant(prompts, false);
    const std::vector<Completion> together = fast_invariant(prompts, true);
    ASSERT_EQ(alone.size(), prompts.size());
    ASSERT_EQ(together.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
        ASSERT_EQ(together[i].logprobs.size(), alone[i].logprobs.size()) << "request " << i;
        for (size_t t = 0; t < alone[i].logprobs.size(); ++t) {
            EXPECT_EQ(std::bit_cast<uint32_t>(together[i].logprobs[t]), std::bit_cast<uint32_t>(alone[i].logprobs[t]))
                << "request " << i << " token " << t << ": " << together[i].logprobs[t] << " alone "
                << alone[i].logprobs[t];
            ASSERT_EQ(together[i].top.at(t).size(), alone[i].top.at(t).size());
            for (size_t j = 0; j < alone[i].top[t].size(); ++j) {
                EXPECT_EQ(together[i].top[t][j].token, alone[i].top[t][j].token);
                EXPECT_EQ(std::bit_cast<uint32_t>(together[i].top[t][j].logprob),
                          std::bit_cast<uint32_t>(alone[i].top[t][j].logprob))
                    << "request " << i << " token " << t << " top " << j;
            }
        }
    }
}

}  // namespace
}  // namespace dsv4::engine_test
