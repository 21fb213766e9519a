// Backend: one device, in the roles the layers above use (ggml's one-interface-per-role shape). Each caller takes the
// narrowest role it needs: the model the ops (ModelOps) and profiling regions, the weight binder the WeightStore,
// the runner and the KV planner's state ops the StateStore, the runner's graph policy the GraphRecorder.
//   backend/model_ops.h       the ops the forward pass calls
//   backend/state_store.h     sequence state: slots, blocks, snapshots, copies (later host tiers)
//   backend/weight_store.h    weights in checkpoint form (later residency, offload, expert placement)
//   backend/graph_recorder.h  optional: record and replay a whole step
//   backend/profiler.h        optional: timing regions, launch counts, memory report
#pragma once

#include <memory>
#include <string>

#include "backend/graph_recorder.h"
#include "backend/model_ops.h"
#include "backend/profiler.h"
#include "backend/state_store.h"
#include "backend/step.h"
#include "backend/weight_store.h"

namespace dsv4 {

class Backend : public ModelOps, public StateStore, public WeightStore, public Profiler {
  public:
    ~Backend() override = default;

    virtual std::string name() const = 0;
    virtual Numerics numerics() const = 0;
    // The FP8 dialect of everything FP8 this backend holds and computes (core/fp8_dialect.h): weights in memory
    // (WeightStore::upload_linear takes FP8 bytes in it), activation quantisation, fp8 K=V rows and indexer keys.
    virtual Fp8Dialect fp8_dialect() const = 0;
    // Optional role: null where the device cannot record steps (the CPU backend).
    virtual GraphRecorder* graph_recorder() { return nullptr; }
};

// fp8_dialect: OCP is the CPU's native dialect (what DeepSeek ships); FNUZ runs MI300X (gfx942) numerics.
std::unique_ptr<Backend> make_cpu_backend(Numerics numerics, int threads = 0,
                                          Fp8Dialect fp8_dialect = Fp8Dialect::kOcp);

}  // namespace dsv4
