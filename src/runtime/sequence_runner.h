// SequenceRunner: feeds one sequence through a DeepseekV4 without the scheduler: whole, in chunks, one token at a
// time, or after a rewind. Used by `dsv4 logits`, `dsv4 generate` (single prompt) and the golden tests. The engine
// (src/engine) drives many sequences through the same model with its own scheduler and block manager. Steps run
// through a StepGraphs when one is given (decode steps then record and replay graphs, as in the engine), else
// eagerly.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/deepseek_v4.h"
#include "runtime/step_graphs.h"

namespace dsv4 {

class SequenceRunner {
  public:
    // Uses state slot `slot` and blocks [slot * blocks_per_slot, (slot + 1) * blocks_per_slot) of the backend.
    SequenceRunner(DeepseekV4& model, int32_t slot, int32_t blocks_per_slot, StepGraphs* graphs = nullptr);

    // Appends tokens and returns their logits [tokens.size(), vocab] (all rows) or [1, vocab] (last row only).
    std::vector<float> feed(std::span<const int32_t> tokens, bool all_logits);
    // Rewinds to `position` (<= length()); at most the backend's rewind capacity back.
    void truncate(int64_t position);
    int64_t length() const { return length_; }

  private:
    DeepseekV4& model_;
    StepGraphs* graphs_;
    int32_t slot_;
    int32_t blocks_per_slot_;
    int64_t length_ = 0;
    int64_t max_written_ = 0;  // furthest position written since the last reset (for the rewind bound)
};

}  // namespace dsv4
