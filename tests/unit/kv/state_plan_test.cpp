// plan_state: how a memory budget is split into slots, boundary snapshots and paged blocks, and its errors.
#include "kv/state_plan.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"

namespace dsv4 {
namespace {

std::filesystem::path source(const std::string& rel) {
    return std::filesystem::path(DSV4_SOURCE_DIR) / rel;
}

TEST(StatePlan, SplitsTheBudget) {
    const ModelConfig c = load_model_config(source("tests/fixtures/flash_schedule/config.json"));
    const StateLayout l = compute_state_layout(c, 128, 16, StateDtype::kF32);
    StatePlanRequest req;
    req.max_slots = 4;
    req.block_tokens = 128;
    req.rewind_capacity = 16;
    req.num_snapshots = 3;
    req.budget_bytes = 4 * l.slot_bytes + 3 * l.snapshot_bytes + 10 * l.block_bytes + 7;
    req.min_tokens = 1000;
    const StatePlan plan = plan_state(c, req, StateDtype::kF32);
    EXPECT_EQ(plan.state.kv_dtype, StateDtype::kF32);
    EXPECT_EQ(plan_state(c, req, StateDtype::kFp8).state.kv_dtype, StateDtype::kFp8);
    EXPECT_EQ(plan.state.max_slots, 4);
    EXPECT_EQ(plan.state.num_snapshots, 3);
    EXPECT_EQ(plan.state.num_blocks, 10);
    EXPECT_EQ(plan.token_capacity, 1280);
    EXPECT_LE(plan.total_bytes, req.budget_bytes);
    // Automatic snapshots: at most 2 per slot and a fifth of what the slots leave.
    req.num_snapshots = -1;
    req.budget_bytes += 100 * l.snapshot_bytes;
    const StatePlan automatic = plan_state(c, req, StateDtype::kF32);
    EXPECT_EQ(automatic.state.num_snapshots, 8);  // 2 per slot: the fifth would allow about 20
    EXPECT_LE(automatic.state.num_snapshots * l.snapshot_bytes, (req.budget_bytes - 4 * l.slot_bytes) / 5);
}

TEST(StatePlan, RejectsBudgetsThatDoNotFit) {
    const ModelConfig c = load_model_config(source("tests/fixtures/flash_schedule/config.json"));
    const StateLayout l = compute_state_layout(c, 128, 16, StateDtype::kF32);
    StatePlanRequest req;
    req.max_slots = 4;
    req.block_tokens = 128;
    req.num_snapshots = 0;
    req.budget_bytes = 3 * l.slot_bytes;  // not even the slots
    EXPECT_THROW(plan_state(c, req, StateDtype::kF32), Error);
    req.budget_bytes = 4 * l.slot_bytes + 2 * l.block_bytes;
    req.min_tokens = 1000;  // needs 8 blocks
    EXPECT_THROW(plan_state(c, req, StateDtype::kF32), Error);
    req.block_tokens = 100;  // not a multiple of the HCA ratio 128
    EXPECT_THROW(compute_state_layout(c, 100, 16, StateDtype::kF32), Error);
}

}  // namespace
}  // namespace dsv4
