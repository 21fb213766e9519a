// StateLayout: bytes of the backend's sequence state per slot, per paged block and per boundary snapshot, computed
// from the ModelConfig (model-spec 5.1, 5.2, 5.4) for a storage dtype; and plan_state(), which turns a memory
// budget into a StateConfig (how many slots, blocks and snapshots).
//
// Per layer (window W, rewind capacity R, head dim d, indexer head dim di, ratio r, block of B tokens):
//   slot      all layers: (W + R) ring rows;  CSA: main (2r + R) records of 2*2d fp32 and indexer (2r + R) records
//             of 2*2di fp32;  HCA: (r + R) records of 2*d fp32   (compressor records are float32 on every device)
//   block     CSA: B/r compressed rows + B/r indexer keys;  HCA: B/r compressed rows;  sliding layers: nothing
//   snapshot  all layers: W ring rows;  CSA: r main records + r indexer records (HCA: none at a boundary)
// Row / key bytes by dtype (backend/state_format.h, the formats the backends store): f32 4d / 4di; bf16 2d / 2di;
// fp8: fp8_ds_mla rows (nope e4m3 + rope bf16 + one UE8M0 per 64 nope dims, padded to 8 bytes: 584 B for d = 512)
// and FP8 indexer keys (di e4m3 + one fp32 scale: 132 B for di = 128).
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "model/model_config.h"

namespace dsv4 {

struct StateLayout {
    StateDtype dtype = StateDtype::kF32;
    int64_t row_bytes = 0;          // one K=V row (ring row or compressed entry)
    int64_t indexer_key_bytes = 0;  // one indexer key
    int64_t slot_bytes = 0;         // fixed state of one slot
    int64_t block_bytes = 0;        // one paged block
    int64_t snapshot_bytes = 0;     // one boundary snapshot
};

StateLayout compute_state_layout(const ModelConfig& config, int block_tokens, int rewind_capacity, StateDtype dtype);

struct StatePlanRequest {
    int64_t budget_bytes = 0;  // all of the state: slots + snapshots + blocks
    int max_slots = 1;
    int block_tokens = 256;
    int rewind_capacity = 16;
    int num_snapshots = -1;  // -1: 2 per slot, at most a fifth of what is left after the slots; 0: none
    int64_t min_tokens = 0;  // blocks for at least one sequence this long must fit
};

struct StatePlan {
    StateConfig state;
    StateLayout layout;
    int64_t total_bytes = 0;
    int64_t token_capacity = 0;  // positions the blocks can hold (num_blocks * block_tokens)
};

// Throws dsv4::Error saying what does not fit (slots, or the blocks for min_tokens) and how much is missing.
StatePlan plan_state(const ModelConfig& config, const StatePlanRequest& request, StateDtype dtype);

}  // namespace dsv4
