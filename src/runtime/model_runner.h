// ModelRunner: carries out a scheduled step on the model. It applies the step's state ops to the backend, flattens
// the scheduled sequences into one StepBatch (tokens, positions, slots, block tables, the rows whose logits are
// wanted), runs the step through its StepGraphs (eager, recorded or replayed: runtime/step_graphs.h), and samples
// the next token of every sequence that reached its last known token (src/sample), n > 1 completions from the same
// row. The batch is passed explicitly; no global context.
// Speculative decoding: an entry with drafts feeds its last token and the drafts, gets the logits of all of those
// rows and verifies them (sample/spec_verify.h); then the drafter (src/spec) absorbs every sequence's final rows and
// proposes the next step's drafts.
#pragma once

#include <functional>
#include <memory>
#include <span>

#include "backend/backend.h"
#include "kv/kv_tiers.h"
#include "kv/state_ops.h"
#include "model/deepseek_v4.h"
#include "runtime/mask_prefetch.h"
#include "runtime/step_graphs.h"
#include "sample/spec_verify.h"
#include "sched/scheduler_output.h"
#include "spec/drafter.h"

namespace dsv4 {

// The forward batch of a step: sequences in scheduling order, one logit row per sampling sequence (its chunk's
// last token; every row of a verify entry: its last token and its drafts), in the same order.
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

    // Speculative decoding: the drafter (not owned; null: off) and how drafts are verified.
    void set_drafter(Drafter* drafter, VerifyMethod method) {
        drafter_ = drafter;
        verify_method_ = method;
    }
    Drafter* drafter() const { return drafter_; }
    // Oracle acceptance, a benchmark mode (SpeculativeConfig::oracle_acceptance_length): a verify entry accepts each
    // draft with probability alpha whatever the logits say (sample/spec_verify.h oracle_accepted_drafts), then draws
    // its next token on the device from the row after the last accepted draft; the step's costs are the real ones.
    // 0: real verification.
    void set_oracle_acceptance(double alpha) { oracle_alpha_ = alpha; }

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
    // Starts the structured-output masks of the step's sampling sequences on the prefetch thread; returns whether
    // any was started (then wait() before sampling).
    bool prefetch_masks(const SchedulerOutput& output);
    // Samples or verifies every entry that reached its last token from the step's logits (in backend memory; what of
    // them comes to the host: runtime/step_logits.h).
    void sample_all(const SchedulerOutput& output, const Tensor& logits, RunnerOutput& result);
    // The drafter's part of the step: absorb the final rows, propose for the next step.
    void draft(const SchedulerOutput& output, const ForwardResult& target, RunnerOutput& result);

    DeepseekV4& model_;
    StepGraphs graphs_;
    std::unique_ptr<MaskPrefetcher> prefetch_;  // created with the first constrained step
    Drafter* drafter_ = nullptr;
    VerifyMethod verify_method_ = VerifyMethod::kStandard;
    double oracle_alpha_ = 0.0;
    KvTiers* tiers_ = nullptr;
};

}  // namespace dsv4
