// --kv-cache-dtype through the engine: the dtype names (auto resolves by numerics, anything else is an error), the
// plan sizes blocks for the chosen dtype, and with fp8 storage a prefix-cache hit (restored snapshot + shared
// blocks) and a forked completion (copied slot + copied block) see bit-identical logits to a cold run.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/device_registry.h"
#include "engine/engine_core.h"
#include "engine_test_util.h"
#include "runtime_harness.h"

namespace dsv4::engine_test {
namespace {

TEST(KvDtype, AutoResolvesByNumerics) {
    EngineConfig c;
    c.numerics = "exact";
    EXPECT_EQ(engine_state_dtype(c), StateDtype::kF32);
    c.numerics = "reference";
    EXPECT_EQ(engine_state_dtype(c), StateDtype::kFp8);
    c.numerics = "fast";
    EXPECT_EQ(engine_state_dtype(c), StateDtype::kFp8);
    c.kv_cache_dtype = "bf16";
    EXPECT_EQ(engine_state_dtype(c), StateDtype::kBf16);
    c.kv_cache_dtype = "f32";
    EXPECT_EQ(engine_state_dtype(c), StateDtype::kF32);
    c.numerics = "exact";
    c.kv_cache_dtype = "fp8";
    EXPECT_EQ(engine_state_dtype(c), StateDtype::kFp8);
}

TEST(KvDtype, UnknownDtypeIsAClearError) {
    for (const char* bad : {"fp16", "FP8", "", "float32", "e4m3"}) {
        EngineConfig c = small_config("flash_schedule");
        c.kv_cache_dtype = bad;
        try {
            Engine::create(c);
            ADD_FAILURE() << "accepted --kv-cache-dtype '" << bad << "'";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("auto, f32, bf16 or fp8"), std::string::npos) << e.what();
        }
    }
}

TEST(KvDtype, SmallerRowsGiveMoreBlocksAndTheEngineGenerates) {
    std::map<std::string, int> blocks;
    std::map<std::string, std::vector<int32_t>> tokens;
    const std::vector<int32_t> all = fixture_tokens("flash_schedule");
    const std::vector<int32_t> prompt(all.begin(), all.begin() + 150);
    for (const char* dtype : {"f32", "bf16", "fp8"}) {
        EngineConfig c = small_config("flash_schedule");
        c.kv_cache_dtype = dtype;
        auto engine = Engine::create(c);
        blocks[dtype] = dynamic_cast<EngineCore&>(*engine).state_counts().num_blocks;
        SubmitResult r = engine->submit(make_request("a", prompt, greedy(6)));
        ASSERT_TRUE(r.stream) << r.message;
        const auto out = drain(*r.stream);
        EXPECT_EQ(out[0].reason, FinishReason::kLength) << dtype << " " << out[0].error;
        tokens[dtype] = out[0].tokens;
        engine->shutdown(std::chrono::seconds(5));
    }
    EXPECT_GT(blocks["bf16"], blocks["f32"]);
    EXPECT_GT(blocks["fp8"], blocks["bf16"]);
    EXPECT_EQ(tokens["fp8"].size(), 6u);
}

constexpr int kMaxTokens = 3;

// A prompt equal to `base` up to `at`, different after.
std::vector<int32_t> diverge(const std::vector<int32_t>& base, size_t at, int64_t vocab) {
    std::vector<int32_t> t = base;
    for (size_t i = at; i < t.size(); ++i) {
        int32_t v = static_cast<int32_t>((t[i] * 7 + 3 + static_cast<int32_t>(i)) % (vocab - 2) + 2);
        if (v == t[i]) v = v == vocab - 1 ? 2 : v + 1;
        t[i] = v;
    }
    return t;
}

class Fp8PrefixCache : public ::testing::TestWithParam<const char*> {};

TEST_P(Fp8PrefixCache, HitsAndForksGiveTheLogitsOfAColdRun) {
    const std::string fixture = GetParam();
    const std::vector<int32_t> base = RuntimeHarness::tokens(fixture);
    HarnessOptions o;
    o.fixture = fixture;
    o.kv_dtype = StateDtype::kFp8;
    RuntimeHarness warm(o);
    const int64_t vocab = warm.scheduler().config().vocab_size;
    warm.add("base", base, kMaxTokens);
    warm.run();
    struct Variant {
        std::string name;
        std::vector<int32_t> prompt;
        int expected_cached;
    };
    const std::vector<Variant> variants = {
        {"identical", base, 256},
        {"in_csa_window", diverge(base, 258, vocab), 256},
        {"early", diverge(base, 130, vocab), 0},
        {"early_again", diverge(base, 200, vocab), 128},
    };
    for (const Variant& v : variants) {
        warm.add(v.name, v.prompt, kMaxTokens);
        warm.run();
        EXPECT_EQ(warm.output(v.name).cached, v.expected_cached) << v.name;
    }
    // Forked completions (n = 2, greedy): both continue from copies of one prefilled slot.
    const std::vector<int32_t> fork_prompt = diverge(base, 140, vocab);
    warm.add("fork", fork_prompt, kMaxTokens, 2);
    warm.run();

    o.prefix_caching = false;
    o.num_blocks = 60;
    o.max_num_seqs = 8;
    RuntimeHarness cold(o);
    for (const Variant& v : variants) cold.add(v.name, v.prompt, kMaxTokens);
    cold.add("fork", fork_prompt, kMaxTokens);
    cold.run();
    for (const Variant& v : variants) {
        ASSERT_EQ(warm.logits(v.name).size(), static_cast<size_t>(kMaxTokens)) << v.name;
        EXPECT_TRUE(same_rows(warm.logits(v.name), cold.logits(v.name))) << v.name;
    }
    // The prefill's row is recorded for completion 0 (the fork child samples from it too); the decode rows after
    // the fork are each completion's own.
    const auto& cold_fork = cold.logits("fork");
    ASSERT_EQ(cold_fork.size(), static_cast<size_t>(kMaxTokens));
    EXPECT_TRUE(same_rows(warm.logits("fork", 0), cold_fork));
    EXPECT_TRUE(same_rows(warm.logits("fork", 1), {cold_fork.begin() + 1, cold_fork.end()}));
    EXPECT_EQ(warm.output("fork", 1).tokens, cold.output("fork").tokens);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Fp8PrefixCache, ::testing::Values("flash_schedule", "odd_dims"));

}  // namespace
}  // namespace dsv4::engine_test
