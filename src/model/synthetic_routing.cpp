#include "model/synthetic_routing.h"

#include <charconv>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

#include "core/error.h"

namespace dsv4 {
namespace {

// std::mt19937_64's output is fixed by the standard (unlike the distributions'), so the draws are the same everywhere.
std::mt19937_64 layer_random(uint64_t seed, int layer, uint64_t stream) {
    return std::mt19937_64(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(layer) * 0xD1B54A32D192ED03ull +
                           stream);
}

double uniform(std::mt19937_64& random) {
    return static_cast<double>(random() >> 11) * 0x1p-53;
}

}  // namespace

std::vector<double> parse_routing_skew(std::string_view text) {
    std::vector<double> out;
    if (text.empty()) return out;
    size_t start = 0;
    while (start <= text.size()) {
        const size_t comma = std::min(text.find(',', start), text.size());
        const std::string item(text.substr(start, comma - start));
        double value = 0;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
        DSV4_CHECK(ec == std::errc() && end == item.data() + item.size() && !item.empty() && value >= 0 &&
                       std::isfinite(value),
                   "routing skew '{}': '{}' is not a Zipf exponent >= 0 (give S, or S0,S1,... one per layer)", text,
                   item);
        out.push_back(value);
        start = comma + 1;
    }
    return out;
}

double routing_skew_of(const std::vector<double>& skew, int layer, int num_layers) {
    if (skew.empty()) return 0.0;
    if (skew.size() == 1) return skew[0];
    DSV4_CHECK(static_cast<int>(skew.size()) == num_layers,
               "routing skew: {} values for a {}-layer model (give one, or one per layer)", skew.size(), num_layers);
    return layer >= 0 && layer < num_layers ? skew[static_cast<size_t>(layer)] : 0.0;
}

std::vector<int> expert_popularity_ranks(int experts, uint64_t seed, int layer) {
    std::vector<int> order(static_cast<size_t>(experts));
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 random = layer_random(seed, layer, 1);
    for (int i = experts - 1; i > 0; --i) std::swap(order[i], order[random() % static_cast<uint64_t>(i + 1)]);
    std::vector<int> rank(static_cast<size_t>(experts));
    for (int r = 0; r < experts; ++r) rank[order[r]] = r;
    return rank;
}

std::vector<float> zipf_bias_offsets(int experts, double s, uint64_t seed, int layer) {
    const std::vector<int> rank = expert_popularity_ranks(experts, seed, layer);
    std::vector<float> offsets(static_cast<size_t>(experts));
    for (int e = 0; e < experts; ++e) offsets[e] = static_cast<float>(-s * kZipfTemperature * std::log(rank[e] + 1.0));
    return offsets;
}

std::vector<float> zipf_router_bias(int experts, double s, uint64_t seed, int layer) {
    std::vector<float> bias = zipf_bias_offsets(experts, s, seed, layer);
    std::mt19937_64 random = layer_random(seed, layer, 3);
    for (float& b : bias) {  // Box-Muller, one normal per draw
        const double u1 = 1.0 - uniform(random), u2 = uniform(random);
        b += static_cast<float>(0.1 * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.141592653589793 * u2));
    }
    return bias;
}

std::vector<double> zipf_expected_shares(int experts, double s, uint64_t seed, int layer) {
    DSV4_CHECK(experts > 0 && s >= 0, "zipf expected shares: {} experts, exponent {}", experts, s);
    const std::vector<int> rank = expert_popularity_ranks(experts, seed, layer);
    std::vector<double> share(static_cast<size_t>(experts));
    for (int e = 0; e < experts; ++e) share[e] = std::pow(rank[e] + 1.0, -s);
    const double total = std::accumulate(share.begin(), share.end(), 0.0);
    for (double& v : share) v /= total;
    return share;
}

std::vector<int64_t> zipf_expert_table(int64_t vocab, int k, int experts, double s, uint64_t seed, int layer) {
    DSV4_CHECK(k >= 1 && k <= experts && s >= 0, "zipf expert table: k = {} of {} experts, exponent {}", k, experts, s);
    const std::vector<int> rank = expert_popularity_ranks(experts, seed, layer);
    std::vector<double> weight(static_cast<size_t>(experts));
    for (int e = 0; e < experts; ++e) weight[e] = std::pow(rank[e] + 1.0, -s);
    std::mt19937_64 random = layer_random(seed, layer, 2);
    std::vector<int64_t> table(static_cast<size_t>(vocab * k));
    std::vector<double> w;
    for (int64_t t = 0; t < vocab; ++t) {
        w = weight;
        for (int j = 0; j < k; ++j) {  // without replacement: a drawn expert's weight drops to 0
            double u = uniform(random) * std::accumulate(w.begin(), w.end(), 0.0);
            int e = 0;
            while (e + 1 < experts && (u >= w[e] || w[e] == 0.0)) u -= w[e++];
            while (w[e] == 0.0) e = (e + 1) % experts;  // rounding at the end of the range
            table[static_cast<size_t>(t * k + j)] = e;
            w[e] = 0.0;
        }
    }
    return table;
}

int tensor_layer(std::string_view name) {
    constexpr std::string_view prefix = "layers.";
    if (!name.starts_with(prefix)) return -1;
    int layer = -1;
    const auto [end, ec] = std::from_chars(name.data() + prefix.size(), name.data() + name.size(), layer);
    return ec == std::errc() && end < name.data() + name.size() && *end == '.' ? layer : -1;
}

}  // namespace dsv4
