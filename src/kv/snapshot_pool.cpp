#include "kv/snapshot_pool.h"

#include "core/error.h"

namespace dsv4 {

SnapshotPool::SnapshotPool(int32_t num_snapshots) : key_(num_snapshots), lru_(num_snapshots) {
    DSV4_CHECK(num_snapshots >= 0, "snapshot pool: {} snapshots", num_snapshots);
    for (int32_t s = num_snapshots - 1; s >= 0; --s) free_.push_back(s);
}

std::optional<int32_t> SnapshotPool::find(const BlockHash& hash) {
    auto it = by_hash_.find(hash);
    if (it == by_hash_.end()) return std::nullopt;
    lru_.remove(it->second);
    lru_.push_back(it->second);
    return it->second;
}

std::optional<int32_t> SnapshotPool::acquire(const BlockHash& hash) {
    DSV4_CHECK(!by_hash_.contains(hash), "snapshot pool: prefix already has a snapshot");
    int32_t id = LruList::kNone;
    if (!free_.empty()) {
        id = free_.back();
        free_.pop_back();
    } else {
        id = lru_.pop_front();
        if (id == LruList::kNone) return std::nullopt;
        by_hash_.erase(*key_[id]);
    }
    key_[id] = hash;
    by_hash_.emplace(hash, id);
    lru_.push_back(id);
    return id;
}

std::optional<BlockHash> SnapshotPool::victim() const {
    if (!free_.empty() || lru_.empty()) return std::nullopt;
    return key_[lru_.front()];
}

void SnapshotPool::erase(const BlockHash& hash) {
    auto it = by_hash_.find(hash);
    if (it == by_hash_.end()) return;
    const int32_t id = it->second;
    lru_.remove(id);
    key_[id].reset();
    by_hash_.erase(it);
    free_.push_back(id);
}

}  // namespace dsv4
