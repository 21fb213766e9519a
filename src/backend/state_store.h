// StateStore: the sequence state a backend holds (device memory on GPUs), addressed by slot, paged block and
// boundary snapshot. The state's geometry is state/state_layout.h's layer_state_shape(); the planner (kv/) decides
// the StateConfig and emits StateOps, which the runner applies here. Later roles on this seam: host and disk tiers.
//
// Per sequence *slot* the store keeps fixed-size state: for every layer a ring of the last `window + rewind_capacity`
// K=V rows, and for every compressor the per-token pre-pooling records of the last `(overlap ? 2 : 1) * ratio +
// rewind_capacity` positions. Compressed rows and indexer keys are paged: entry w of a layer with ratio r lives in
// logical block (w * r) / block_tokens of the sequence's block table. A sequence can be truncated to any position at
// most rewind_capacity tokens back (speculative decoding); deeper rewinds are re-prefilled by the caller.
#pragma once

#include <cstdint>
#include <span>

#include "config/model_config.h"
#include "state/state_config.h"

namespace dsv4 {

class StateStore {
  public:
    virtual ~StateStore() = default;

    // Allocates the state of `state.max_slots` slots, `num_blocks` blocks and `num_snapshots` snapshots (poisoned:
    // a read of anything not written shows up as NaN). Fails with a clear message when it does not fit.
    virtual void create_state(const ModelConfig& config, const StateConfig& state) = 0;
    virtual const StateConfig& state_config() const = 0;
    // What create_state allocated. Optional: zeros for a backend that does not report.
    virtual StateBytes allocated_state_bytes() const { return {}; }
    // A new sequence starts in this slot (its fixed state is poisoned again).
    virtual void reset_slot(int32_t slot) = 0;

    // Prefix caching and forks (src/kv/kv_cache_manager.h). A boundary snapshot holds what a slot needs to resume a
    // sequence at `boundary` (a positive multiple of block_tokens) on top of the paged blocks covering
    // [0, boundary): every layer's K=V ring rows of positions [boundary - sliding_window, boundary) (those >= 0),
    // and for every CSA layer the main and indexer compressor records of [boundary - ratio, boundary), the window
    // the next entry overlaps. HCA layers need nothing: block_tokens is a multiple of their ratio, so no window is
    // open at a boundary. save_snapshot copies them out of `slot`, whose sequence has computed up to some end with
    // boundary <= end <= boundary + rewind_capacity (so its ring still holds those rows); the caller guarantees it.
    virtual void save_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) = 0;
    // Writes a snapshot into `slot` (after reset_slot); the sequence then continues at position `boundary`. It cannot
    // be truncated below `boundary` afterwards.
    virtual void restore_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) = 0;
    // Copies slot src's whole fixed state (rings, compressor records) into slot dst: n > 1 completions fork there.
    virtual void copy_slot(int32_t src, int32_t dst) = 0;
    // Copies paged block src (every layer's compressed rows and indexer keys) into block dst: copy-on-write of the
    // partial last block a forked completion would otherwise share.
    virtual void copy_block(int32_t src, int32_t dst) = 0;

    // Optional (benchmarks): fills a slot's state as if `length` tokens had been processed (random rows), for decode
    // benchmarks at long contexts without running the prefill. The block table must cover `length` positions. The
    // default fails, naming the backend.
    virtual void synthetic_context(int32_t slot, int64_t length, std::span<const int32_t> block_table, uint64_t seed);
};

}  // namespace dsv4
