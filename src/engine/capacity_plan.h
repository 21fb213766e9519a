// Capacity planning at load: before anything is allocated, where every byte goes (non-expert weights, the routed
// experts resident on the device and those kept in host memory, the step workspace, the sequence state's slots,
// snapshots and blocks, the host KV tier), or a dsv4::Error that names the bytes needed, the bytes available and the
// flags that would make it fit. A pure function of the model configuration, the numerics, the state options and the
// memory figures: the CUDA device passes cudaMemGetInfo's, the CPU device the host's, tests an H200's. So a model
// that cannot fit fails here with a sentence, never inside an allocator with a raw library error.
#pragma once

#include <cstdint>
#include <string>

#include "backend/step.h"
#include "config/model_config.h"
#include "kv/state_plan.h"
#include "state/state_config.h"

namespace dsv4 {

// The memory the engine places weights, workspace and state in.
struct MemoryFigures {
    std::string name = "GPU";  // in messages: "GPU" or "host memory"
    int64_t total_bytes = 0;
    int64_t free_bytes = 0;       // free now (other processes and the driver's context excluded)
    double utilization = 1.0;     // share of total_bytes this engine may use (--gpu-memory-utilization)
    int64_t workspace_bytes = 0;  // step scratch the backend reserves at creation
    int64_t reserve_bytes = 0;    // kept free for runtime allocations (graphs, library handles)
    bool holds_weights = true;    // false: weights are read in place from the mapped checkpoint (CPU)
    // > 0: the automatic state budget takes at most this many bytes beyond the slots (the CPU keeps its state small).
    int64_t auto_state_cap_bytes = 0;
};

struct CapacityRequest {
    Numerics numerics = Numerics::kExact;
    StateDtype state_dtype = StateDtype::kF32;
    MemoryFigures device;
    int64_t host_available_bytes = 0;  // host memory for the host tiers; 0: not checked
    // The sequence state (EngineConfig's values).
    int max_num_seqs = 64;
    int block_tokens = 256;
    int rewind_capacity = 16;
    int num_snapshots = -1;      // -1: automatic (kv/state_plan.h)
    int64_t max_model_len = 0;   // 0: the model's, capped by what fits
    int64_t kv_cache_bytes = 0;  // 0: what the weights and the workspace leave
    // Tiers.
    int gpu_experts = -1;             // routed experts per layer resident on the device; -1: all of them
    int64_t host_kv_cache_bytes = 0;  // pinned host pool for prefix-cache blocks evicted from the device
};

// Bytes of the weights as the device holds them: the checkpoint's bytes, small vectors widened to float32 and hash
// tables narrowed to int32 (backend/weight_store.h), plus the float32 copy of FP8 block scales that fast numerics'
// FP8 GEMMs keep.
struct WeightFootprint {
    int64_t non_expert_bytes = 0;  // everything but the routed experts
    int64_t expert_bytes = 0;      // one routed expert: w1, w2, w3 and their scales
    int moe_layers = 0;
    int experts_per_layer = 0;
    int64_t all_experts_bytes() const { return expert_bytes * moe_layers * experts_per_layer; }
};
WeightFootprint weight_footprint(const ModelConfig& config, Numerics numerics);

struct CapacityPlan {
    WeightFootprint weights;
    int resident_experts = 0;           // routed experts per layer on the device
    int host_experts = 0;               // per layer in pinned host memory (checkpoint form)
    int64_t device_weight_bytes = 0;    // non-expert weights + resident experts (0: read in place, CPU)
    int64_t resident_expert_bytes = 0;  // routed experts on the device
    int64_t host_expert_bytes = 0;
    int64_t workspace_bytes = 0;
    int64_t reserve_bytes = 0;
    StatePlan state;
    int64_t max_model_len = 0;  // resolved: the request's, or the model's capped by the state's token capacity
    int64_t device_budget_bytes = 0;
    int64_t host_kv_cache_bytes = 0;
    std::string device_name;

    int64_t device_bytes() const { return device_weight_bytes + workspace_bytes + reserve_bytes + state.total_bytes; }
    // One line per kind of bytes, for the startup log.
    std::string summary() const;
};

// Throws dsv4::Error when it does not fit: what is needed (by kind) and available, and every single flag change that
// would make it fit (--gpu-experts, --gpu-memory-utilization, --max-model-len, --max-num-seqs, --kv-cache-dtype fp8,
// --kv-cache-memory-bytes), or that none does.
CapacityPlan plan_capacity(const ModelConfig& model, const CapacityRequest& request);

}  // namespace dsv4
