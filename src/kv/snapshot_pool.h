// SnapshotPool: the bounded set of prefix-cache boundary snapshots (backend.h save_snapshot), keyed by the hash of
// the block that ends at the boundary. Keying by hash rather than by block keeps a snapshot valid whichever physical
// block holds that prefix; a snapshot whose prefix blocks were evicted is simply never reached by a lookup and ages
// out. Eviction is least recently used (saved or hit). The host tier (kv_tiers.h) indexes its pools of blocks and
// snapshots with the same structure.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/lru_list.h"

namespace dsv4 {

class SnapshotPool {
  public:
    explicit SnapshotPool(int32_t num_snapshots);

    int32_t capacity() const { return static_cast<int32_t>(key_.size()); }
    int32_t num_used() const { return static_cast<int32_t>(by_hash_.size()); }

    // The snapshot saved for `hash`, marked as recently used.
    std::optional<int32_t> find(const BlockHash& hash);
    bool contains(const BlockHash& hash) const { return by_hash_.contains(hash); }
    // A snapshot id to save `hash` into: a free one, else the least recently used one (its old key is dropped).
    // nullopt when the pool has no snapshots at all.
    std::optional<int32_t> acquire(const BlockHash& hash);
    // The key acquire() would evict now (nullopt while a free id is left or the pool is empty).
    std::optional<BlockHash> victim() const;
    // Forgets `hash` (its id becomes free); no effect when it is not held.
    void erase(const BlockHash& hash);

  private:
    std::vector<std::optional<BlockHash>> key_;
    std::unordered_map<BlockHash, int32_t, BlockHashHasher> by_hash_;
    std::vector<int32_t> free_;
    LruList lru_;  // used snapshots, least recently used first
};

}  // namespace dsv4
