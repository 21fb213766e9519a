// The expert tier on the GPU (dist/expert_tier_moe.h with backend/cuda/cuda_expert_cache.cpp): experts in pinned host
// memory or in a cache of device slots, fetches and write-backs on the copy stream, handle tables rewritten in place.
// Decode steps of one sequence route 3 experts per layer, so 4 slots serve them by fetching alone: the logits must be
// bit-identical to the tier with every expert resident (the same kernels read the same bytes), fetches must happen, and
// no pair may fall back to the host. Prefill steps need more experts than slots: host pairs run on a CPU backend, in
// reference numerics on both sides, where the CPU and the GPU agree bit for bit. Decode steps may instead read the
// missing experts in place (mapped pinned memory), as graphs. Skipped without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>

#include "../../ops/cuda/require_gpu.h"
#include "../dist/ep_harness.h"
#include "backend/cuda/cuda_factory.h"
#include "dist/expert_tier_moe.h"
#include "runtime/step_graphs.h"

namespace dsv4::dist::testing {
namespace {

struct Tier {
    std::vector<std::vector<float>> logits;  // per step: the last position's
    ExpertCacheStats cache;
    ExpertTierStats tier;
    int64_t replays = 0;  // graph replays (decode steps)
};

struct TierOptions {
    int64_t read_in_place_tokens = 0;  // ExpertCacheConfig::read_in_place_max_tokens
    bool graphs = false;               // steps through StepGraphs (decode steps recorded and replayed)
};

// One sequence of the fixture: a prefill of `prefill` tokens, then single-token decode steps to `total`.
Tier run(Numerics numerics, int slots, int64_t prefill, int64_t total, const TierOptions& o = {}) {
    auto device = make_cuda_backend(numerics);
    auto host = make_cpu_backend(host_pairs_numerics(numerics), 0);  // as the engine makes it
    auto loaded = load_model(golden::fixture_dir("flash_schedule"), *device, golden::test_state(1),
                             [](int, int) { return false; });
    const ModelConfig& c = loaded->model->config();
    ExpertCacheConfig cache;
    cache.layers = c.num_layers;
    cache.experts = c.n_routed_experts;
    cache.slots = slots;
    cache.rebalance_interval = 4;
    cache.read_in_place_max_tokens = o.read_in_place_tokens;
    ExpertTierMoe tier(*device, *host, cache);
    load_host_experts(c, *loaded->bound, *device, tier);  // pinned copies, the placed ones moved into slots
    tier.finish_loading();
    loaded->model->set_moe_dispatch(&tier);
    StepGraphs graphs(*loaded->model, !o.graphs);
    const auto tokens = read_npy_i32((golden::fixture_dir("flash_schedule") / "tokens.npy").string()).values;
    Tier out;
    for (int64_t start = 0; start < total;) {
        const int64_t end = start == 0 ? prefill : start + 1;
        StepBatch b;
        b.add_sequence(0, start, std::span(tokens).subspan(start, end - start), {0});
        b.logit_rows.push_back(static_cast<int32_t>(end - start - 1));
        out.logits.push_back(loaded->model->host_logits(graphs.forward(b, {})));
        tier.end_step();
        start = end;
    }
    out.cache = tier.cache().stats();
    out.tier = tier.stats();
    out.replays = graphs.replays();
    return out;
}

bool same(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * 4) != 0) return false;
    }
    return true;
}

TEST(CudaExpertTier, FetchingNeverChangesTheLogits) {
    DSV4_REQUIRE_GPU();
    const Tier all = run(Numerics::kExact, 8, 1, 24);
    const Tier cached = run(Numerics::kExact, 4, 1, 24);
    EXPECT_TRUE(same(cached.logits, all.logits));
    EXPECT_GT(cached.cache.fetches, 4 * 6) << "decode steps fetched experts";
    EXPECT_GT(cached.tier.written_back_bytes, 0) << "evicted experts were written back to host memory";
    EXPECT_EQ(cached.tier.host_pairs, 0);
}

TEST(CudaExpertTier, HostPairsMatchInReferenceNumerics) {
    DSV4_REQUIRE_GPU();
    const Tier all = run(Numerics::kReference, 8, 16, 24);
    const Tier cached = run(Numerics::kReference, 2, 16, 24);
    EXPECT_GT(cached.tier.host_pairs, 0) << "the prefill needs more experts than 2 slots";
    EXPECT_TRUE(same(cached.logits, all.logits));
}

// Decode steps that read the 4 experts not in a slot where they lie (mapped pinned memory, over PCIe) compute the bits
// of the tier with every expert resident, in exact and in fast numerics (the same kernels over the same bytes), fetch
// nothing beyond the placement and rebalancing, and record and replay as graphs with the same bits as eager steps.
TEST(CudaExpertTier, ReadingInPlaceNeverChangesTheLogits) {
    DSV4_REQUIRE_GPU();
    for (Numerics numerics : {Numerics::kExact, Numerics::kFast}) {
        const Tier all = run(numerics, 8, 1, 24);
        const Tier eager = run(numerics, 4, 1, 24, {.read_in_place_tokens = 1});
        const Tier graphed = run(numerics, 4, 1, 24, {.read_in_place_tokens = 1, .graphs = true});
        EXPECT_TRUE(same(eager.logits, all.logits)) << static_cast<int>(numerics);
        EXPECT_TRUE(same(graphed.logits, all.logits)) << static_cast<int>(numerics);
        EXPECT_GT(eager.cache.in_place_pairs, 0);
        EXPECT_EQ(eager.cache.pairs, eager.cache.hit_pairs + eager.cache.in_place_pairs);
        EXPECT_EQ(graphed.cache.pairs, eager.cache.pairs) << "replayed steps counted their pairs on the device";
        EXPECT_EQ(eager.tier.host_pairs, 0);
        EXPECT_GT(graphed.replays, 0) << "decode steps ran as graphs";
    }
}

}  // namespace
}  // namespace dsv4::dist::testing
