#include "dist/expert_cache.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace dsv4::dist {

ExpertCache::ExpertCache(const ExpertCacheConfig& c)
    : config_(c),
      slot_expert_(static_cast<size_t>(c.layers) * std::max(c.slots, 0), -1),
      expert_slot_(static_cast<size_t>(c.layers) * std::max(c.experts, 0), -1),
      score_(static_cast<size_t>(c.layers) * std::max(c.experts, 0), 0.0),
      last_used_(static_cast<size_t>(c.layers) * std::max(c.slots, 0), -1) {
    DSV4_CHECK(c.layers > 0 && c.experts > 0 && c.slots >= 0 && c.slots <= c.experts,
               "expert cache: {} slots for {} experts in {} layers", c.slots, c.experts, c.layers);
    DSV4_CHECK(c.decay > 0.0 && c.decay <= 1.0 && c.rebalance_interval >= 0 && c.max_moves >= 0,
               "expert cache: decay {} must be in (0, 1], interval and moves >= 0", c.decay);
}

int ExpertCache::slot_of(int layer, int expert) const {
    return expert_slot_[index(layer, expert)];
}

int ExpertCache::expert_in(int layer, int slot) const {
    return slot_expert_[static_cast<size_t>(layer) * config_.slots + slot];
}

ExpertFetch ExpertCache::install(int layer, int expert, int slot) {
    const size_t at = static_cast<size_t>(layer) * config_.slots + slot;
    ExpertFetch f{expert, slot, slot_expert_[at]};
    if (f.evicted >= 0) expert_slot_[index(layer, f.evicted)] = -1;
    slot_expert_[at] = expert;
    expert_slot_[index(layer, expert)] = slot;
    last_used_[at] = step_;
    ++stats_.fetches;
    return f;
}

int ExpertCache::victim(int layer, const std::vector<bool>& keep) const {
    int best = -1;
    for (int s = 0; s < config_.slots; ++s) {
        const int e = expert_in(layer, s);
        if (e < 0) return s;
        if (keep[static_cast<size_t>(e)]) continue;
        if (best < 0) {
            best = s;
            continue;
        }
        const int b = expert_in(layer, best);
        const double se = popularity(layer, e), sb = popularity(layer, b);
        const int64_t ue = last_used_[static_cast<size_t>(layer) * config_.slots + s];
        const int64_t ub = last_used_[static_cast<size_t>(layer) * config_.slots + best];
        if (se < sb || (se == sb && ue < ub)) best = s;
    }
    return best;
}

std::vector<std::vector<ExpertFetch>> ExpertCache::place(std::span<const std::vector<int64_t>> counts) {
    DSV4_CHECK(counts.empty() || static_cast<int>(counts.size()) == config_.layers,
               "expert cache: counts for {} layers, the model has {}", counts.size(), config_.layers);
    std::vector<std::vector<ExpertFetch>> out(static_cast<size_t>(config_.layers));
    for (int l = 0; l < config_.layers; ++l) {
        std::vector<double> popularity(static_cast<size_t>(config_.experts), 0.0);
        if (!counts.empty()) {
            const std::vector<int64_t>& c = counts[static_cast<size_t>(l)];
            DSV4_CHECK(static_cast<int>(c.size()) == config_.experts, "expert cache: layer {} has {} counts, not {}", l,
                       c.size(), config_.experts);
            std::copy(c.begin(), c.end(), popularity.begin());
        }
        out[l] = place_layer(l, popularity);
    }
    return out;
}

std::vector<ExpertFetch> ExpertCache::place_layer(int layer, std::span<const double> popularity) {
    DSV4_CHECK(layer >= 0 && layer < config_.layers, "expert cache: layer {} is outside [0, {})", layer,
               config_.layers);
    DSV4_CHECK(static_cast<int>(popularity.size()) == config_.experts,
               "expert cache: {} popularity values for layer {} of {} experts", popularity.size(), layer,
               config_.experts);
    for (int s = 0; s < config_.slots; ++s) {
        const size_t at = static_cast<size_t>(layer) * config_.slots + s;
        if (slot_expert_[at] < 0) continue;
        expert_slot_[index(layer, slot_expert_[at])] = -1;
        slot_expert_[at] = -1;
        --stats_.fetches;  // a placement replaced before it was carried out: its installs never became fetches
    }
    std::vector<int> order(static_cast<size_t>(config_.experts));
    std::iota(order.begin(), order.end(), 0);
    for (int e = 0; e < config_.experts; ++e) {
        DSV4_CHECK(std::isfinite(popularity[e]) && popularity[e] >= 0.0,
                   "expert cache: popularity {} of expert {} in layer {} is not a count", popularity[e], e, layer);
        score_[index(layer, e)] = popularity[e];
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return popularity[a] > popularity[b]; });
    std::vector<ExpertFetch> out;
    for (int s = 0; s < config_.slots; ++s) out.push_back(install(layer, order[s], s));
    return out;
}

void ExpertCache::observe(std::span<const int64_t> counts) {
    DSV4_CHECK(static_cast<int64_t>(counts.size()) == int64_t{config_.layers} * config_.experts,
               "expert cache: {} pair counts for {} layers x {} experts", counts.size(), config_.layers,
               config_.experts);
    for (int l = 0; l < config_.layers; ++l) {
        for (int e = 0; e < config_.experts; ++e) {
            const int64_t pairs = counts[index(l, e)];
            if (pairs == 0) continue;
            DSV4_CHECK(pairs > 0, "expert cache: {} pairs counted for expert {} of layer {}", pairs, e, l);
            score_[index(l, e)] += static_cast<double>(pairs);
            stats_.pairs += pairs;
            const int slot = slot_of(l, e);
            if (slot < 0) {
                stats_.in_place_pairs += pairs;
                continue;
            }
            stats_.hit_pairs += pairs;
            last_used_[static_cast<size_t>(l) * config_.slots + slot] = step_;
        }
    }
}

LayerStepPlan ExpertCache::plan_step(int layer, std::span<const int32_t> ids) {
    DSV4_CHECK(layer >= 0 && layer < config_.layers, "expert cache: layer {} is outside [0, {})", layer,
               config_.layers);
    std::vector<int64_t> pairs(static_cast<size_t>(config_.experts), 0);
    for (int32_t e : ids) {
        DSV4_CHECK(e >= 0 && e < config_.experts, "expert cache: routed expert {} is outside [0, {})", e,
                   config_.experts);
        ++pairs[static_cast<size_t>(e)];
    }
    LayerStepPlan plan;
    std::vector<int> missing;
    std::vector<bool> used(static_cast<size_t>(config_.experts), false);
    for (int e = 0; e < config_.experts; ++e) {
        if (pairs[e] == 0) continue;
        used[e] = true;
        score_[index(layer, e)] += static_cast<double>(pairs[e]);
        const int slot = slot_of(layer, e);
        if (slot >= 0) {
            plan.resident.push_back(e);
            last_used_[static_cast<size_t>(layer) * config_.slots + slot] = step_;
            stats_.hit_pairs += pairs[e];
        } else {
            missing.push_back(e);
        }
    }
    // The most used missing experts claim the evictable slots first.
    std::stable_sort(missing.begin(), missing.end(), [&](int a, int b) { return pairs[a] > pairs[b]; });
    for (int e : missing) {
        const int slot = pairs[e] >= config_.min_pairs_to_fetch ? victim(layer, used) : -1;
        if (slot < 0) {
            plan.host.push_back(e);
            stats_.host_pairs += pairs[e];
            continue;
        }
        plan.fetches.push_back(install(layer, e, slot));
        stats_.fetched_pairs += pairs[e];
    }
    stats_.pairs += static_cast<int64_t>(ids.size());
    return plan;
}

std::vector<ExpertFetch> ExpertCache::rebalance_layer(int layer) {
    std::vector<int> order(static_cast<size_t>(config_.experts));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return popularity(layer, a) > popularity(layer, b); });
    std::vector<bool> target(static_cast<size_t>(config_.experts), false);
    for (int s = 0; s < config_.slots; ++s) target[order[s]] = true;
    std::vector<ExpertFetch> moves;
    for (int s = 0; s < config_.slots && static_cast<int>(moves.size()) < config_.max_moves; ++s) {
        const int e = order[s];
        if (slot_of(layer, e) >= 0) continue;
        const int slot = victim(layer, target);  // never evicts another target expert
        if (slot < 0) break;
        moves.push_back(install(layer, e, slot));
        ++stats_.rebalance_fetches;
    }
    return moves;
}

std::vector<std::vector<ExpertFetch>> ExpertCache::end_step() {
    ++step_;
    std::vector<std::vector<ExpertFetch>> out;
    if (config_.rebalance_interval == 0 || step_ % config_.rebalance_interval != 0) return out;
    out.resize(static_cast<size_t>(config_.layers));
    for (int l = 0; l < config_.layers; ++l) out[l] = rebalance_layer(l);
    for (double& s : score_) s *= config_.decay;
    return out;
}

}  // namespace dsv4::dist
