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
    // n > 1 on the step that finishes the prompt: these completions sample their first token from the same row.
    std::vector<Sequence*> fork_children;
};

struct SchedulerOutput {
    std::vector<ScheduledSequence> seqs;  // running sequences first (FCFS), then newly admitted ones
    std::vector<StateOp> state_ops;       // apply in order before the forward (slot resets, snapshot restores)
    int64_t num_batched_tokens = 0;
    int num_preempted = 0;

    bool empty() const { return seqs.empty(); }
};

// The runner's result for one scheduled sequence.
struct SequenceSample {
    std::vector<GeneratedToken> tokens;  // when sampled: [0] for the sequence, then one per fork child, in order
    std::string error;                   // set when this sequence's step failed (e.g. non-finite logits)
};

struct RunnerOutput {
    std::vector<SequenceSample> samples;  // parallel to SchedulerOutput::seqs
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
