// BlockPool: the paged blocks of the backend's state (compressed rows and indexer keys), with reference counts and
// the prefix cache's hash -> block map. A block with no reference is free; if it also holds a cached prefix it
// stays findable until it is reallocated (LRU eviction: the free queue's front is evicted first).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/lru_list.h"

namespace dsv4 {

class BlockPool {
  public:
    explicit BlockPool(int32_t num_blocks);

    int32_t num_blocks() const { return static_cast<int32_t>(ref_.size()); }
    // Blocks without a reference (free or cached-and-evictable): what allocate() can hand out.
    int32_t num_free() const { return free_.size(); }
    int32_t num_cached() const { return static_cast<int32_t>(cached_.size()); }
    int32_t ref_count(int32_t block) const { return ref_[block]; }
    bool is_cached(int32_t block) const { return hash_of_[block].has_value(); }

    // A block with one reference, evicting the least recently freed cached block if no plain free block is left.
    std::optional<int32_t> allocate();
    // Adds a reference (a prefix hit or a fork sharing the block); a free cached block leaves the free queue.
    void ref(int32_t block);
    // Drops a reference. At zero the block is free: cached blocks go to the back of the queue (evicted last),
    // uncached ones to the front (nothing to keep).
    void release(int32_t block);

    std::optional<int32_t> lookup(const BlockHash& hash) const;
    // Records that a full block holds the prefix `hash`. If another block already holds it, the map keeps that one
    // and this block stays uncached (it is freed like any other). Returns whether this block became the cached one.
    bool register_full(int32_t block, const BlockHash& hash);

  private:
    void check(int32_t block) const;

    std::vector<int32_t> ref_;
    std::vector<std::optional<BlockHash>> hash_of_;
    std::unordered_map<BlockHash, int32_t, BlockHashHasher> cached_;
    LruList free_;
};

}  // namespace dsv4
