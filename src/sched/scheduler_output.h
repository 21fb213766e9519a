// What crosses between the scheduler, the model runner and the engine each step:
//   Scheduler::schedule() -> SchedulerOutput -> ModelRunner::execute() -> RunnerOutput -> Scheduler::update()
//   -> UpdateResult (state ops to apply now, events for the result streams).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsv4/engine.h"
#include "kv/state_ops.h"
#include "sched/request.h"

namespace dsv4 {

// One sequence's part of a step: it computes tokens [start, start + num_tokens) of seq->tokens.
struct ScheduledSequence {
    Sequence* seq = nullptr;
    int64_t start = 0;
    int32_t num_tokens = 0;
    bool sample = false;  // the chunk reaches the last known token: sample the next one from its last row
    // Speculative decoding: drafts fed after the sequence's last token (num_tokens = 1 + drafts.size()); their
    // distributions are seq->draft.probs' first rows. Every row's logits are verified (sample/spec_verify.h).
    std::vector<int32_t> drafts;
    // n > 1 on the step that finishes the prompt: these completions sample their first token from the same row.
    std::vector<Sequence*> fork_children;
};

struct SchedulerOutput {
    std::vector<ScheduledSequence> seqs;  // running sequences first (FCFS), then newly admitted ones
    std::vector<StateOp> state_ops;       // apply in order before the forward (slot resets, snapshot restores)
    int64_t num_batched_tokens = 0;       // draft tokens included (vLLM's num_tokens_with_spec)
    int num_preempted = 0;
    bool propose_drafts = false;  // the drafter proposes for the next step (speculation is on at this batch size)

    bool empty() const { return seqs.empty(); }
};

// The runner's result for one scheduled sequence.
struct SequenceSample {
    // When sampled: [0] for the sequence, then one per fork child, in order. A verify step (drafts fed): the
    // accepted drafts, then the correction or bonus token.
    std::vector<GeneratedToken> tokens;
    std::string error;         // set when this sequence's step failed (e.g. non-finite logits)
    int accepted = 0;          // drafts accepted (verify steps)
    DraftProposal next_draft;  // the drafter's proposal for the next step (empty: none)
    int64_t written_end = 0;   // end of what this step wrote into the slot (drafter rows included; 0: the computed end)
};

struct RunnerOutput {
    std::vector<SequenceSample> samples;  // parallel to SchedulerOutput::seqs
    // Wall time of the step's forward passes (the target's, then the drafter's) until their results are on the
    // device, waiting included: the rest of the engine step is host work (scheduling, sampling, state updates).
    double forward_seconds = 0.0;
    // Wall time of the step's sampling (the device sampler's launch, its wait and the host's reading of the draws),
    // part of the host work.
    double sample_seconds = 0.0;
};

struct CompletionUpdate {
    std::string request_id;
    RequestOutput output;
};

struct UpdateResult {
    std::vector<StateOp> state_ops;              // apply before the next step (snapshot saves, fork copies)
    std::vector<CompletionUpdate> outputs;       // events for the result streams, in order
    std::vector<std::string> finished_requests;  // requests whose every completion has finished
};

}  // namespace dsv4
