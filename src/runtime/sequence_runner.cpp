#include "runtime/sequence_runner.h"

#include "core/error.h"

namespace dsv4 {

SequenceRunner::SequenceRunner(DeepseekV4& model, int32_t slot, int32_t blocks_per_slot, StepGraphs* graphs)
    : model_(model), graphs_(graphs), slot_(slot), blocks_per_slot_(blocks_per_slot) {
    model_.backend().reset_slot(slot_);
}

std::vector<float> SequenceRunner::feed(std::span<const int32_t> tokens, bool all_logits) {
    DSV4_CHECK(!tokens.empty(), "feed: no tokens");
    const StateConfig& state = model_.backend().state_config();
    const int64_t end = length_ + static_cast<int64_t>(tokens.size());
    const int64_t blocks = (end + state.block_tokens - 1) / state.block_tokens;
    DSV4_CHECK(blocks <= blocks_per_slot_, "feed: {} tokens need {} state blocks, this sequence has {}", end, blocks,
               blocks_per_slot_);
    std::vector<int32_t> table(blocks);
    for (int64_t i = 0; i < blocks; ++i) table[i] = static_cast<int32_t>(slot_ * blocks_per_slot_ + i);
    StepBatch batch;
    batch.add_sequence(slot_, length_, tokens, std::move(table));
    const auto n = static_cast<int32_t>(tokens.size());
    for (int32_t i = all_logits ? 0 : n - 1; i < n; ++i) batch.logit_rows.push_back(i);
    std::vector<float> logits = graphs_ != nullptr ? model_.host_logits(graphs_->forward(batch)) : model_.logits(batch);
    length_ = end;
    max_written_ = std::max(max_written_, end);
    return logits;
}

void SequenceRunner::truncate(int64_t position) {
    DSV4_CHECK(position >= 0 && position <= length_, "truncate: position {} outside [0, {}]", position, length_);
    const int capacity = model_.backend().state_config().rewind_capacity;
    DSV4_CHECK(max_written_ - position <= capacity,
               "truncate: rewinding {} tokens exceeds the rewind capacity {} "
               "(re-prefill instead)",
               max_written_ - position, capacity);
    length_ = position;
}

}  // namespace dsv4
