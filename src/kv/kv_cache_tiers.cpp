// The KV manager's side of the host / disk tiers (kv_tiers.h): a lookup continues below the device where its cache
// ends, disk entries are checked before a hit counts on them, and admit() copies the blocks and the snapshot a hit
// uses from the host pool or the disk back into device blocks and a device snapshot.
#include "core/error.h"
#include "kv/kv_cache_manager.h"

namespace dsv4 {

bool KvCacheManager::has_block(const BlockHash& key) const {
    return blocks_.lookup(key) || (tiers_ != nullptr && tiers_->find(KvEntryKind::kBlock, key));
}

bool KvCacheManager::has_snapshot(const BlockHash& key) const {
    if (snapshots_.contains(key)) return true;
    // A snapshot from below is loaded into a device snapshot before it is restored: the device needs room for one.
    return tiers_ != nullptr && snapshots_.capacity() > 0 && tiers_->find(KvEntryKind::kSnapshot, key);
}

int64_t KvCacheManager::deepest_snapshot(const SequenceKv& kv, int64_t blocks) const {
    while (blocks > 0 && !has_snapshot(kv.hashes[blocks - 1])) --blocks;
    return blocks;
}

// Reads and checks every disk entry a hit of `usable` blocks would use (host entries need nothing), backing off to
// the deepest boundary before a bad one: a truncated or corrupted file only shortens the hit.
int64_t KvCacheManager::prepare_tier_hit(const SequenceKv& kv, int64_t usable) {
    while (usable > 0) {
        int64_t k = 0;
        while (k < usable && (blocks_.lookup(kv.hashes[k]) || tiers_->prepare(KvEntryKind::kBlock, kv.hashes[k]))) ++k;
        if (k < usable) {
            usable = deepest_snapshot(kv, k);
            continue;
        }
        const BlockHash& key = kv.hashes[usable - 1];
        if (snapshots_.contains(key) || tiers_->prepare(KvEntryKind::kSnapshot, key)) return usable;
        usable = deepest_snapshot(kv, usable - 1);
    }
    return 0;
}

// Gives the hit's lower-tier blocks device blocks (cached under their keys again) and loads them; the same for its
// snapshot. Device blocks the sequence already references are never the ones evicted to make room.
void KvCacheManager::load_tier_hit(SequenceKv& kv, const PrefixHit& hit, std::vector<StateOp>& ops) {
    for (size_t k = 0; k < hit.blocks.size(); ++k) {
        if (hit.blocks[k] >= 0) continue;
        const std::optional<int32_t> block = blocks_.allocate();
        DSV4_CHECK(block.has_value(), "kv cache: no free block for a prefix block from the {} tier", "host");
        tiers_->load(KvEntryKind::kBlock, kv.hashes[k], *block, ops);
        blocks_.register_full(*block, kv.hashes[k]);
        kv.blocks[k] = *block;
    }
    if (hit.tokens == 0 || hit.snapshot >= 0) return;
    const BlockHash& key = kv.hashes[hit.tokens / config_.block_tokens - 1];
    const int32_t snapshot = *snapshots_.acquire(key);
    tiers_->load(KvEntryKind::kSnapshot, key, snapshot, ops);
}

}  // namespace dsv4
