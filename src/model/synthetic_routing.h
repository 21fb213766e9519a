// Skewed expert popularity for synthetic models (`--synthetic-routing-skew S` on the device-made presets,
// `dsv4 make-model --routing-skew S` for checkpoints). Real routers send far more tokens to some experts than to
// others, which is what an expert cache lives on; synthetic routers spread tokens evenly unless skewed here. In every
// layer each expert gets a popularity rank (a seeded permutation: every layer has its own hot experts), then
//  - learned routing: the router's selection bias is lowered by s * kZipfTemperature * ln(rank + 1). Were the router
//    scores Gumbel-distributed with that scale, top-1 selection would follow a Zipf law (probability proportional
//    to (rank + 1)^-s); the real scores (sqrt-softplus of logits of order one) are close enough that popularity falls
//    off steeply with rank as s grows (tests/unit/synthetic measures it through the model's own routing);
//  - hash routing: every token's k experts are drawn without replacement with probabilities proportional to
//    (rank + 1)^-s.
// s = 0 leaves a model exactly as it is without skew. Deterministic from (seed, layer).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace dsv4 {

inline constexpr double kZipfTemperature = 0.25;

// "S" (every layer) or "S0,S1,..." (one per layer); empty: no skew. Throws dsv4::Error on a negative or malformed
// value.
std::vector<double> parse_routing_skew(std::string_view text);
// The exponent of `layer`: 0 for an empty list; the single value; or the layer's. Throws when a per-layer list
// does not have num_layers entries.
double routing_skew_of(const std::vector<double>& skew, int layer, int num_layers);

// rank[e] = expert e's popularity rank in `layer` (0 = the most popular): a permutation of [0, experts).
std::vector<int> expert_popularity_ranks(int experts, uint64_t seed, int layer);
// What to add to the router's selection bias: -s * kZipfTemperature * ln(rank[e] + 1).
std::vector<float> zipf_bias_offsets(int experts, double s, uint64_t seed, int layer);
// A router selection bias for models made on the device: N(0, 0.1) (the unskewed synthetic bias's distribution)
// plus zipf_bias_offsets.
std::vector<float> zipf_router_bias(int experts, double s, uint64_t seed, int layer);
// A hash-routing table [vocab, k]: k distinct experts per token, drawn with probabilities proportional to
// (rank + 1)^-s.
std::vector<int64_t> zipf_expert_table(int64_t vocab, int k, int experts, double s, uint64_t seed, int layer);
// Each expert's expected share of the layer's routing, (rank + 1)^-s normalised to sum 1: exact for the hash table's
// draws (per position of a token's k), the Zipf law the bias offsets aim at for learned routing. What an expert
// tier's initial placement starts from.
std::vector<double> zipf_expected_shares(int experts, double s, uint64_t seed, int layer);
// The backbone layer a tensor name belongs to ("layers.7.ffn.gate.bias" -> 7), or -1.
int tensor_layer(std::string_view name);

}  // namespace dsv4
