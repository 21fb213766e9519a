// ModelRunner: carries out a scheduled step on the model. It applies the step's state ops to the backend, flattens
// the scheduled sequences into one StepBatch (tokens, positions, slots, block tables, the rows whose logits are
// wanted), runs the step through its StepGraphs (eager, recorded or replayed: runtime/step_graphs.h), and samples
// the next token of every sequence that reached its last known token (src/sample), n > 1 completions from the same
// row. The batch is passed explicitly; no global context.
#pragma once

#include <functional>
#include <span>

#include "backend/backend.h"
#include "kv/kv_tiers.h"
#include "kv/state_ops.h"
#include "model/deepseek_v4.h"
#include "runtime/step_graphs.h"
#include "sched/scheduler_output.h"

namespace dsv4 {

// The forward batch of a step: sequences in scheduling order, one logit row per sampling sequence (its chunk's
// last token), in the same order.
StepBatch build_step_batch(const SchedulerOutput& output);

// Applies state ops to a backend, in order; the tier ops' host entries and staged reads come from `tiers`.
void apply_state_ops(Backend& backend, std::span<const StateOp> ops, KvTiers* tiers = nullptr);
// One host / disk tier op (runtime/tier_ops.cpp); fails clearly when `tiers` is null.
void apply_tier_op(Backend& backend, const StateOp& op, KvTiers* tiers);

class ModelRunner {
  public:
    // enforce_eager: never record or replay CUDA graphs (--enforce-eager).
    explicit ModelRunner(DeepseekV4& model, bool enforce_eager = false)
        : model_(model), graphs_(model, enforce_eager) {}

    void apply(std::span<const StateOp> ops) { apply_state_ops(model_.backend(), ops, tiers_); }
    // The KV manager's tiers, whose ops this runner applies (null: none).
    void set_tiers(KvTiers* tiers) { tiers_ = tiers; }
    // Runs one step. A failure of the forward pass throws (the whole step is lost); a failure to sample one
    // sequence (e.g. non-finite logits) is reported in its SequenceSample::error.
    RunnerOutput execute(const SchedulerOutput& output);

    // Called on the engine thread with each sampled sequence's logits row before sampling (tests, debugging).
    std::function<void(const ScheduledSequence& entry, std::span<const float> logits)> logits_hook;

    const StepGraphs& graphs() const { return graphs_; }

  private:
    DeepseekV4& model_;
    StepGraphs graphs_;
    KvTiers* tiers_ = nullptr;
};

}  // namespace dsv4
