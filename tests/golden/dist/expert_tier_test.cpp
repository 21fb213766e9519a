// The expert tier on the CPU backend (dist/expert_tier_moe.h): each routed expert in a device slot or in host memory,
// pairs of missing experts fetched (the evicted expert written back to host memory) or computed on the host. Whatever
// the placement (no slot, some, all), the fetch threshold and the rebalancing, the logits are bit-identical to the
// plain model's: a resident expert and a host one are the same bytes, and the MoE is the same composition of ops
// (or, in steps that read host experts in place, the plain moe op itself).
#include <gtest/gtest.h>

#include <cstring>

#include "dist/expert_tier_moe.h"
#include "ep_harness.h"

namespace dsv4::dist::testing {
namespace {

constexpr int kSequences = 3;

struct TierRun {
    RunLogits logits;
    ExpertCacheStats cache;
    ExpertTierStats tier;
    int64_t host_bytes = 0;
    int64_t expert_bytes = 0;
    int layers = 0;
    int wrong_experts = 0;  // experts whose bytes (in their slot or in host memory) differ from the checkpoint's
    bool decode_device_only = false;  // device_only() of a step of one token per sequence
};

bool same_bytes(const ExpertWeights& a, const ExpertWeights& b) {
    const std::vector<ExpertRange> x = expert_ranges(a), y = expert_ranges(b);
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
        if (x[i].bytes != y[i].bytes || std::memcmp(x[i].at, y[i].at, static_cast<size_t>(x[i].bytes)) != 0) {
            return false;
        }
    }
    return true;
}

// The fixture with every routed expert in host form and `slots` per layer in the cache.
TierRun expert_tier_run(const std::string& fixture, const std::vector<SequencePlan>& seqs, const Schedule& s,
                        ExpertCacheConfig cache) {
    auto backend = make_cpu_backend(Numerics::kExact, 1);
    auto loaded = load_model(golden::fixture_dir(fixture), *backend, golden::test_state(4),
                             [](int, int) { return false; });  // no routed expert uploaded the usual way
    const ModelConfig& config = loaded->model->config();
    cache.layers = config.num_layers;
    cache.experts = config.n_routed_experts;
    ExpertTierMoe tier(*backend, *backend, cache);
    load_host_experts(config, *loaded->bound, *backend, tier);
    tier.finish_loading();
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
    out.decode_device_only = tier.device_only(static_cast<int64_t>(seqs.size()));
    out.host_bytes = tier.host_bytes();
    out.layers = config.num_layers;
    out.expert_bytes = load_expert_weights(config, *loaded->bound, *backend, 0, 0).bytes();
    for (int l = 0; l < config.num_layers; ++l) {
        for (int e = 0; e < config.n_routed_experts; ++e) {
            out.wrong_experts +=
                !same_bytes(tier.where(l, e), load_expert_weights(config, *loaded->bound, *backend, l, e));
        }
    }
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
    // Each expert is in one place: host memory holds the 5 per layer not in a slot, plus the free one.
    EXPECT_EQ(fetched.host_bytes, fetched.expert_bytes * (fetched.layers * 5 + 1));
    EXPECT_GT(fetched.tier.written_back_bytes, 0) << "evictions wrote their experts back";
    EXPECT_EQ(fetched.wrong_experts, 0) << "after the fetches and write-backs every expert still has its own bytes";

    ExpertCacheConfig host_only;  // no slot: every pair on the host
    host_only.slots = 0;
    const TierRun host = expert_tier_run(fixture, seqs, schedule, host_only);
    expect_same(host.logits, want, "no slots");
    EXPECT_EQ(host.tier.host_pairs, host.cache.pairs);
    EXPECT_EQ(host.tier.written_back_bytes, 0);
    EXPECT_EQ(host.wrong_experts, 0);

    ExpertCacheConfig all;  // every expert resident: no host pair, no fetch after the placement
    all.slots = 8;
    const TierRun resident = expert_tier_run(fixture, seqs, schedule, all);
    expect_same(resident.logits, want, "all resident");
    EXPECT_EQ(resident.tier.host_pairs, 0);
    EXPECT_EQ(resident.cache.hit_pairs, resident.cache.pairs);
    EXPECT_EQ(resident.host_bytes, 0) << "every expert on the device: no host memory, not even a free expert";
}

// Small steps read host experts in place (the full handle table, the plain moe op, pairs counted by the backend and
// observed between steps); larger ones are planned as before. Rebalancing every step moves experts between slots and
// host memory under both, and the logits stay the plain model's, bit for bit.
TEST(ExpertTier, ReadingInPlaceNeverChangesTheLogits) {
    const std::string fixture = "flash_schedule";
    const Schedule schedule;  // prefill chunks of 27 and 36 tokens, then decode steps of 3
    const auto tokens = read_npy_i32((golden::fixture_dir(fixture) / "tokens.npy").string()).values;
    const auto seqs = make_sequences(tokens, kSequences, schedule);
    const RunLogits want = single_rank_run(fixture, seqs, schedule);

    ExpertCacheConfig decode;  // decode steps in place, prefill chunks planned
    decode.slots = 3;
    decode.rebalance_interval = 1;
    decode.read_in_place_max_tokens = kSequences;
    const TierRun mixed = expert_tier_run(fixture, seqs, schedule, decode);
    expect_same(mixed.logits, want, "decode in place");
    EXPECT_TRUE(mixed.decode_device_only);
    EXPECT_GT(mixed.cache.in_place_pairs, 0);
    EXPECT_GT(mixed.cache.fetched_pairs + mixed.tier.host_pairs, 0) << "the prefill chunks were planned";
    EXPECT_EQ(mixed.cache.pairs,
              mixed.cache.hit_pairs + mixed.cache.fetched_pairs + mixed.cache.host_pairs + mixed.cache.in_place_pairs);
    EXPECT_EQ(mixed.tier.in_place_pair_bytes, mixed.cache.in_place_pairs * mixed.expert_bytes);
    EXPECT_GT(mixed.cache.rebalance_fetches, 0);
    EXPECT_EQ(mixed.wrong_experts, 0);

    ExpertCacheConfig every = decode;  // every step in place: only the placement and rebalancing move experts
    every.read_in_place_max_tokens = 1000;
    const TierRun in_place = expert_tier_run(fixture, seqs, schedule, every);
    expect_same(in_place.logits, want, "every step in place");
    EXPECT_EQ(in_place.cache.pairs, in_place.cache.hit_pairs + in_place.cache.in_place_pairs);
    EXPECT_EQ(in_place.tier.host_pairs, 0);
    EXPECT_EQ(in_place.cache.fetches, in_place.layers * 3 + in_place.cache.rebalance_fetches);
    EXPECT_GT(in_place.cache.rebalance_fetches, 0);
    EXPECT_EQ(in_place.wrong_experts, 0);

    ExpertCacheConfig planned = decode;  // off: no step is device-only
    planned.read_in_place_max_tokens = 0;
    const TierRun off = expert_tier_run(fixture, seqs, schedule, planned);
    expect_same(off.logits, want, "planned");
    EXPECT_FALSE(off.decode_device_only);
    EXPECT_EQ(off.cache.in_place_pairs, 0);
}

// What the loader hands over is checked: every expert once, of one size, before the first step.
TEST(ExpertTier, LoadingIsChecked) {
    auto backend = make_cpu_backend(Numerics::kExact, 1);
    auto loaded = load_model(golden::fixture_dir("flash_schedule"), *backend, golden::test_state(4),
                             [](int, int) { return false; });
    const ModelConfig& config = loaded->model->config();
    ExpertCacheConfig cache;
    cache.layers = config.num_layers;
    cache.experts = config.n_routed_experts;
    cache.slots = 3;
    const auto message = [](const std::function<void()>& f) {
        try {
            f();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    ExpertTierMoe tier(*backend, *backend, cache);
    const ExpertWeights expert = load_expert_weights(config, *loaded->bound, *backend, 0, 5);
    tier.put(0, 5, expert);
    EXPECT_NE(message([&] { tier.put(0, 5, expert); }).find("handed over twice"), std::string::npos);
    EXPECT_NE(message([&] { tier.put(0, config.n_routed_experts, expert); }).find("outside the model"),
              std::string::npos);
    EXPECT_NE(message([&] { tier.put(1, 0, ExpertWeights{}); }).find("missing"), std::string::npos);
    // A layer's expected popularity places it before its experts arrive, never after.
    std::vector<double> shares(static_cast<size_t>(config.n_routed_experts), 0.0);
    shares[6] = 0.7;
    shares[2] = 0.2;
    shares[4] = 0.1;
    tier.expected_popularity(1, shares);
    EXPECT_EQ(tier.cache().slot_of(1, 6), 0);
    EXPECT_EQ(tier.cache().slot_of(1, 4), 2);
    EXPECT_NE(message([&] { tier.expected_popularity(0, shares); }).find("came after its experts"), std::string::npos);
    ExpertWeights smaller = expert;
    smaller.w2.rows /= 2;
    EXPECT_NE(message([&] { tier.put(1, 0, smaller); }).find("one expert size"), std::string::npos);
    EXPECT_NE(message([&] { tier.finish_loading(); }).find("1 of the model's"), std::string::npos);
    const Tensor none;
    MoeWeights w;
    EXPECT_NE(message([&] { tier.moe(0, none, w, none, none, 0.0f, none); }).find("finish_loading"), std::string::npos);
}

}  // namespace
}  // namespace dsv4::dist::testing
