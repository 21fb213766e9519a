// StepGraphs: the runner's execution policy for forward steps (the runner owns graphs, as in nano-vllm's
// model_runner). A step is graphed when the backend can record (Backend::graph_recorder), --enforce-eager is off, no
// debug hook is set (DeepseekV4::graphable), and every sequence feeds the same number of tokens, at most
// kMaxGraphTokensPerSeq (decode: 1; draft verification: k + 1). Prefill chunks run eagerly: their kernels are long, so
// launch cost does not matter. Graphs are keyed by the step's shape: token, sequence and logit-row counts, tokens per
// sequence, the hidden layers asked for, and the backend's own shape key; warm-up, recording and replay are
// GraphedRuns' (backend/graphed_runs.h). A replayed step's results live at the recorded addresses, which the
// backend's deterministic per-step scratch makes the same for every step of a key.
#pragma once

#include <cstdint>

#include "backend/graphed_runs.h"
#include "model/deepseek_v4.h"

namespace dsv4 {

class StepGraphs {
  public:
    StepGraphs(DeepseekV4& model, bool enforce_eager);

    // Runs one step (eagerly, recording, or replaying) and returns its results in backend memory.
    ForwardResult forward(const StepBatch& batch, const ForwardRequest& request = {});

    int64_t recorded() const { return runs_.recorded(); }  // graphs recorded so far
    int64_t replays() const { return runs_.replays(); }    // steps run by replay

  private:
    // The graph key of a graphable step, or 0 when the step runs eagerly.
    uint64_t key_of(const StepBatch& batch, const ForwardRequest& request) const;

    DeepseekV4& model_;
    GraphedRuns<ForwardResult> runs_;
};

}  // namespace dsv4
