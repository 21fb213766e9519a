// KvTiers: the prefix cache below device memory. A pinned host pool (--host-kv-cache-gib) holds prefix-cache blocks
// and boundary snapshots in the byte layout every backend shares (backend/state_store.h), and an optional disk tier
// (disk_tier.h, --disk-kv-cache) holds what the host pool evicts.
//
// Policy (plain CPU code, like the KV manager: it emits StateOps, the runner applies them):
// - Write-through: a block that becomes cached on the device and a snapshot saved there are copied to the host pool
//   at once (after the step that wrote them; on a GPU on a copy stream), so evicting them from the device later costs
//   nothing and never waits. The host pool evicts least recently used entries; with a disk tier an evicted entry is
//   written to disk first (a demotion op ordered before the copy that reuses its memory).
// - Lookups (KvCacheManager::find_prefix) see the device first, then the host, then the disk; every hit touches the
//   entry in its tier, so eviction is least recently used in each tier. A disk entry is read and checksummed before
//   the hit is decided (prepare): a truncated or corrupted file shortens the hit, and those positions are recomputed.
// - A full host pool or disk only evicts: the worst case is a recompute, never an error.
// Not thread-safe (engine thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/disk_tier.h"
#include "kv/snapshot_pool.h"
#include "kv/state_ops.h"
#include "state/state_layout.h"

namespace dsv4 {

enum class KvTier : uint8_t { kDevice, kHost, kDisk };
inline constexpr int kNumKvTiers = 3;

struct KvTierConfig {
    int32_t host_blocks = 0;         // entries of the host pool
    int32_t host_snapshots = 0;      // (no host entries: no tiers at all; the disk sits below the host pool)
    int64_t block_bytes = 0;         // StateLayout::block_bytes
    int64_t snapshot_bytes = 0;      // StateLayout::snapshot_bytes
    std::filesystem::path disk_dir;  // empty: no disk tier
    int64_t disk_bytes = 0;
    uint64_t fingerprint = 0;  // the state layout's identity, stamped on disk files

    int64_t host_bytes() const { return host_blocks * block_bytes + host_snapshots * snapshot_bytes; }
};

// A host pool of about `bytes`: a fifth for snapshots (a hit needs one per prefix, but one block per block_tokens
// positions), the rest for blocks; at least one of each when the pool can hold them.
KvTierConfig host_tier_config(int64_t bytes, const StateLayout& layout);
// The layout's identity for disk files: dtype, row / block / snapshot sizes.
uint64_t state_layout_fingerprint(const StateLayout& layout, int block_tokens);

struct KvTierStats {
    int64_t offloaded_bytes = 0;  // device -> host (write-through)
    int64_t loaded_bytes = 0;     // host -> device (hits)
    int64_t staged_bytes = 0;     // disk -> device (hits)
    int64_t demoted_bytes = 0;    // host -> disk
    int64_t host_evictions = 0;   // host entries reused for newer ones
};

// A disk entry read and verified for a hit, kept until the copy that uses it is applied.
struct StagedEntry {
    KvEntryKind kind = KvEntryKind::kBlock;
    BlockHash key;
    std::vector<std::byte> bytes;
    bool used = false;  // a load op refers to it
};

class KvTiers {
  public:
    // host_memory: config.host_bytes() bytes the backend allocated for the pool (pinned on a GPU); it must outlive
    // this object.
    KvTiers(const KvTierConfig& config, std::span<std::byte> host_memory);

    const KvTierConfig& config() const { return config_; }
    const KvTierStats& stats() const { return stats_; }
    const DiskKvStore* disk() const { return disk_.get(); }
    int32_t host_entries_used(KvEntryKind kind) const { return pool(kind).num_used(); }

    // Write-through (KvCacheManager::on_computed): device block / snapshot `device_id` now holds `key`.
    void on_cached(KvEntryKind kind, int32_t device_id, const BlockHash& key, std::vector<StateOp>& ops);
    // Where a key is below the device (the host first), without any I/O.
    std::optional<KvTier> find(KvEntryKind kind, const BlockHash& key) const;
    // Makes a key loadable: true at once for a host entry; a disk entry is read and checksummed into staging memory
    // (false, and the file is gone, when it is missing, truncated or corrupted).
    bool prepare(KvEntryKind kind, const BlockHash& key);
    // Emits the copy of a prepared key into device block / snapshot `device_id`; returns the tier it came from.
    KvTier load(KvEntryKind kind, const BlockHash& key, int32_t device_id, std::vector<StateOp>& ops);

    // The runner's side (runtime/model_runner.cpp): what the ops refer to.
    std::span<std::byte> host_entry(KvEntryKind kind, int32_t entry);
    const StagedEntry& staged(int32_t id) const;
    // Writes a demotion ticket's host entry to the disk tier (the caller has waited for copies into that entry).
    void demote(int32_t ticket);
    // Every op emitted so far has been applied: used staging memory and demotion tickets are released.
    void ops_applied();

  private:
    struct Demotion {
        KvEntryKind kind;
        BlockHash key;
        int32_t entry;
    };
    SnapshotPool& pool(KvEntryKind kind) { return kind == KvEntryKind::kBlock ? host_blocks_ : host_snapshots_; }
    const SnapshotPool& pool(KvEntryKind kind) const {
        return kind == KvEntryKind::kBlock ? host_blocks_ : host_snapshots_;
    }
    int64_t entry_bytes(KvEntryKind kind) const {
        return kind == KvEntryKind::kBlock ? config_.block_bytes : config_.snapshot_bytes;
    }
    std::optional<int32_t> staged_id(KvEntryKind kind, const BlockHash& key) const;
    void trim_staging();

    KvTierConfig config_;
    std::span<std::byte> host_;
    SnapshotPool host_blocks_;
    SnapshotPool host_snapshots_;
    std::unique_ptr<DiskKvStore> disk_;
    std::vector<StagedEntry> staged_;
    std::vector<Demotion> demotions_;
    KvTierStats stats_;
};

}  // namespace dsv4
