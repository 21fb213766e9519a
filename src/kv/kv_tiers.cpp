#include "kv/kv_tiers.h"

#include <algorithm>

#include "core/error.h"

namespace dsv4 {
namespace {

// Disk reads verified for hits that were not admitted yet stay staged (a waiting request is looked up again every
// step) up to this many bytes; older ones are dropped and read again when needed.
constexpr int64_t kMaxUnusedStagingBytes = int64_t{4} << 30;

uint64_t mix(uint64_t h, uint64_t v) {
    return (h ^ v) * 0x100000001B3ull;
}

}  // namespace

KvTierConfig host_tier_config(int64_t bytes, const StateLayout& layout) {
    KvTierConfig c;
    c.block_bytes = layout.block_bytes;
    c.snapshot_bytes = layout.snapshot_bytes;
    if (bytes <= 0 || layout.block_bytes <= 0 || layout.snapshot_bytes <= 0) return c;
    c.host_snapshots = static_cast<int32_t>(std::min<int64_t>(bytes / 5 / layout.snapshot_bytes, INT32_MAX));
    if (c.host_snapshots == 0 && bytes >= layout.snapshot_bytes + layout.block_bytes) c.host_snapshots = 1;
    const int64_t left = bytes - c.host_snapshots * layout.snapshot_bytes;
    c.host_blocks = static_cast<int32_t>(std::min<int64_t>(left / layout.block_bytes, INT32_MAX));
    if (c.host_blocks == 0 || c.host_snapshots == 0) c.host_blocks = c.host_snapshots = 0;
    return c;
}

uint64_t state_layout_fingerprint(const StateLayout& layout, int block_tokens) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (int64_t v : {static_cast<int64_t>(layout.dtype), layout.row_bytes, layout.indexer_key_bytes, layout.slot_bytes,
                      layout.block_bytes, layout.snapshot_bytes, static_cast<int64_t>(block_tokens)}) {
        h = mix(h, static_cast<uint64_t>(v));
    }
    return h;
}

KvTiers::KvTiers(const KvTierConfig& config, std::span<std::byte> host_memory)
    : config_(config), host_(host_memory), host_blocks_(config.host_blocks), host_snapshots_(config.host_snapshots) {
    DSV4_CHECK(config.host_blocks > 0 && config.host_snapshots > 0,
               "kv tiers: the host pool needs at least one block and one snapshot entry ({} and {})",
               config.host_blocks, config.host_snapshots);
    DSV4_CHECK(static_cast<int64_t>(host_memory.size()) >= config.host_bytes(),
               "kv tiers: the host pool has {} bytes, {} are needed", host_memory.size(), config.host_bytes());
    if (!config.disk_dir.empty()) {
        disk_ = std::make_unique<DiskKvStore>(config.disk_dir, config.disk_bytes, config.fingerprint);
    }
}

std::span<std::byte> KvTiers::host_entry(KvEntryKind kind, int32_t entry) {
    const int32_t count = kind == KvEntryKind::kBlock ? config_.host_blocks : config_.host_snapshots;
    DSV4_CHECK(entry >= 0 && entry < count, "kv tiers: host entry {} is outside [0, {})", entry, count);
    const int64_t base = kind == KvEntryKind::kBlock ? 0 : config_.host_blocks * config_.block_bytes;
    const int64_t size = entry_bytes(kind);
    return host_.subspan(static_cast<size_t>(base + entry * size), static_cast<size_t>(size));
}

void KvTiers::on_cached(KvEntryKind kind, int32_t device_id, const BlockHash& key, std::vector<StateOp>& ops) {
    SnapshotPool& p = pool(kind);
    if (p.find(key)) return;  // the host has it (now most recently used)
    const std::optional<BlockHash> victim = p.victim();
    const int32_t entry = *p.acquire(key);  // reuses the victim's entry when the pool is full
    if (victim) {
        ++stats_.host_evictions;
        if (disk_ && !disk_->contains(kind, *victim)) {
            demotions_.push_back({kind, *victim, entry});
            ops.push_back(StateOp::tier(StateOp::Kind::kDemote, static_cast<int32_t>(demotions_.size() - 1)));
        }
    }
    const auto op = kind == KvEntryKind::kBlock ? StateOp::Kind::kOffloadBlock : StateOp::Kind::kOffloadSnapshot;
    ops.push_back(StateOp::tier(op, device_id, entry));
    stats_.offloaded_bytes += entry_bytes(kind);
}

std::optional<KvTier> KvTiers::find(KvEntryKind kind, const BlockHash& key) const {
    if (pool(kind).contains(key)) return KvTier::kHost;
    if (staged_id(kind, key) || (disk_ && disk_->contains(kind, key))) return KvTier::kDisk;
    return std::nullopt;
}

std::optional<int32_t> KvTiers::staged_id(KvEntryKind kind, const BlockHash& key) const {
    for (size_t i = 0; i < staged_.size(); ++i) {
        if (staged_[i].kind == kind && staged_[i].key == key) return static_cast<int32_t>(i);
    }
    return std::nullopt;
}

bool KvTiers::prepare(KvEntryKind kind, const BlockHash& key) {
    if (pool(kind).contains(key) || staged_id(kind, key)) return true;
    if (!disk_ || !disk_->contains(kind, key)) return false;
    StagedEntry s{kind, key, std::vector<std::byte>(static_cast<size_t>(entry_bytes(kind))), false};
    if (!disk_->read(kind, key, s.bytes)) return false;  // bad file: removed, the prefix is recomputed
    staged_.push_back(std::move(s));
    return true;
}

KvTier KvTiers::load(KvEntryKind kind, const BlockHash& key, int32_t device_id, std::vector<StateOp>& ops) {
    const bool block = kind == KvEntryKind::kBlock;
    if (const std::optional<int32_t> entry = pool(kind).find(key)) {
        ops.push_back(
            StateOp::tier(block ? StateOp::Kind::kLoadBlock : StateOp::Kind::kLoadSnapshot, *entry, device_id));
        stats_.loaded_bytes += entry_bytes(kind);
        return KvTier::kHost;
    }
    const std::optional<int32_t> id = staged_id(kind, key);
    DSV4_CHECK(id.has_value(), "kv tiers: loading a {} that was not prepared", block ? "block" : "snapshot");
    staged_[*id].used = true;
    ops.push_back(StateOp::tier(StateOp::Kind::kLoadStaged, *id, device_id));
    stats_.staged_bytes += entry_bytes(kind);
    return KvTier::kDisk;
}

const StagedEntry& KvTiers::staged(int32_t id) const {
    DSV4_CHECK(id >= 0 && id < static_cast<int32_t>(staged_.size()), "kv tiers: staged read {} does not exist", id);
    return staged_[id];
}

void KvTiers::demote(int32_t ticket) {
    DSV4_CHECK(ticket >= 0 && ticket < static_cast<int32_t>(demotions_.size()), "kv tiers: demotion {} is unknown",
               ticket);
    const Demotion& d = demotions_[ticket];
    disk_->write(d.kind, d.key, host_entry(d.kind, d.entry));
    stats_.demoted_bytes += entry_bytes(d.kind);
}

void KvTiers::ops_applied() {
    demotions_.clear();
    std::erase_if(staged_, [](const StagedEntry& s) { return s.used; });
    trim_staging();  // only here: ops refer to staged entries by index until they are applied
}

void KvTiers::trim_staging() {
    int64_t unused = 0;
    for (const StagedEntry& s : staged_) unused += s.used ? 0 : static_cast<int64_t>(s.bytes.size());
    for (auto it = staged_.begin(); it != staged_.end() && unused > kMaxUnusedStagingBytes;) {
        if (it->used) {
            ++it;
            continue;
        }
        unused -= static_cast<int64_t>(it->bytes.size());
        it = staged_.erase(it);
    }
}

}  // namespace dsv4
