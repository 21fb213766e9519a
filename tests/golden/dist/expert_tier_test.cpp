// The expert tier on the CPU backend (dist/expert_tier_moe.h): routed experts in host form, a cache of device slots,
// pairs of missing experts fetched or computed on the host. Whatever the placement (no slot, some, all), the fetch
// threshold and the rebalancing, the logits are bit-identical to the plain model's: a resident expert and a host one
// are the same bytes, and the MoE is the same composition of ops.
#include <gtest/gtest.h>

#include "dist/expert_tier_moe.h"
#include "ep_harness.h"

namespace dsv4::dist::testing {
namespace {

constexpr int kSequences = 3;

struct TierRun {
    RunLogits logits;
    ExpertCacheStats cache;
    ExpertTierStats tier;
};

// The fixture with every routed expert in host form and `slots` per layer in the cache.
TierRun expert_tier_run(const std::string& fixture, const std::vector<SequencePlan>& seqs, const Schedule& s,
                        ExpertCacheConfig cache) {
    auto backend = make_cpu_backend(Numerics::kExact, 1);
    auto loaded = load_model(golden::fixture_dir(fixture), *backend, golden::test_state(4),
                             [](int, int) { return false; });  // no routed expert uploaded the usual way
    const ModelConfig& config = loaded->model->config();
    cache.layers = config.num_layers;
    cache.experts = config.n_routed_experts;
    ExpertTierMoe tier(*backend, *backend, load_host_experts(config, *loaded->bound, *backend), cache);
    loaded->model->set_moe_dispatch(&tier);
    std::vector<int> all(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) all[i] = static_cast<int>(i);
    TierRun out;
    out.logits.resize(seqs.size());
    for (auto range : step_ranges(s)) {
        const StepBatch b = rank_batch(seqs, all, range);
        keep_logits(loaded->model->logits(b), all, range.second - range.first, config.vocab_size, out.logits);
        tier.end_step();
    }
    out.cache = tier.cache().stats();
    out.tier = tier.stats();
    return out;
}

void expect_same(const RunLogits& got, const RunLogits& want, const std::string& what) {
    for (size_t q = 0; q < want.size(); ++q) {
        for (size_t step = 0; step < want[q].size(); ++step) {
            EXPECT_TRUE(same_bits(got[q][step], want[q][step])) << what << ": seq " << q << " step " << step;
        }
    }
}

TEST(ExpertTier, PlacementNeverChangesTheLogits) {
    const std::string fixture = "flash_schedule";  // 8 experts, top-3
    const Schedule schedule;
    const auto tokens = read_npy_i32((golden::fixture_dir(fixture) / "tokens.npy").string()).values;
    const auto seqs = make_sequences(tokens, kSequences, schedule);
    const RunLogits want = single_rank_run(fixture, seqs, schedule);

    ExpertCacheConfig fetch_all;  // 3 slots, every missing expert fetched when a slot is free: evictions each layer
    fetch_all.slots = 3;
    fetch_all.rebalance_interval = 2;
    const TierRun fetched = expert_tier_run(fixture, seqs, schedule, fetch_all);
    expect_same(fetched.logits, want, "3 slots, fetch");
    EXPECT_GT(fetched.cache.fetches, 3 * 6) << "steps fetched experts (beyond the initial placement)";
    EXPECT_GT(fetched.cache.hit_pairs, 0);
    EXPECT_GT(fetched.tier.host_pairs, 0) << "steps needing more experts than free slots compute the rest on the host";
    EXPECT_GT(fetched.cache.rebalance_fetches + fetched.cache.fetches, 0);

    ExpertCacheConfig host_only;  // no slot: every pair on the host
    host_only.slots = 0;
    const TierRun host = expert_tier_run(fixture, seqs, schedule, host_only);
    expect_same(host.logits, want, "no slots");
    EXPECT_EQ(host.tier.host_pairs, host.cache.pairs);

    ExpertCacheConfig all;  // every expert resident: no host pair, no fetch after the placement
    all.slots = 8;
    const TierRun resident = expert_tier_run(fixture, seqs, schedule, all);
    expect_same(resident.logits, want, "all resident");
    EXPECT_EQ(resident.tier.host_pairs, 0);
    EXPECT_EQ(resident.cache.hit_pairs, resident.cache.pairs);
}

}  // namespace
}  // namespace dsv4::dist::testing
