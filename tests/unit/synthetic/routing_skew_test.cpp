// Skewed routing in synthetic models (model/synthetic_routing.h): the knob's parsing and determinism, hash-routing
// tables, and the skew showing in the routing counts of the model's own router op with a synthetic router's bias.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <set>

#include "backend/backend.h"
#include "core/error.h"
#include "core/float_formats.h"
#include "model/flash_preset.h"
#include "model/synthetic_routing.h"

namespace dsv4 {
namespace {

TEST(RoutingSkew, ParsesOneValueOrOnePerLayer) {
    EXPECT_EQ(parse_routing_skew("1.5"), std::vector<double>{1.5});
    EXPECT_EQ(parse_routing_skew("0,0.5,2"), (std::vector<double>{0, 0.5, 2}));
    EXPECT_TRUE(parse_routing_skew("").empty());
    for (const char* bad : {"-1", "x", "1,", ",1", "1;2", "nan"}) EXPECT_THROW(parse_routing_skew(bad), Error) << bad;
    EXPECT_EQ(routing_skew_of({}, 3, 6), 0.0);
    EXPECT_EQ(routing_skew_of({1.2}, 3, 6), 1.2);
    EXPECT_EQ(routing_skew_of({0, 1, 2}, 2, 3), 2.0);
    EXPECT_THROW(routing_skew_of({0, 1}, 0, 3), Error);
    EXPECT_EQ(tensor_layer("layers.17.ffn.gate.bias"), 17);
    EXPECT_EQ(tensor_layer("mtp.0.ffn.gate.bias"), -1);
}

TEST(RoutingSkew, TablesAndRanksAreDeterministicPermutations) {
    const std::vector<int> rank = expert_popularity_ranks(64, 7, 3);
    EXPECT_EQ(std::set<int>(rank.begin(), rank.end()).size(), 64u);
    EXPECT_EQ(rank, expert_popularity_ranks(64, 7, 3));
    EXPECT_NE(rank, expert_popularity_ranks(64, 7, 4)) << "every layer has its own hot experts";
    const std::vector<int64_t> table = zipf_expert_table(1000, 6, 64, 1.0, 7, 3);
    EXPECT_EQ(table, zipf_expert_table(1000, 6, 64, 1.0, 7, 3));
    std::vector<int64_t> counts(64, 0);
    for (int64_t t = 0; t < 1000; ++t) {
        const std::set<int64_t> row(table.begin() + t * 6, table.begin() + (t + 1) * 6);
        EXPECT_EQ(row.size(), 6u) << "token " << t << ": experts must be distinct";
        for (int64_t e : row) ++counts[static_cast<size_t>(e)];
    }
    // The most popular expert (rank 0) is picked more often than the least popular one, by far.
    const auto hot = std::find(rank.begin(), rank.end(), 0) - rank.begin();
    const auto cold = std::find(rank.begin(), rank.end(), 63) - rank.begin();
    EXPECT_GT(counts[static_cast<size_t>(hot)], 5 * counts[static_cast<size_t>(cold)]);
}

// Routing counts of the model's own router op (the CPU backend's route) over `tokens` random hidden states
// (RMS-normalised states are N(0, 1) per element; router weights N(0, D^-1/2) as the synthetic models draw them), with
// the bias a synthetic model of this skew gets.
std::vector<int64_t> route_counts(double skew, int experts, int k, int tokens) {
    ModelConfig c = flash_preset_config("flash", 1, experts);
    c.n_experts_per_tok = k;
    const int64_t d = 256;
    std::mt19937_64 random(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<uint16_t> gate(static_cast<size_t>(experts * d));
    for (uint16_t& g : gate) g = encode_bf16(normal(random) / 16.0f);  // N(0, d^-1/2)
    std::vector<float> bias = zipf_router_bias(experts, skew, 9, 0);
    auto backend = make_cpu_backend(Numerics::kExact, 1);
    const std::array<int64_t, 2> gate_shape = {experts, d};
    const std::array<int64_t, 1> bias_shape = {experts};
    MoeWeights w;
    w.gate = backend->upload_linear(
        {reinterpret_cast<const uint8_t*>(gate.data()), DType::kBF16, gate_shape, gate.size() * 2}, nullptr,
        WeightFormat::kBF16, experts, d, 1, 1);
    w.bias = backend->upload_vector(
        {reinterpret_cast<const uint8_t*>(bias.data()), DType::kF32, bias_shape, bias.size() * 4});
    std::vector<float> h(static_cast<size_t>(tokens * d));
    for (float& x : h) x = normal(random);
    Tensor ht = backend->alloc(DType::kF32, {tokens, d});
    backend->from_host(ht, h.data());
    Tensor weights = backend->alloc(DType::kF32, {tokens, k}), ids = backend->alloc(DType::kI32, {tokens, k});
    backend->route(ht, w, c, RoutingType::kLearned, weights, ids);
    std::vector<int64_t> counts(static_cast<size_t>(experts), 0);
    for (int64_t i = 0; i < ids.numel(); ++i) ++counts[static_cast<size_t>(ids.i32()[i])];
    return counts;
}

// Share of the pairs the most popular quarter of the experts receive.
double top_quarter_share(std::vector<int64_t> counts) {
    std::sort(counts.begin(), counts.end(), std::greater<>());
    const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    const int64_t top = std::accumulate(counts.begin(), counts.begin() + counts.size() / 4, int64_t{0});
    return static_cast<double>(top) / static_cast<double>(std::max<int64_t>(total, 1));
}

// Share of the top quarter under an exact Zipf law of exponent s over `experts` ranks.
double zipf_top_quarter(double s, int experts) {
    double top = 0, all = 0;
    for (int r = 0; r < experts; ++r) (r < experts / 4 ? top : all) += std::pow(r + 1.0, -s);
    return top / (top + all);
}

TEST(RoutingSkew, ShowsInTheRoutersCounts) {
    // 64 experts, top-6, 2048 tokens. Unskewed learned routing is not flat (the N(0, 0.1) bias and the router rows'
    // norms favour some experts: measured 0.46 for the top quarter, where flat is 0.25); skew 1 comes close to a Zipf
    // law's share (0.71; measured 0.77) and skew 2 to its 0.97.
    const double even = top_quarter_share(route_counts(0.0, 64, 6, 2048));
    const double one = top_quarter_share(route_counts(1.0, 64, 6, 2048));
    const double two = top_quarter_share(route_counts(2.0, 64, 6, 2048));
    EXPECT_LT(even, 0.55);
    EXPECT_GT(one, even + 0.2);
    EXPECT_NEAR(one, zipf_top_quarter(1.0, 64), 0.1);
    EXPECT_NEAR(two, zipf_top_quarter(2.0, 64), 0.1);
    // Deterministic: the same seed, the same counts.
    EXPECT_EQ(route_counts(1.0, 64, 6, 256), route_counts(1.0, 64, 6, 256));
}

}  // namespace
}  // namespace dsv4
