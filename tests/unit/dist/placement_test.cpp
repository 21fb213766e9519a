// Expert placement, the dispatch plan and EPLB: invariants on random routing counts, and the balance EPLB buys.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "core/error.h"
#include "dist/dispatch_plan.h"
#include "dist/dist_env.h"
#include "dist/eplb.h"
#include "dist/routing_counters.h"

namespace dsv4::dist {
namespace {

TEST(Placement, ContiguousSplitsUnevenCounts) {
    const ExpertPlacement p = contiguous_placement(2, 5, 4);  // odd_dims: 5 experts over 4 ranks
    p.validate();
    EXPECT_EQ(p.layers[0].experts_of(0), (std::vector<int>{0, 1}));
    for (int r = 1; r < 4; ++r) EXPECT_EQ(p.layers[0].experts_of(r).size(), 1u);
    EXPECT_EQ(p.max_experts_per_rank(), 2);
    EXPECT_EQ(contiguous_placement(1, 256, 8).layers[0].experts_of(3).size(), 32u);
    EXPECT_THROW(contiguous_placement(1, 3, 4), Error);  // fewer experts than ranks
}

TEST(Placement, ResidencyFollowsThePlacement) {
    const ExpertPlacement p = strided_placement(3, 8, 2);
    const ExpertResidency r1 = p.residency(1);
    for (int e = 0; e < 8; ++e) EXPECT_EQ(r1(2, e), e % 2 == 1);
    EXPECT_FALSE(r1(3, 1));  // no such layer
}

TEST(Placement, ValidateRejectsBrokenPlacements) {
    ExpertPlacement p = contiguous_placement(1, 4, 2);
    p.layers[0].replicas[1] = {};
    EXPECT_THROW(p.validate(), Error);
    p.layers[0].replicas[1] = {1, 1};
    EXPECT_THROW(p.validate(), Error);
    p.layers[0].replicas[1] = {2};
    EXPECT_THROW(p.validate(), Error);
}

TEST(DispatchPlan, EveryPairGoesToAHolderAndComesBackToItsSlot) {
    std::mt19937 rng(3);
    for (int ranks : {1, 2, 4}) {
        ExpertPlacement p =
            plan_expert_placement(std::vector<std::vector<int64_t>>{{50, 1, 1, 9, 30, 2, 2, 5}}, ranks, 8 / ranks + 1);
        const LayerPlacement& layer = p.layers[0];
        std::uniform_int_distribution<int> expert(0, 7);
        const int k = 3, tokens = 17;
        std::vector<int32_t> ids(tokens * k);
        for (auto& e : ids) e = expert(rng);
        for (int rank = 0; rank < ranks; ++rank) {
            const DispatchPlan plan = plan_dispatch(ids, k, layer, rank, ranks, 5);
            ASSERT_EQ(std::accumulate(plan.send_counts.begin(), plan.send_counts.end(), int64_t{0}), tokens * k);
            int64_t slot = 0;
            for (int dest = 0; dest < ranks; ++dest) {
                for (int64_t i = 0; i < plan.send_counts[dest]; ++i, ++slot) {
                    EXPECT_TRUE(layer.holds(dest, plan.send_expert[slot]));
                    // A pair stays home when its rank holds the expert.
                    if (layer.holds(rank, plan.send_expert[slot])) {
                        EXPECT_EQ(dest, rank);
                    }
                }
            }
            for (int pair = 0; pair < tokens * k; ++pair) {
                const int32_t s = plan.slot_of_pair[pair];
                EXPECT_EQ(plan.send_pair[s], 5 * k + pair);
                EXPECT_EQ(plan.send_token[s], 5 + pair / k);
                EXPECT_EQ(plan.send_expert[s], ids[pair]);
            }
        }
    }
    EXPECT_THROW(plan_dispatch(std::vector<int32_t>{0, 9}, 2, contiguous_placement(1, 8, 2).layers[0], 0, 2), Error);
}

TEST(Eplb, SkewedCountsGetReplicasAndBalance) {
    std::mt19937 rng(11);
    for (int ranks : {2, 4, 8}) {
        const int experts = 32;
        // Zipf-like skew: a few experts take most of the tokens.
        std::vector<int64_t> counts(experts);
        for (int e = 0; e < experts; ++e) counts[e] = 100000 / ((e * 7 % experts) + 1) + rng() % 50;
        const std::vector<std::vector<int64_t>> layers = {counts, std::vector<int64_t>(experts, 10)};
        const int slots = experts / ranks + 2;
        const ExpertPlacement p = plan_expert_placement(layers, ranks, slots);
        p.validate();
        for (int r = 0; r < ranks; ++r) EXPECT_LE(static_cast<int>(p.layers[0].experts_of(r).size()), slots);
        const double before = load_imbalance(counts, contiguous_placement(1, experts, ranks).layers[0], ranks);
        const double after = load_imbalance(counts, p.layers[0], ranks);
        std::printf("[ eplb ] ranks %d: imbalance contiguous %.3f -> EPLB %.3f, %lld copies\n", ranks, before, after,
                    static_cast<long long>(p.redundant_copies()));
        EXPECT_LT(after, before);
        EXPECT_LT(after, 1.15);
        // The hottest expert has several copies.
        EXPECT_GT(p.layers[0].replicas[0].size(), 1u);
        // Uniform counts: balanced without replicas being required.
        EXPECT_LE(load_imbalance(layers[1], p.layers[1], ranks), 1.0 + 1e-9 + 1.0 / (experts / ranks));
        // A pure function: the same counters give the same plan (every rank plans on its own).
        EXPECT_TRUE(plan_expert_placement(layers, ranks, slots) == p);
    }
    EXPECT_THROW(plan_expert_placement(std::vector<std::vector<int64_t>>{{1, 2, 3}}, 2, 1), Error);  // no room
}

TEST(RoutingCounters, CountsAndResets) {
    RoutingCounters c(2, 4);
    c.add(1, std::vector<int32_t>{0, 3, 3, 7, -1});
    EXPECT_EQ(c.count(1, 3), 2);
    EXPECT_EQ(c.count(1, 0), 1);
    EXPECT_EQ(c.total(), 3);
    EXPECT_THROW(c.add(2, std::vector<int32_t>{0}), Error);
    c.reset();
    EXPECT_EQ(c.total(), 0);
}

TEST(DistOptions, ClearErrorsForImpossibleShapes) {
    DistOptions o;
    o.expert_parallel = 8;
    EXPECT_NO_THROW(validate_dist_options(o, 8));
    EXPECT_THROW(validate_dist_options(o, 2), Error);  // a missing GPU
    o.nnodes = 3;
    EXPECT_THROW(validate_dist_options(o), Error);
    o.nnodes = 2;
    EXPECT_THROW(validate_dist_options(o), Error);  // no master address
    o.master_addr = "10.0.0.1";
    EXPECT_NO_THROW(validate_dist_options(o, 4));
    o.node_rank = 2;
    EXPECT_THROW(validate_dist_options(o), Error);
    o.node_rank = 1;
    EXPECT_EQ(o.first_global_rank(), 4);
    ::setenv("NCCL_NVLS_ENABLE", "1", 1);
    prepare_nccl_environment(o);
    EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
    EXPECT_STREQ(std::getenv("NCCL_COMM_ID"), "10.0.0.1:29500");
    ::unsetenv("NCCL_COMM_ID");
}

}  // namespace
}  // namespace dsv4::dist
