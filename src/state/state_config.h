// The sequence state's configuration, shared by the planner (kv/), the backends and the engine: how K=V rows and
// indexer keys are stored (StateDtype; byte layouts in state/state_format.h), how much state a backend allocates
// (StateConfig), and what it allocated (StateBytes). The per-layer geometry derived from these is
// state/state_layout.h's layer_state_shape(), the one formula every user of the state calls.
#pragma once

#include <cstdint>
#include <string_view>

namespace dsv4 {

// How a backend stores K=V rows (ring rows, compressed entries, snapshot ring rows) and indexer keys; compressor
// pending records are float32 in every mode. Byte layouts in state/state_format.h.
enum class StateDtype : uint8_t {
    kF32,   // float32
    kBf16,  // bf16 (round to nearest even)
    kFp8,   // fp8_ds_mla K=V rows (model-spec 5.2) and FP8 indexer keys with one power-of-two scale (5.3)
};

std::string_view state_dtype_name(StateDtype dtype);
// "f32" | "bf16" | "fp8"; anything else is a dsv4::Error naming the accepted values.
StateDtype parse_state_dtype(std::string_view name);

// Sizes of the state a backend allocates (derived from the model config and the engine's memory plan).
struct StateConfig {
    int max_slots = 1;         // sequences that can run at once
    int num_blocks = 0;        // paged blocks for compressed rows / indexer keys
    int block_tokens = 256;    // token positions covered by one block
    int rewind_capacity = 16;  // deepest truncation without recomputation
    int num_snapshots = 0;     // prefix-cache boundary snapshots (save_snapshot / restore_snapshot); engine addition
    StateDtype kv_dtype = StateDtype::kF32;  // storage of K=V rows and indexer keys
};

// Bytes of sequence state a backend allocated per slot, per paged block and per snapshot (state/state_layout.h
// computes the same numbers for planning; tests hold the two equal).
struct StateBytes {
    int64_t slot = 0;
    int64_t block = 0;
    int64_t snapshot = 0;
};

}  // namespace dsv4
