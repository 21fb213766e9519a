// Expert placement: which ranks hold which routed experts, per MoE layer (each rank holds about experts / ranks of
// them plus redundant copies of hot experts, chosen by EPLB: eplb.h). A pure value: the planner produces it, the
// weight loaders read each rank's residency from it, the dispatcher reads where to send each (token, expert) pair.
#pragma once

#include <cstdint>
#include <vector>

#include "model/expert_residency.h"

namespace dsv4::dist {

struct LayerPlacement {
    std::vector<std::vector<int>> replicas;  // [expert] -> the ranks holding it, ascending, at least one

    bool holds(int rank, int expert) const;
    std::vector<int> experts_of(int rank) const;
};

struct ExpertPlacement {
    int ranks = 0;
    int experts = 0;
    std::vector<LayerPlacement> layers;

    // Throws unless every layer has `experts` entries, each with 1..ranks distinct ranks in [0, ranks).
    void validate() const;
    // The experts rank `rank` must hold (for the weight loaders).
    ExpertResidency residency(int rank) const;
    // The most experts any rank holds in any layer (its weight memory).
    int max_experts_per_rank() const;
    // Copies of experts beyond one each, summed over the layers.
    int64_t redundant_copies() const;
    bool operator==(const ExpertPlacement& other) const;
};

// Expert e on rank floor(e * ranks / experts): contiguous blocks of experts / ranks (the first ranks take one more
// when it does not divide), no replicas.
ExpertPlacement contiguous_placement(int layers, int experts, int ranks);
// Expert e on rank e % ranks.
ExpertPlacement strided_placement(int layers, int experts, int ranks);
// Every expert on every rank (data parallel experts: no transfer at all).
ExpertPlacement replicated_placement(int layers, int experts, int ranks);

// The rank that computes a pair of `expert` for token `token` of rank `origin`: the origin itself when it holds the
// expert (no transfer), else one of the replicas, spread by token (deterministic).
int choose_replica(const LayerPlacement& layer, int expert, int origin, int64_t token);

}  // namespace dsv4::dist
