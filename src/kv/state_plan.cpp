#include "kv/state_plan.h"

#include <algorithm>

#include "core/error.h"

namespace dsv4 {

StatePlan plan_state(const ModelConfig& config, const StatePlanRequest& req, StateDtype dtype) {
    DSV4_CHECK(req.max_slots > 0, "state plan: max_slots must be positive, got {}", req.max_slots);
    StatePlan plan;
    plan.layout = compute_state_layout(config, req.block_tokens, req.rewind_capacity, dtype);
    const StateLayout& l = plan.layout;
    const int64_t slots_bytes = req.max_slots * l.slot_bytes;
    DSV4_CHECK(slots_bytes < req.budget_bytes,
               "the sequence state does not fit: {} slots need {} bytes of fixed state "
               "({} each), the budget is {} bytes (raise --kv-cache-bytes or lower --max-num-seqs)",
               req.max_slots, slots_bytes, l.slot_bytes, req.budget_bytes);
    int64_t left = req.budget_bytes - slots_bytes;
    int64_t snapshots = req.num_snapshots;
    if (snapshots < 0)
        snapshots = std::min<int64_t>(2 * req.max_slots, left / 5 / std::max<int64_t>(1, l.snapshot_bytes));
    left -= snapshots * l.snapshot_bytes;
    // A model without compressed layers stores nothing in blocks; the backend still wants a block table.
    const int64_t block_bytes = std::max<int64_t>(1, l.block_bytes);
    const int64_t blocks = left > 0 ? std::min<int64_t>(left / block_bytes, int64_t{1} << 30) : 0;
    const int64_t needed = (req.min_tokens + req.block_tokens - 1) / req.block_tokens;
    DSV4_CHECK(blocks >= std::max<int64_t>(needed, 1),
               "the sequence state does not fit: one {}-token sequence needs "
               "{} blocks of {} bytes, the budget leaves room for {} after {} slots and {} snapshots (raise "
               "--kv-cache-bytes or lower --max-model-len)",
               req.min_tokens, needed, l.block_bytes, blocks, req.max_slots, snapshots);
    plan.state.max_slots = req.max_slots;
    plan.state.num_blocks = static_cast<int>(blocks);
    plan.state.block_tokens = req.block_tokens;
    plan.state.rewind_capacity = req.rewind_capacity;
    plan.state.num_snapshots = static_cast<int>(snapshots);
    plan.state.kv_dtype = dtype;
    plan.total_bytes = slots_bytes + snapshots * l.snapshot_bytes + blocks * l.block_bytes;
    plan.token_capacity = blocks * req.block_tokens;
    return plan;
}

}  // namespace dsv4
