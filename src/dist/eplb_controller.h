// EplbController: EPLB while serving. Every rank calls after_step() between steps (all ranks at the same step, as
// they run in lockstep); every `interval_steps` it sums the routing counters over the ranks (one all-reduce), plans
// a placement from them (eplb.h: the same plan on every rank), and when it differs from the current one applies
// it before the next step: each rank uploads the experts it gains, drops those it loses and switches its dispatcher.
// Sequences and their state are untouched (attention is data parallel), so no request is dropped or recomputed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "backend/weights.h"
#include "dist/expert_parallel_moe.h"
#include "model/deepseek_v4.h"

namespace dsv4::dist {

// Uploads one routed expert of one layer on this rank's backend (model/weights_loader.h: load_expert_weights).
using ExpertLoader = std::function<ExpertWeights(int layer, int expert)>;

struct EplbOptions {
    int64_t interval_steps = 1000;
    int slots_per_rank = 0;  // experts a rank may hold per layer (0: ceil(experts / ranks) + 1)
};

class EplbController {
  public:
    EplbController(ExpertParallelMoe& moe, DeepseekV4& model, ExpertLoader loader, EplbOptions options = {});

    // Returns true when a new placement was applied.
    bool after_step();
    // Plans from the counters now and applies the plan when it differs (what after_step does at an interval).
    bool rebalance();
    int64_t rebalances() const { return rebalances_; }
    int64_t experts_moved() const { return experts_moved_; }

  private:
    void apply(const ExpertPlacement& next);

    ExpertParallelMoe& moe_;
    DeepseekV4& model_;
    ExpertLoader loader_;
    EplbOptions options_;
    int64_t steps_ = 0;
    int64_t rebalances_ = 0;
    int64_t experts_moved_ = 0;
};

}  // namespace dsv4::dist
