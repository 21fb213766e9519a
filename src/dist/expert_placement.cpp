#include "dist/expert_placement.h"

#include <algorithm>

#include "core/error.h"

namespace dsv4::dist {

bool LayerPlacement::holds(int rank, int expert) const {
    const auto& r = replicas[expert];
    return std::binary_search(r.begin(), r.end(), rank);
}

std::vector<int> LayerPlacement::experts_of(int rank) const {
    std::vector<int> out;
    for (int e = 0; e < static_cast<int>(replicas.size()); ++e) {
        if (holds(rank, e)) out.push_back(e);
    }
    return out;
}

void ExpertPlacement::validate() const {
    DSV4_CHECK(ranks >= 1 && experts >= 1, "expert placement: {} ranks, {} experts", ranks, experts);
    for (size_t l = 0; l < layers.size(); ++l) {
        const auto& rep = layers[l].replicas;
        DSV4_CHECK(static_cast<int>(rep.size()) == experts, "expert placement: layer {} places {} experts, not {}", l,
                   rep.size(), experts);
        for (int e = 0; e < experts; ++e) {
            const auto& r = rep[e];
            DSV4_CHECK(!r.empty() && static_cast<int>(r.size()) <= ranks,
                       "expert placement: layer {} expert {} has {} copies (1..{} allowed)", l, e, r.size(), ranks);
            DSV4_CHECK(std::is_sorted(r.begin(), r.end()) && std::adjacent_find(r.begin(), r.end()) == r.end(),
                       "expert placement: layer {} expert {}: ranks not ascending and distinct", l, e);
            DSV4_CHECK(r.front() >= 0 && r.back() < ranks, "expert placement: layer {} expert {} on rank {} of {}", l,
                       e, r.back(), ranks);
        }
    }
}

ExpertResidency ExpertPlacement::residency(int rank) const {
    ExpertPlacement copy = *this;
    return [copy, rank](int layer, int expert) {
        return layer < static_cast<int>(copy.layers.size()) && copy.layers[layer].holds(rank, expert);
    };
}

int ExpertPlacement::max_experts_per_rank() const {
    int most = 0;
    for (const auto& l : layers) {
        for (int r = 0; r < ranks; ++r) most = std::max(most, static_cast<int>(l.experts_of(r).size()));
    }
    return most;
}

int64_t ExpertPlacement::redundant_copies() const {
    int64_t extra = 0;
    for (const auto& l : layers) {
        for (const auto& r : l.replicas) extra += static_cast<int64_t>(r.size()) - 1;
    }
    return extra;
}

bool ExpertPlacement::operator==(const ExpertPlacement& other) const {
    if (ranks != other.ranks || experts != other.experts || layers.size() != other.layers.size()) return false;
    for (size_t l = 0; l < layers.size(); ++l) {
        if (layers[l].replicas != other.layers[l].replicas) return false;
    }
    return true;
}

namespace {

template <typename RankOf>
ExpertPlacement single_copy(int layers, int experts, int ranks, RankOf rank_of) {
    DSV4_CHECK(ranks >= 1 && experts >= ranks,
               "expert parallelism over {} ranks needs at least as many experts ({} in the model)", ranks, experts);
    ExpertPlacement p{ranks, experts, {}};
    LayerPlacement layer;
    for (int e = 0; e < experts; ++e) layer.replicas.push_back({rank_of(e)});
    p.layers.assign(layers, layer);
    return p;
}

}  // namespace

ExpertPlacement contiguous_placement(int layers, int experts, int ranks) {
    return single_copy(layers, experts, ranks,
                       [&](int e) { return static_cast<int>(static_cast<int64_t>(e) * ranks / experts); });
}

ExpertPlacement strided_placement(int layers, int experts, int ranks) {
    return single_copy(layers, experts, ranks, [&](int e) { return e % ranks; });
}

ExpertPlacement replicated_placement(int layers, int experts, int ranks) {
    DSV4_CHECK(ranks >= 1 && experts >= 1, "replicated placement: {} ranks, {} experts", ranks, experts);
    ExpertPlacement p{ranks, experts, {}};
    LayerPlacement layer;
    std::vector<int> all(ranks);
    for (int r = 0; r < ranks; ++r) all[r] = r;
    layer.replicas.assign(experts, all);
    p.layers.assign(layers, layer);
    return p;
}

int choose_replica(const LayerPlacement& layer, int expert, int origin, int64_t token) {
    const auto& r = layer.replicas[expert];
    if (std::binary_search(r.begin(), r.end(), origin)) return origin;
    return r[static_cast<size_t>((token + origin) % static_cast<int64_t>(r.size()))];
}

}  // namespace dsv4::dist
