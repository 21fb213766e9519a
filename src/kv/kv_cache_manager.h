// KvCacheManager: the host-side view of the backend's sequence state (backend.h). It hands out the fixed-state
// slots (one per running sequence: SWA rings and compressor records live there) and the paged blocks (compressed
// rows and indexer keys, block_tokens positions each), keeps reference counts, and runs the prefix cache.
//
// Prefix cache. A full block is cached under the hash chain of the tokens up to its end (block_hash.h). The blocks
// alone do not let a sequence resume: the slot state at the boundary is needed too (the last sliding_window K=V
// rows of every layer, and for CSA layers the compressor records of the previous window). That state is kept in a
// bounded pool of boundary snapshots (snapshot_pool.h), saved right after a sequence's step ends at most
// rewind_capacity tokens past a boundary (while its ring still holds the rows). A lookup walks the hash chain as
// far as cached blocks go, then backs off to the deepest boundary that has a snapshot; the sequence gets those
// blocks (shared, by reference count), its slot is reset and the snapshot restored, and it computes from there.
// So the minimum cacheable prefix is one block (block_tokens tokens) and a hit never covers the prompt's last
// token (its logits must be computed).
//
// Where snapshots come from: every step that ends on (or just past) a block boundary saves one (decode crosses
// boundaries one token at a time, so generated text is always covered). For prompts, limit_chunk() ends a prefill
// chunk at two boundaries when no snapshot exists there yet: the prompt's last full block (multi-turn: the next
// turn extends this prompt) and the deepest cached prefix a lookup found without a snapshot (a shared system prompt:
// the second request pays one extra chunk boundary, later ones hit).
//
// Forks (n > 1): a child shares the parent's full blocks and gets a copy of the partial last block (copy-on-write
// done eagerly: both would append compressed rows to it) and a copy of the parent's slot.
//
// Tiers (kv_tiers.h, attach_tiers): below the device, blocks and snapshots are written through to a host pool and
// from there to disk; a lookup continues into them where the device's cache ends, and admit() copies what it uses
// back into device blocks and a device snapshot (kv_cache_tiers.cpp).
//
// Plain CPU code: decisions are returned as StateOps for the runner to apply. Not thread-safe (engine thread).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/kv_tiers.h"
#include "kv/snapshot_pool.h"
#include "kv/state_ops.h"

namespace dsv4 {

struct KvCacheConfig {
    int32_t max_slots = 1;
    int32_t num_blocks = 1;
    int32_t block_tokens = 256;
    int32_t num_snapshots = 0;
    int32_t rewind_capacity = 0;  // the backend's: how far past a boundary a snapshot can still be saved
    bool enable_prefix_caching = true;
};

// A sequence's share of the state. Owned by the sequence (sched/request.h), changed only through the manager.
struct SequenceKv {
    int32_t slot = -1;
    std::vector<int32_t> blocks;    // block table: logical block i -> physical block
    std::vector<BlockHash> hashes;  // keys of the sequence's first full blocks (kept across preemption)
    int64_t snapshot_target = 0;    // deepest cached prefix found without a snapshot: a chunk should end there
};

struct PrefixHit {
    int64_t tokens = 0;           // positions served from the cache (a block boundary, or 0)
    int32_t snapshot = -1;        // restored into the slot when tokens > 0 (-1 then: in a lower tier)
    std::vector<int32_t> blocks;  // cached blocks covering [0, tokens) (-1: in a lower tier, loaded by admit)
    int64_t matched_tokens = 0;   // prefix present in cached blocks (>= tokens; the rest had no snapshot)
    int64_t query_tokens = 0;     // tokens looked up (for the hit-rate statistics, counted on admission)
    std::array<int64_t, kNumKvTiers> tier_tokens{};  // of `tokens`, served from the device, the host, the disk
};

struct KvCacheStats {
    int64_t prefix_queries = 0;  // tokens looked up
    int64_t prefix_hits = 0;     // tokens served from the cache
    int64_t snapshots_saved = 0;
    int64_t snapshots_restored = 0;
    std::array<int64_t, kNumKvTiers> prefix_hits_by_tier{};  // prefix_hits by where the blocks were (KvTier)
};

class KvCacheManager {
  public:
    explicit KvCacheManager(const KvCacheConfig& config);

    const KvCacheConfig& config() const { return config_; }
    const BlockPool& block_pool() const { return blocks_; }
    const SnapshotPool& snapshot_pool() const { return snapshots_; }
    const KvCacheStats& stats() const { return stats_; }
    int32_t num_free_slots() const { return static_cast<int32_t>(free_slots_.size()); }
    int32_t num_free_blocks() const { return blocks_.num_free(); }
    // Fraction of blocks referenced by sequences (cached but unreferenced blocks count as free).
    double usage() const;
    int64_t blocks_for(int64_t tokens) const { return (tokens + config_.block_tokens - 1) / config_.block_tokens; }

    // Slots. take_slot throws when none is free (check num_free_slots first).
    int32_t take_slot();
    void release_slot(int32_t slot);

    // The cached prefix of a sequence about to be (re)admitted whose known tokens are `tokens` (the prompt, plus
    // the output after a preemption). Side effects: the sequence's block hashes are computed into kv.hashes, and
    // kv.snapshot_target is set to the deepest cached prefix that has no snapshot (0 if none).
    PrefixHit find_prefix(SequenceKv& kv, std::span<const int32_t> tokens);
    // Free blocks admit() takes to cover [0, end): new blocks plus the hit's blocks that are currently free.
    int64_t blocks_needed_to_admit(const PrefixHit& hit, int64_t end) const;
    // Gives a slot-less, block-less sequence `slot`, the hit's blocks and new blocks up to `end` (the caller checked
    // blocks_needed_to_admit); emits the slot reset and, on a hit, the snapshot restore.
    void admit(SequenceKv& kv, int32_t slot, const PrefixHit& hit, int64_t end, std::vector<StateOp>& ops);
    // Grows the block table to cover [0, end); false, changing nothing, when there are not enough free blocks.
    bool grow(SequenceKv& kv, int64_t end);
    // The end of a chunk [computed, end), pulled back to a boundary where a snapshot is wanted and could not be
    // saved after the step otherwise (see the header comment).
    int64_t limit_chunk(const SequenceKv& kv, int64_t computed, int64_t end, int64_t prompt_tokens) const;
    // After a step that computed positions [before, after) of a sequence with these tokens: caches the blocks that
    // became full and saves a snapshot at the last boundary crossed if the slot still holds its rows. written_end
    // (>= after; 0 = after): the end of what the step wrote into the slot, rejected draft positions and draft rows
    // included; those positions are never hashed, and they evict ring rows, so a snapshot is only taken while
    // written_end - boundary <= rewind_capacity.
    void on_computed(SequenceKv& kv, std::span<const int32_t> tokens, int64_t before, int64_t after,
                     std::vector<StateOp>& ops, int64_t written_end = 0);
    // n > 1: `child` (holding a slot, no blocks) continues from the parent's state after `computed` positions.
    // false, changing nothing, when no block is free for the copy of the partial last block.
    bool fork(const SequenceKv& parent, int64_t computed, SequenceKv& child, std::vector<StateOp>& ops);
    // Releases the sequence's blocks (last first, so its prefix stays cached longest) and its slot.
    void free(SequenceKv& kv);

    // The host / disk tiers below the device's prefix cache (null: none). Not owned; must outlive the manager.
    void attach_tiers(KvTiers* tiers) { tiers_ = prefix_caching() ? tiers : nullptr; }
    KvTiers* tiers() const { return tiers_; }

  private:
    // kv_cache_tiers.cpp: where a key is, and the tier side of find_prefix and admit.
    bool has_block(const BlockHash& key) const;
    bool has_snapshot(const BlockHash& key) const;
    int64_t deepest_snapshot(const SequenceKv& kv, int64_t blocks) const;
    int64_t prepare_tier_hit(const SequenceKv& kv, int64_t usable);
    void load_tier_hit(SequenceKv& kv, const PrefixHit& hit, std::vector<StateOp>& ops);

    void ensure_hashes(SequenceKv& kv, std::span<const int32_t> tokens, int64_t full_blocks) const;
    bool prefix_caching() const { return config_.enable_prefix_caching; }

    KvCacheConfig config_;
    BlockPool blocks_;
    SnapshotPool snapshots_;
    std::vector<int32_t> free_slots_;
    std::vector<bool> slot_used_;
    KvCacheStats stats_;
    KvTiers* tiers_ = nullptr;
};

}  // namespace dsv4
