// GraphRecorder: an optional backend role, the device's record-and-replay of a whole forward step (CUDA graphs).
// The policy (which steps are graphed, warm-up, when to record) belongs to the runner (runtime/step_graphs.h); the
// recorder only records and replays. Between steps the backend re-uploads the step metadata in begin_step() into
// buffers at fixed addresses, so a replayed step reads the new batch; the recorded launches may therefore depend only
// on the key: the step's token, sequence and logit-row counts and shape_key().
#pragma once

#include <cstdint>

#include "backend/step.h"

namespace dsv4 {

class GraphRecorder {
  public:
    virtual ~GraphRecorder() = default;

    // Whether steps can be recorded now (false e.g. while per-kernel profiling is on).
    virtual bool graphs_available() const = 0;
    // Launches the graph recorded under `key` (after begin_step); false when none is.
    virtual bool replay(uint64_t key) = 0;
    // Everything launched between begin_capture() and end_capture(key) is recorded under `key`, not run.
    virtual void begin_capture() = 0;
    virtual void end_capture(uint64_t key) = 0;
    // What the backend's launch shapes depend on besides the step's token, sequence and logit-row counts (e.g.
    // context-length buckets); part of the key.
    virtual uint64_t shape_key(const StepBatch& batch) const = 0;
};

}  // namespace dsv4
