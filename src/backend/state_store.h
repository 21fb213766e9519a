// StateStore: the sequence state a backend holds (device memory on GPUs), addressed by slot, paged block and
// boundary snapshot. The state's geometry is state/state_layout.h's layer_state_shape(); the planner (kv/) decides
// the StateConfig and emits StateOps, which the runner applies here. The host and disk tiers (kv/kv_tiers.h) copy
// blocks and snapshots to and from host memory through the tier role at the end of this interface.
//
// Per sequence *slot* the store keeps fixed-size state: for every layer a ring of the last `window + rewind_capacity`
// K=V rows, and for every compressor the per-token pre-pooling records of the last `(overlap ? 2 : 1) * ratio +
// rewind_capacity` positions. Compressed rows and indexer keys are paged: entry w of a layer with ratio r lives in
// logical block (w * r) / block_tokens of the sequence's block table. A sequence can be truncated to any position at
// most rewind_capacity tokens back (speculative decoding); deeper rewinds are re-prefilled by the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "config/model_config.h"
#include "state/state_config.h"

namespace dsv4 {

// Host memory a backend allocated for a tier's pool (allocate_host_buffer); freed with the last copy of `memory`.
struct HostBuffer {
    std::shared_ptr<std::byte> memory;
    int64_t bytes = 0;
    std::span<std::byte> span() const { return {memory.get(), static_cast<size_t>(bytes)}; }
};

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

    // --- Tier role (kv/kv_tiers.h): blocks and snapshots as bytes in host memory. The byte layout is the same on
    // every backend (so a disk file is portable between them): per layer in order, a block's compressed rows then its
    // indexer keys; a snapshot's `window` ring rows (rows of positions below 0 are whatever the snapshot holds), then
    // its main and its indexer compressor records; rows and keys in the stored formats (state/state_format.h),
    // records float32. The spans are exactly StateLayout::block_bytes / snapshot_bytes long.
    // On a GPU the copies run on a copy stream: an offload starts after the work already queued that writes its
    // source and completes before any later write of that block or snapshot; a load completes before the next step
    // or state op reads its destination. So they never block the host, and decode only waits where it must.
    // The bytes of an offload are final after wait_tier_copies(). The bytes of a load may be changed once the call
    // returns, except bytes inside a buffer from allocate_host_buffer: those are read asynchronously, in order with
    // the other tier copies. The defaults fail, naming the backend.
    virtual void offload_block(int32_t block, std::span<std::byte> host);
    virtual void load_block(std::span<const std::byte> host, int32_t block);
    virtual void offload_snapshot(int32_t snapshot, std::span<std::byte> host);
    virtual void load_snapshot(std::span<const std::byte> host, int32_t snapshot);
    // Blocks the host until every tier copy issued so far has completed.
    virtual void wait_tier_copies() {}
    // Host memory for a tier pool: page-locked on a GPU (so copies are asynchronous DMA), plain on the CPU.
    virtual HostBuffer allocate_host_buffer(int64_t bytes);
};

}  // namespace dsv4
