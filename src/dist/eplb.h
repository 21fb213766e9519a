// EPLB: expert placement and replication from routing counters, a pure function (same counters, same plan on every
// rank, so the ranks agree without exchanging plans). Per layer: every expert gets one copy, and the spare slots
// (ranks * slots_per_rank - experts) go, one at a time, to the expert with the most load per copy (DeepSeek's
// EPLB idea); then experts with several copies are placed first, each copy on the least-loaded rank that has a free
// slot and no copy yet, and single experts after them, heaviest first (longest-processing-time packing). A rank's
// load counts load / copies for each expert it holds (the dispatcher spreads tokens over the copies).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dist/expert_placement.h"

namespace dsv4::dist {

// counts[layer][expert]: routed pairs in the window (RoutingCounters::per_layer, summed over the ranks).
// slots_per_rank >= ceil(experts / ranks); slots beyond that hold redundant copies.
ExpertPlacement plan_expert_placement(std::span<const std::vector<int64_t>> counts, int ranks, int slots_per_rank);

// Expected pairs per rank of one layer under a placement (load / copies per held expert).
std::vector<double> rank_loads(std::span<const int64_t> counts, const LayerPlacement& layer, int ranks);
// max rank load / mean rank load of one layer (1 = perfect balance; 0 loads give 1).
double load_imbalance(std::span<const int64_t> counts, const LayerPlacement& layer, int ranks);

}  // namespace dsv4::dist
