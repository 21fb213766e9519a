#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace dsv4 {

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : config_(config),
      blocks_(config.num_blocks),
      snapshots_(config.enable_prefix_caching ? config.num_snapshots : 0),
      slot_used_(config.max_slots, false) {
    DSV4_CHECK(config.max_slots > 0 && config.block_tokens > 0 && config.rewind_capacity >= 0,
               "kv cache: slots ({}) and block size ({}) must be positive", config.max_slots, config.block_tokens);
    for (int32_t s = config.max_slots - 1; s >= 0; --s) free_slots_.push_back(s);
}

double KvCacheManager::usage() const {
    return 1.0 - static_cast<double>(blocks_.num_free()) / static_cast<double>(blocks_.num_blocks());
}

int32_t KvCacheManager::take_slot() {
    DSV4_CHECK(!free_slots_.empty(), "kv cache: no free state slot");
    const int32_t slot = free_slots_.back();
    free_slots_.pop_back();
    slot_used_[slot] = true;
    return slot;
}

void KvCacheManager::release_slot(int32_t slot) {
    DSV4_CHECK(slot >= 0 && slot < config_.max_slots && slot_used_[slot],
               "kv cache: releasing slot {} that is not "
               "in use",
               slot);
    slot_used_[slot] = false;
    free_slots_.push_back(slot);
}

void KvCacheManager::ensure_hashes(SequenceKv& kv, std::span<const int32_t> tokens, int64_t full_blocks) const {
    const int64_t bt = config_.block_tokens;
    DSV4_CHECK(full_blocks * bt <= static_cast<int64_t>(tokens.size()),
               "kv cache: hashing {} blocks of a {}-token "
               "sequence",
               full_blocks, tokens.size());
    for (auto k = static_cast<int64_t>(kv.hashes.size()); k < full_blocks; ++k) {
        const BlockHash parent = k == 0 ? BlockHash{} : kv.hashes[k - 1];
        kv.hashes.push_back(hash_block(parent, tokens.subspan(k * bt, bt)));
    }
}

PrefixHit KvCacheManager::find_prefix(SequenceKv& kv, std::span<const int32_t> tokens) {
    PrefixHit hit;
    if (!prefix_caching() || tokens.empty()) return hit;
    // Blocks that end before the last token: a hit must leave at least that token to compute.
    const int64_t limit = (static_cast<int64_t>(tokens.size()) - 1) / config_.block_tokens;
    ensure_hashes(kv, tokens, limit);
    int64_t matched = 0;
    while (matched < limit && has_block(kv.hashes[matched])) ++matched;
    int64_t usable = deepest_snapshot(kv, matched);
    if (tiers_ != nullptr) usable = prepare_tier_hit(kv, usable);  // reads and checks disk entries
    hit.query_tokens = static_cast<int64_t>(tokens.size());
    hit.matched_tokens = matched * config_.block_tokens;
    kv.snapshot_target = matched > usable ? hit.matched_tokens : 0;  // for limit_chunk on the first chunk already
    if (usable == 0) return hit;
    hit.tokens = usable * config_.block_tokens;
    hit.snapshot = snapshots_.find(kv.hashes[usable - 1]).value_or(-1);
    for (int64_t k = 0; k < usable; ++k) {
        const std::optional<int32_t> block = blocks_.lookup(kv.hashes[k]);
        hit.blocks.push_back(block.value_or(-1));
        const KvTier tier = block ? KvTier::kDevice : *tiers_->find(KvEntryKind::kBlock, kv.hashes[k]);
        hit.tier_tokens[static_cast<size_t>(tier)] += config_.block_tokens;
    }
    return hit;
}

int64_t KvCacheManager::blocks_needed_to_admit(const PrefixHit& hit, int64_t end) const {
    int64_t needed = blocks_for(end) - static_cast<int64_t>(hit.blocks.size());
    for (int32_t b : hit.blocks) needed += b < 0 || blocks_.ref_count(b) == 0 ? 1 : 0;  // lower tiers: a new block
    return needed;
}

void KvCacheManager::admit(SequenceKv& kv, int32_t slot, const PrefixHit& hit, int64_t end, std::vector<StateOp>& ops) {
    DSV4_CHECK(kv.slot < 0 && kv.blocks.empty(), "kv cache: admitting a sequence that still holds state");
    DSV4_CHECK(hit.tokens <= end, "kv cache: chunk end {} is before the cached prefix {}", end, hit.tokens);
    DSV4_CHECK(blocks_needed_to_admit(hit, end) <= blocks_.num_free(), "kv cache: not enough free blocks to admit");
    kv.slot = slot;
    for (int32_t b : hit.blocks) {
        if (b >= 0) blocks_.ref(b);  // first: the blocks loaded below must not evict them
        kv.blocks.push_back(b);
    }
    if (tiers_ != nullptr) load_tier_hit(kv, hit, ops);
    DSV4_CHECK(grow(kv, end), "kv cache: allocation failed after the free-block check");
    ops.push_back(StateOp::reset_slot(slot));
    if (hit.tokens > 0) {
        // A snapshot from a lower tier was loaded into a device snapshot by load_tier_hit.
        const BlockHash& key = kv.hashes[hit.tokens / config_.block_tokens - 1];
        const int32_t snapshot = hit.snapshot >= 0 ? hit.snapshot : *snapshots_.find(key);
        ops.push_back(StateOp::restore_snapshot(slot, snapshot, hit.tokens));
        ++stats_.snapshots_restored;
    }
    stats_.prefix_queries += hit.query_tokens;
    stats_.prefix_hits += hit.tokens;
    for (size_t t = 0; t < hit.tier_tokens.size(); ++t) stats_.prefix_hits_by_tier[t] += hit.tier_tokens[t];
}

bool KvCacheManager::grow(SequenceKv& kv, int64_t end) {
    const int64_t needed = blocks_for(end) - static_cast<int64_t>(kv.blocks.size());
    if (needed <= 0) return true;
    if (needed > blocks_.num_free()) return false;
    for (int64_t i = 0; i < needed; ++i) kv.blocks.push_back(*blocks_.allocate());
    return true;
}

int64_t KvCacheManager::limit_chunk(const SequenceKv& kv, int64_t computed, int64_t end, int64_t prompt_tokens) const {
    if (!prefix_caching() || snapshots_.capacity() == 0) return end;
    const int64_t bt = config_.block_tokens;
    std::array<int64_t, 2> targets = {kv.snapshot_target, prompt_tokens / bt * bt};
    std::sort(targets.begin(), targets.end());
    for (int64_t boundary : targets) {
        if (boundary <= computed || boundary >= end || end - boundary <= config_.rewind_capacity) continue;
        const int64_t block = boundary / bt - 1;
        if (block >= static_cast<int64_t>(kv.hashes.size())) continue;  // hashes unknown: no lookup was made
        if (!has_snapshot(kv.hashes[block])) return boundary;
    }
    return end;
}

void KvCacheManager::on_computed(SequenceKv& kv, std::span<const int32_t> tokens, int64_t before, int64_t after,
                                 std::vector<StateOp>& ops, int64_t written_end) {
    if (!prefix_caching() || after <= before) return;
    const int64_t bt = config_.block_tokens;
    const int64_t full_before = before / bt, full_after = after / bt;
    if (full_after == full_before) return;  // no boundary crossed
    ensure_hashes(kv, tokens, full_after);
    DSV4_CHECK(static_cast<int64_t>(kv.blocks.size()) >= full_after, "kv cache: {} positions computed with {} blocks",
               after, kv.blocks.size());
    for (int64_t k = full_before; k < full_after; ++k) {
        const bool cached = blocks_.register_full(kv.blocks[k], kv.hashes[k]);
        if (cached && tiers_ != nullptr) tiers_->on_cached(KvEntryKind::kBlock, kv.blocks[k], kv.hashes[k], ops);
    }
    const int64_t boundary = full_after * bt;
    if (std::max(after, written_end) - boundary > config_.rewind_capacity || snapshots_.capacity() == 0) return;
    const BlockHash& key = kv.hashes[full_after - 1];
    if (snapshots_.find(key)) return;  // another sequence saved this prefix already
    const int32_t snapshot = *snapshots_.acquire(key);
    ops.push_back(StateOp::save_snapshot(kv.slot, snapshot, boundary));
    ++stats_.snapshots_saved;
    if (tiers_ != nullptr) tiers_->on_cached(KvEntryKind::kSnapshot, snapshot, key, ops);
}

bool KvCacheManager::fork(const SequenceKv& parent, int64_t computed, SequenceKv& child, std::vector<StateOp>& ops) {
    DSV4_CHECK(child.slot >= 0 && child.blocks.empty(), "kv cache: a fork child needs a slot and no blocks");
    const int64_t bt = config_.block_tokens;
    const int64_t full = computed / bt;
    const bool partial = computed % bt != 0;
    DSV4_CHECK(static_cast<int64_t>(parent.blocks.size()) >= full + (partial ? 1 : 0),
               "kv cache: fork parent has "
               "{} blocks for {} positions",
               parent.blocks.size(), computed);
    if (partial && blocks_.num_free() == 0) return false;
    ops.push_back(StateOp::copy_slot(parent.slot, child.slot));
    for (int64_t k = 0; k < full; ++k) {
        blocks_.ref(parent.blocks[k]);
        child.blocks.push_back(parent.blocks[k]);
    }
    if (partial) {
        const int32_t copy = *blocks_.allocate();
        ops.push_back(StateOp::copy_block(parent.blocks[full], copy));
        child.blocks.push_back(copy);
    }
    const auto hashed = std::min<int64_t>(full, static_cast<int64_t>(parent.hashes.size()));
    child.hashes.assign(parent.hashes.begin(), parent.hashes.begin() + hashed);
    child.snapshot_target = 0;
    return true;
}

void KvCacheManager::free(SequenceKv& kv) {
    for (auto it = kv.blocks.rbegin(); it != kv.blocks.rend(); ++it) blocks_.release(*it);
    kv.blocks.clear();
    kv.snapshot_target = 0;
    if (kv.slot >= 0) {
        release_slot(kv.slot);
        kv.slot = -1;
    }
}

}  // namespace dsv4
