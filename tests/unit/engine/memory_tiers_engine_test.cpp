// The memory tiers through Engine::create (the flags' path): --gpu-experts below the model's experts serves with
// the expert tier (the same greedy tokens and logprobs as every expert resident, its counters in the stats);
// --host-kv-cache-gib and --disk-kv-cache give a prefix cache with tiers; bad tier flags are clear errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "engine_test_util.h"

namespace dsv4::engine_test {
namespace {

std::vector<Completion> generate(const EngineConfig& c, const std::vector<int32_t>& prompt, EngineStats* stats) {
    auto engine = Engine::create(c);
    SubmitResult r = engine->submit(make_request("r", prompt, greedy(6)));
    EXPECT_TRUE(r.stream) << r.message;
    std::vector<Completion> out = drain(*r.stream);
    *stats = engine->stats();
    engine->shutdown(std::chrono::milliseconds(0));
    return out;
}

TEST(MemoryTiersEngine, ExpertTierServesTheSameTokens) {
    std::vector<int32_t> prompt = fixture_tokens("flash_schedule");
    prompt.resize(40);
    EngineConfig c = small_config("flash_schedule");
    c.max_num_seqs = 1;
    EngineStats plain_stats, tier_stats;
    const std::vector<Completion> plain = generate(c, prompt, &plain_stats);
    c.gpu_experts = 3;  // of 8
    const std::vector<Completion> tiered = generate(c, prompt, &tier_stats);
    ASSERT_EQ(tiered.size(), 1u);
    EXPECT_EQ(tiered[0].tokens, plain[0].tokens);
    EXPECT_EQ(tiered[0].reason, FinishReason::kLength) << tiered[0].error;
    EXPECT_EQ(plain_stats.expert_pairs, 0);
    EXPECT_GT(tier_stats.expert_pairs, 0);
    EXPECT_LT(tier_stats.expert_hit_pairs, tier_stats.expert_pairs) << "3 of 8 experts cannot serve every pair";
    EXPECT_GT(tier_stats.expert_fetched_bytes, 0);
    EXPECT_EQ(tier_stats.expert_in_place_pairs, 0) << "off by default";

    c.expert_read_in_place_tokens = 1;  // decode steps read the 5 host experts in place; the prefill is planned
    EngineStats in_place_stats;
    const std::vector<Completion> in_place = generate(c, prompt, &in_place_stats);
    EXPECT_EQ(in_place[0].tokens, plain[0].tokens);
    EXPECT_GT(in_place_stats.expert_in_place_pairs, 0);
    EXPECT_EQ(in_place_stats.expert_pairs, tier_stats.expert_pairs) << "in-place pairs are counted too";
    c.gpu_experts = -1;  // no tier: the flag would do nothing
    try {
        Engine::create(c);
        ADD_FAILURE() << "--expert-read-in-place-tokens without --gpu-experts was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("needs --gpu-experts"), std::string::npos);
    }
    c.gpu_experts = 3;
    c.expert_read_in_place_tokens = -1;
    try {
        Engine::create(c);
        ADD_FAILURE() << "a negative --expert-read-in-place-tokens was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--expert-read-in-place-tokens must be >= 0"), std::string::npos);
    }
}

TEST(MemoryTiersEngine, KvTierFlagsAreCheckedAndWork) {
    const auto dir = std::filesystem::temp_directory_path() / ("dsv4_engine_disk_" + std::to_string(::getpid()));
    EngineConfig c = small_config("flash_schedule");
    c.disk_kv_cache_dir = dir.string();
    try {
        Engine::create(c);
        ADD_FAILURE() << "a disk tier without a host pool was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--disk-kv-cache needs --host-kv-cache-gib"), std::string::npos);
    }
    c.host_kv_cache_bytes = 64 << 20;
    std::vector<int32_t> prompt = fixture_tokens("flash_schedule");
    prompt.resize(140);
    EngineStats stats;
    const std::vector<Completion> out = generate(c, prompt, &stats);
    EXPECT_EQ(out[0].reason, FinishReason::kLength) << out[0].error;
    EXPECT_GT(stats.kv_offloaded_bytes, 0) << "the cached block and snapshot were written through to the host pool";
    EXPECT_TRUE(std::filesystem::is_directory(dir));
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dsv4::engine_test
