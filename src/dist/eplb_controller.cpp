#include "dist/eplb_controller.h"

#include "core/error.h"
#include "dist/eplb.h"

namespace dsv4::dist {

EplbController::EplbController(ExpertParallelMoe& moe, DeepseekV4& model, ExpertLoader loader, EplbOptions options)
    : moe_(moe), model_(model), loader_(std::move(loader)), options_(options) {
    DSV4_CHECK(options_.interval_steps >= 1, "EPLB: interval of {} steps", options_.interval_steps);
    const ExpertPlacement& p = moe_.placement();
    if (options_.slots_per_rank == 0) options_.slots_per_rank = (p.experts + p.ranks - 1) / p.ranks + 1;
    DSV4_CHECK(static_cast<int64_t>(options_.slots_per_rank) * p.ranks >= p.experts,
               "EPLB: {} slots per rank x {} ranks cannot hold {} experts", options_.slots_per_rank, p.ranks,
               p.experts);
    DSV4_CHECK(loader_ != nullptr, "EPLB: no expert loader");
}

bool EplbController::after_step() {
    if (++steps_ % options_.interval_steps != 0) return false;
    return rebalance();
}

bool EplbController::rebalance() {
    RoutingCounters& counters = moe_.counters();
    std::vector<int64_t>& flat = counters.flat();
    // A host buffer: the loopback sums it in place, NCCL stages it through the device (nccl_communicator.h).
    moe_.communicator().all_reduce_sum(flat.data(), static_cast<int64_t>(flat.size()), CommDtype::kI64);
    const auto per_layer = counters.per_layer();
    counters.reset();
    const ExpertPlacement next = plan_expert_placement(per_layer, moe_.placement().ranks, options_.slots_per_rank);
    if (next == moe_.placement()) return false;
    apply(next);
    return true;
}

void EplbController::apply(const ExpertPlacement& next) {
    const int rank = moe_.communicator().rank();
    const ExpertPlacement& now = moe_.placement();
    for (size_t l = 0; l < next.layers.size(); ++l) {
        for (int e = 0; e < next.experts; ++e) {
            const bool had = now.layers[l].holds(rank, e), has = next.layers[l].holds(rank, e);
            if (had == has) continue;
            model_.set_routed_expert(static_cast<int>(l), e, has ? loader_(static_cast<int>(l), e) : ExpertWeights{});
            ++experts_moved_;
        }
    }
    moe_.set_placement(std::make_shared<const ExpertPlacement>(next));
    ++rebalances_;
}

}  // namespace dsv4::dist
