#include "dist/eplb.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace dsv4::dist {
namespace {

// Copies per expert: one each, then the spare slots to the largest load per copy (ties: the lower expert id).
std::vector<int> copies_per_expert(std::span<const int64_t> load, int ranks, int slots) {
    const int experts = static_cast<int>(load.size());
    std::vector<int> copies(experts, 1);
    for (int spare = slots - experts; spare > 0; --spare) {
        int best = -1;
        for (int e = 0; e < experts; ++e) {
            if (copies[e] >= ranks) continue;
            // load[e] / copies[e] > load[best] / copies[best], compared without division
            if (best < 0 || load[e] * copies[best] > load[best] * copies[e]) best = e;
        }
        if (best < 0 || load[best] == 0) break;  // every expert on every rank, or nothing left worth copying
        ++copies[best];
    }
    return copies;
}

LayerPlacement plan_layer(std::span<const int64_t> load, int ranks, int slots_per_rank) {
    const int experts = static_cast<int>(load.size());
    const std::vector<int> copies = copies_per_expert(load, ranks, ranks * slots_per_rank);
    std::vector<int> order(experts);
    std::iota(order.begin(), order.end(), 0);
    // Replicated experts first, then by load per copy, heaviest first; ties by expert id.
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        if ((copies[a] > 1) != (copies[b] > 1)) return copies[a] > 1;
        return load[a] * copies[b] > load[b] * copies[a];
    });
    std::vector<double> rank_load(ranks, 0.0);
    std::vector<int> free_slots(ranks, slots_per_rank);
    LayerPlacement out;
    out.replicas.assign(experts, {});
    for (int e : order) {
        const double share = static_cast<double>(load[e]) / copies[e];
        for (int c = 0; c < copies[e]; ++c) {
            int best = -1;
            for (int r = 0; r < ranks; ++r) {
                if (free_slots[r] == 0 ||
                    std::find(out.replicas[e].begin(), out.replicas[e].end(), r) != out.replicas[e].end()) {
                    continue;
                }
                if (best < 0 || rank_load[r] < rank_load[best]) best = r;
            }
            if (best < 0) break;  // no rank left for another copy: the expert keeps the copies it has
            out.replicas[e].push_back(best);
            --free_slots[best];
            rank_load[best] += share;
        }
        DSV4_CHECK(!out.replicas[e].empty(), "EPLB: no free slot left for expert {} ({} ranks x {} slots)", e, ranks,
                   slots_per_rank);
        std::sort(out.replicas[e].begin(), out.replicas[e].end());
    }
    return out;
}

}  // namespace

ExpertPlacement plan_expert_placement(std::span<const std::vector<int64_t>> counts, int ranks, int slots_per_rank) {
    DSV4_CHECK(!counts.empty() && ranks >= 1, "EPLB: {} layers of counters over {} ranks", counts.size(), ranks);
    const int experts = static_cast<int>(counts.front().size());
    DSV4_CHECK(static_cast<int64_t>(slots_per_rank) * ranks >= experts,
               "EPLB: {} ranks x {} expert slots cannot hold {} experts", ranks, slots_per_rank, experts);
    ExpertPlacement p{ranks, experts, {}};
    for (const auto& layer : counts) {
        DSV4_CHECK(static_cast<int>(layer.size()) == experts, "EPLB: a layer counts {} experts, another {}",
                   layer.size(), experts);
        for (int64_t c : layer) DSV4_CHECK(c >= 0, "EPLB: negative routing count {}", c);
        p.layers.push_back(plan_layer(layer, ranks, slots_per_rank));
    }
    p.validate();
    return p;
}

std::vector<double> rank_loads(std::span<const int64_t> counts, const LayerPlacement& layer, int ranks) {
    std::vector<double> load(ranks, 0.0);
    for (size_t e = 0; e < counts.size(); ++e) {
        const auto& r = layer.replicas[e];
        for (int rank : r) load[rank] += static_cast<double>(counts[e]) / static_cast<double>(r.size());
    }
    return load;
}

double load_imbalance(std::span<const int64_t> counts, const LayerPlacement& layer, int ranks) {
    const std::vector<double> load = rank_loads(counts, layer, ranks);
    const double mean = std::accumulate(load.begin(), load.end(), 0.0) / ranks;
    if (mean == 0.0) return 1.0;
    return *std::max_element(load.begin(), load.end()) / mean;
}

}  // namespace dsv4::dist
