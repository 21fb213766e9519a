// The expert tier's policy (dist/expert_cache.h), CPU only: placement from routing counters, what a step hits,
// fetches (and evicts) or computes on the host, rebalancing toward popular experts, and the hit rate it reaches on
// skewed routing (the synthetic models' Zipf tables) against even routing.
#include "dist/expert_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "model/synthetic_routing.h"

namespace dsv4::dist {
namespace {

ExpertCacheConfig config(int slots, int experts = 8) {
    ExpertCacheConfig c;
    c.layers = 2;
    c.experts = experts;
    c.slots = slots;
    c.rebalance_interval = 0;
    return c;
}

TEST(ExpertCache, PlacesTheMostRoutedExperts) {
    ExpertCache cache(config(3));
    const std::vector<std::vector<int64_t>> counts = {{5, 0, 9, 1, 9, 0, 0, 2}, {0, 0, 0, 0, 0, 0, 0, 0}};
    const auto fetches = cache.place(counts);
    ASSERT_EQ(fetches.size(), 2u);
    EXPECT_EQ(fetches[0], (std::vector<ExpertFetch>{{2, 0, -1}, {4, 1, -1}, {0, 2, -1}}));  // ties by id
    EXPECT_EQ(fetches[1], (std::vector<ExpertFetch>{{0, 0, -1}, {1, 1, -1}, {2, 2, -1}}));  // no counts: lowest ids
    EXPECT_EQ(cache.slot_of(0, 4), 1);
    EXPECT_EQ(cache.slot_of(0, 7), -1);
    EXPECT_EQ(cache.expert_in(0, 2), 0);
    EXPECT_THROW(cache.place(std::vector<std::vector<int64_t>>{{1, 2}}), Error);
}

// A loader that knows each expert's expected share (a synthetic skewed router) places one layer at a time.
TEST(ExpertCache, PlacesALayerByPopularity) {
    ExpertCache cache(config(2));
    cache.place({});
    const auto fetches = cache.place_layer(1, std::vector<double>{0.1, 0.5, 0.0, 0.9, 0.5, 0, 0, 0});
    EXPECT_EQ(fetches, (std::vector<ExpertFetch>{{3, 0, -1}, {1, 1, -1}}));  // ties by id; the old set is dropped
    EXPECT_EQ(cache.slot_of(1, 0), -1);
    EXPECT_EQ(cache.slot_of(0, 0), 0) << "the other layer keeps its placement";
    EXPECT_DOUBLE_EQ(cache.popularity(1, 3), 0.9);
    EXPECT_EQ(cache.stats().fetches, 2 * 2) << "the replaced placement of layer 1 is not counted";
    EXPECT_THROW(cache.place_layer(1, std::vector<double>{1.0, 2.0}), Error);
    EXPECT_THROW(cache.place_layer(0, std::vector<double>{-1, 0, 0, 0, 0, 0, 0, 0}), Error);
    EXPECT_THROW(cache.place_layer(0, std::vector<double>{std::nan(""), 0, 0, 0, 0, 0, 0, 0}), Error);
    EXPECT_THROW(cache.place_layer(2, std::vector<double>(8, 1.0)), Error);
}

// Steps that read host experts in place are counted on the device and observed between steps: hits and in-place
// pairs by residency, popularity as a planned step's, no fetch (rebalancing alone moves experts then).
TEST(ExpertCache, ObservedCountsAreHitsOrInPlacePairs) {
    ExpertCacheConfig c = config(2);
    c.rebalance_interval = 1;
    c.decay = 1.0;
    ExpertCache cache(c);
    cache.place({});  // experts 0 and 1 resident in both layers
    std::vector<int64_t> counts(2 * 8, 0);
    counts[0] = 3;      // layer 0, expert 0: resident
    counts[5] = 4;      // layer 0, expert 5: in host memory
    counts[8 + 7] = 6;  // layer 1, expert 7
    cache.observe(counts);
    const ExpertCacheStats& s = cache.stats();
    EXPECT_EQ(s.pairs, 13);
    EXPECT_EQ(s.hit_pairs, 3);
    EXPECT_EQ(s.in_place_pairs, 10);
    EXPECT_EQ(s.fetches, 4) << "only the placement's";
    EXPECT_DOUBLE_EQ(cache.popularity(0, 5), 4.0);
    // The next rebalance moves the popular in-place experts into the slots (never evicting a more popular one).
    const auto moves = cache.end_step();
    ASSERT_EQ(moves.size(), 2u);
    EXPECT_EQ(moves[0], (std::vector<ExpertFetch>{{5, 1, 1}}));
    EXPECT_EQ(moves[1], (std::vector<ExpertFetch>{{7, 1, 1}}));  // 0 stays: the next most popular (tie by id)
    EXPECT_THROW(cache.observe(std::vector<int64_t>(3, 0)), Error);
    counts.assign(16, 0);
    counts[1] = -1;
    EXPECT_THROW(cache.observe(counts), Error);
}

TEST(ExpertCache, StepHitsFetchesAndFallsBackToTheHost) {
    ExpertCache cache(config(2));
    cache.place({});  // experts 0 and 1 resident in both layers
    // Expert 0 hits; 5 is fetched into the slot of 1 (not used by this step).
    LayerStepPlan p = cache.plan_step(0, std::vector<int32_t>{0, 5, 0, 5, 5});
    EXPECT_EQ(p.resident, std::vector<int>{0});
    EXPECT_EQ(p.fetches, (std::vector<ExpertFetch>{{5, 1, 1}}));
    EXPECT_TRUE(p.host.empty());
    // Both slots are needed by this step (0 and 5), so 3 and 6 are computed on the host, whatever their counts.
    p = cache.plan_step(0, std::vector<int32_t>{0, 5, 3, 3, 6});
    EXPECT_EQ(p.resident, (std::vector<int>{0, 5}));
    EXPECT_TRUE(p.fetches.empty());
    EXPECT_EQ(p.host, (std::vector<int>{3, 6}));
    const ExpertCacheStats& s = cache.stats();
    EXPECT_EQ(s.pairs, 10);
    EXPECT_EQ(s.hit_pairs, 2 + 2);  // step 1: two pairs of 0; step 2: 0 and 5
    EXPECT_EQ(s.fetched_pairs, 3);
    EXPECT_EQ(s.host_pairs, 3);
    EXPECT_THROW(cache.plan_step(0, std::vector<int32_t>{8}), Error);
    EXPECT_THROW(cache.plan_step(2, std::vector<int32_t>{0}), Error);
}

TEST(ExpertCache, FewPairsAreComputedOnTheHostAndVictimsAreUnpopular) {
    ExpertCacheConfig c = config(2);
    c.min_pairs_to_fetch = 3;
    ExpertCache cache(c);
    cache.place({});
    cache.plan_step(1, std::vector<int32_t>{0, 0, 0, 0});  // expert 0 popular, 1 not
    LayerStepPlan p = cache.plan_step(1, std::vector<int32_t>{4, 4});
    EXPECT_EQ(p.host, std::vector<int>{4}) << "2 pairs: below min_pairs_to_fetch";
    p = cache.plan_step(1, std::vector<int32_t>{6, 6, 6});
    EXPECT_EQ(p.fetches, (std::vector<ExpertFetch>{{6, 1, 1}})) << "the least popular resident expert is evicted";
    EXPECT_EQ(cache.slot_of(1, 0), 0);
}

TEST(ExpertCache, RebalancesTowardPopularExpertsBetweenSteps) {
    ExpertCacheConfig c = config(2);
    c.rebalance_interval = 4;
    c.max_moves = 1;
    c.min_pairs_to_fetch = 1000;  // steps never fetch: only rebalancing moves experts
    ExpertCache cache(c);
    cache.place({});
    for (int step = 0; step < 3; ++step) {
        cache.plan_step(0, std::vector<int32_t>{6, 6, 7, 7, 7, 0});
        EXPECT_TRUE(cache.end_step().empty()) << "not at the interval yet";
    }
    cache.plan_step(0, std::vector<int32_t>{6, 7});
    const auto moves = cache.end_step();
    ASSERT_EQ(moves.size(), 2u);
    ASSERT_EQ(moves[0].size(), 1u) << "at most max_moves per layer";
    EXPECT_EQ(moves[0][0].expert, 7);  // the most popular first
    EXPECT_EQ(moves[0][0].evicted, 1) << "1 was never used; 0 was";
    EXPECT_TRUE(moves[1].empty());
    EXPECT_LT(cache.popularity(0, 7), 13.0) << "popularity decays";
    for (int step = 0; step < 4; ++step) {
        cache.plan_step(0, std::vector<int32_t>{6, 6, 7, 7});
        cache.end_step();
    }
    EXPECT_GE(cache.slot_of(0, 6), 0);
    EXPECT_GE(cache.slot_of(0, 7), 0);
    EXPECT_EQ(cache.stats().rebalance_fetches, 2);
}

// Hit rate on a stream of decode steps routed by a Zipf table (model/synthetic_routing.h), a quarter of the experts
// resident: skewed routing is what the cache lives on; even routing hits about slots / experts.
double hit_rate(double skew) {
    ExpertCacheConfig c;
    c.layers = 1;
    c.experts = 64;
    c.slots = 16;
    c.rebalance_interval = 16;
    c.min_pairs_to_fetch = 1000;  // host compute for misses: the hit rate is the resident set's alone
    ExpertCache cache(c);
    cache.place({});
    const int k = 6;
    const std::vector<int64_t> table = zipf_expert_table(4096, k, 64, skew, 3, 0);
    for (int step = 0; step < 256; ++step) {
        std::vector<int32_t> ids;
        for (int b = 0; b < 8; ++b) {  // batch 8: 8 tokens x 6 experts
            const int64_t token = (step * 8 + b) * 2654435761 % 4096;
            for (int j = 0; j < k; ++j) ids.push_back(static_cast<int32_t>(table[token * k + j]));
        }
        cache.plan_step(0, ids);
        cache.end_step();
    }
    return cache.stats().hit_rate();
}

TEST(ExpertCache, SkewedRoutingHitsFarMoreThanEvenRouting) {
    const double even = hit_rate(0.0), skewed = hit_rate(1.2);
    EXPECT_NEAR(even, 0.25, 0.08);
    EXPECT_GT(skewed, 0.6);
}

}  // namespace
}  // namespace dsv4::dist
