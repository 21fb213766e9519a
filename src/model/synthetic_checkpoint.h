// Synthetic checkpoints: every tensor expected_tensors() lists for a config (+ draft stages), filled with random but
// realistic values (synthetic_values.h) in the checkpoint's real formats (FP8 e4m3 + 128x128 UE8M0 block scales, FP4
// e2m1 experts + per-32 UE8M0 scales, BF16, F32, I64), under DeepSeek's original names, in K shards with
// model.safetensors.index.json and a DeepSeek-style config.json. Deterministic: the same model and seed give the same
// bytes (the values do not depend on the shard count or the thread count either).
//
// Streaming: tensors are generated and written a chunk of rows at a time (a few MB), so any size can be written; a
// full-size Flash checkpoint is ~156 GB of output.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include "model/synthetic_presets.h"

namespace dsv4 {

struct SyntheticOptions {
    uint64_t seed = 0;
    int shards = 2;
    std::vector<double> routing_skew;  // Zipf exponents of expert popularity (model/synthetic_routing.h); empty: even
    std::function<void(uint64_t bytes)> on_bytes;  // progress: bytes of tensor data just written (writer thread)
    std::function<void()> on_shard_done;           // progress: a shard's tensors are all written
};

struct SyntheticResult {
    uint64_t total_bytes = 0;  // tensor data
    size_t tensors = 0;
    int shards = 0;
};

// Tensor data bytes the checkpoint will hold.
uint64_t synthetic_checkpoint_bytes(const SyntheticModel& model);

// Writes config.json, the shards and (last, so its presence means the checkpoint is complete)
// model.safetensors.index.json into dir (created if missing). Throws dsv4::Error on an invalid config or an I/O error.
SyntheticResult write_synthetic_checkpoint(const std::filesystem::path& dir, const SyntheticModel& model,
                                           const SyntheticOptions& options);

}  // namespace dsv4
