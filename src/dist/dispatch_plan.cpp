#include "dist/dispatch_plan.h"

#include "core/error.h"

namespace dsv4::dist {

DispatchPlan plan_dispatch(std::span<const int32_t> ids, int k, const LayerPlacement& layer, int rank, int ranks,
                           int64_t token_base) {
    DSV4_CHECK(k >= 1 && ids.size() % static_cast<size_t>(k) == 0, "dispatch: {} routing ids for top-{}", ids.size(),
               k);
    const auto pairs = static_cast<int64_t>(ids.size());
    const auto experts = static_cast<int32_t>(layer.replicas.size());
    std::vector<int32_t> dest(pairs);
    DispatchPlan plan;
    plan.send_counts.assign(ranks, 0);
    for (int64_t p = 0; p < pairs; ++p) {
        const int32_t e = ids[p];
        DSV4_CHECK(e >= 0 && e < experts, "dispatch: expert id {} is outside [0, {})", e, experts);
        dest[p] = choose_replica(layer, e, rank, token_base + p / k);
        ++plan.send_counts[dest[p]];
    }
    std::vector<int64_t> cursor(ranks, 0);
    for (int r = 1; r < ranks; ++r) cursor[r] = cursor[r - 1] + plan.send_counts[r - 1];
    plan.send_token.resize(pairs);
    plan.send_pair.resize(pairs);
    plan.send_expert.resize(pairs);
    plan.slot_of_pair.resize(pairs);
    for (int64_t p = 0; p < pairs; ++p) {
        const int64_t slot = cursor[dest[p]]++;
        plan.send_token[slot] = static_cast<int32_t>(token_base + p / k);
        plan.send_pair[slot] = static_cast<int32_t>(token_base * k + p);
        plan.send_expert[slot] = ids[p];
        plan.slot_of_pair[p] = static_cast<int32_t>(slot);
    }
    return plan;
}

}  // namespace dsv4::dist
