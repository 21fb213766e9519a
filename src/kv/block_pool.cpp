#include "kv/block_pool.h"

#include "core/error.h"

namespace dsv4 {

BlockPool::BlockPool(int32_t num_blocks) : ref_(num_blocks, 0), hash_of_(num_blocks), free_(num_blocks) {
    DSV4_CHECK(num_blocks > 0, "block pool: {} blocks", num_blocks);
    for (int32_t b = 0; b < num_blocks; ++b) free_.push_back(b);
}

void BlockPool::check(int32_t block) const {
    DSV4_CHECK(block >= 0 && block < num_blocks(), "block pool: block {} is outside [0, {})", block, num_blocks());
}

std::optional<int32_t> BlockPool::allocate() {
    const int32_t block = free_.pop_front();
    if (block == LruList::kNone) return std::nullopt;
    if (hash_of_[block]) {  // evict the cached prefix it held
        cached_.erase(*hash_of_[block]);
        hash_of_[block].reset();
    }
    ref_[block] = 1;
    return block;
}

void BlockPool::ref(int32_t block) {
    check(block);
    if (ref_[block] == 0) free_.remove(block);
    ++ref_[block];
}

void BlockPool::release(int32_t block) {
    check(block);
    DSV4_CHECK(ref_[block] > 0, "block pool: block {} released more often than referenced", block);
    if (--ref_[block] > 0) return;
    if (hash_of_[block]) {
        free_.push_back(block);
    } else {
        free_.push_front(block);
    }
}

std::optional<int32_t> BlockPool::lookup(const BlockHash& hash) const {
    auto it = cached_.find(hash);
    if (it == cached_.end()) return std::nullopt;
    return it->second;
}

bool BlockPool::register_full(int32_t block, const BlockHash& hash) {
    check(block);
    DSV4_CHECK(ref_[block] > 0, "block pool: registering free block {}", block);
    if (hash_of_[block]) {  // shared by a fork or a prefix hit: every holder has the same tokens in it
        DSV4_CHECK(*hash_of_[block] == hash, "block pool: block {} is cached under another prefix", block);
        return true;
    }
    if (cached_.contains(hash)) return false;
    cached_.emplace(hash, block);
    hash_of_[block] = hash;
    return true;
}

}  // namespace dsv4
