// plan_state(): turns a memory budget into a StateConfig (how many slots, paged blocks and boundary snapshots), from
// the state's byte layout (state/state_layout.h).
#pragma once

#include <cstdint>

#include "config/model_config.h"
#include "state/state_config.h"
#include "state/state_layout.h"

namespace dsv4 {

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
