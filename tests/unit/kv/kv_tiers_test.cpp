// The prefix cache's tiers below the device as plain code: the disk store's files (checksums, truncation, foreign
// files, the size cap) and the KvTiers policy (write-through, LRU eviction with demotion to disk, staged disk reads),
// and the KV manager continuing a lookup into them.
#include "kv/kv_tiers.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "kv/disk_tier.h"
#include "kv/kv_cache_manager.h"

namespace dsv4 {
namespace {

struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& name)
        : path(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
        std::filesystem::remove_all(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
};

std::vector<std::byte> pattern(size_t n, int seed) {
    std::vector<std::byte> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 31 + seed * 7) & 0xff);
    return v;
}

BlockHash key(uint64_t n) {
    return {n * 0x9E3779B97F4A7C15ull + 1, n};
}

TEST(DiskKvStore, RoundTripsAndDetectsDamagedFiles) {
    const TempDir dir("dsv4_disk_kv_store_test");
    DiskKvStore disk(dir.path, 1 << 20, 42);
    const std::vector<std::byte> a = pattern(1000, 1), b = pattern(1000, 2);
    disk.write(KvEntryKind::kBlock, key(1), a);
    disk.write(KvEntryKind::kSnapshot, key(1), b);  // same key, other kind: another file
    std::vector<std::byte> out(1000);
    ASSERT_TRUE(disk.read(KvEntryKind::kBlock, key(1), out));
    EXPECT_EQ(out, a);
    ASSERT_TRUE(disk.read(KvEntryKind::kSnapshot, key(1), out));
    EXPECT_EQ(out, b);
    std::vector<std::byte> wrong_size(999);
    EXPECT_FALSE(disk.read(KvEntryKind::kBlock, key(1), wrong_size)) << "a size mismatch is a bad file";
    EXPECT_FALSE(disk.contains(KvEntryKind::kBlock, key(1)));

    // A flipped payload byte (checksum), a truncated file and a foreign header are all detected and removed.
    disk.write(KvEntryKind::kBlock, key(2), a);
    disk.write(KvEntryKind::kBlock, key(3), a);
    disk.write(KvEntryKind::kBlock, key(4), a);
    {
        std::fstream f(disk.path_of(KvEntryKind::kBlock, key(2)), std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(DiskKvStore::kHeaderBytes + 500));
        f.put('\x7f');
    }
    const auto truncated = disk.path_of(KvEntryKind::kBlock, key(3));
    std::filesystem::resize_file(truncated, std::filesystem::file_size(truncated) - 10);
    std::filesystem::copy_file(disk.path_of(KvEntryKind::kBlock, key(2)), disk.path_of(KvEntryKind::kBlock, key(4)),
                               std::filesystem::copy_options::overwrite_existing);  // another key's header
    const int64_t corrupt = disk.stats().corrupt;
    for (uint64_t k : {2, 3, 4}) {
        EXPECT_FALSE(disk.read(KvEntryKind::kBlock, key(k), out)) << k;
        EXPECT_FALSE(std::filesystem::exists(disk.path_of(KvEntryKind::kBlock, key(k)))) << k;
    }
    EXPECT_EQ(disk.stats().corrupt, corrupt + 3);

    // Another layout (fingerprint) refuses the files of this one.
    disk.write(KvEntryKind::kBlock, key(5), a);
    DiskKvStore reopened(dir.path, 1 << 20, 43);
    EXPECT_FALSE(reopened.contains(KvEntryKind::kBlock, key(5))) << "an earlier run's files are not indexed";
    EXPECT_FALSE(std::filesystem::exists(disk.path_of(KvEntryKind::kBlock, key(5)))) << "and they are removed";
}

TEST(DiskKvStore, EvictsLeastRecentlyUsedToStayWithinTheCap) {
    const TempDir dir("dsv4_disk_kv_cap_test");
    const size_t payload = 1000;
    const auto file = static_cast<int64_t>(payload + DiskKvStore::kHeaderBytes);
    DiskKvStore disk(dir.path, 3 * file, 1);
    const std::vector<std::byte> a = pattern(payload, 3);
    std::vector<std::byte> out(payload);
    for (uint64_t k = 0; k < 3; ++k) disk.write(KvEntryKind::kBlock, key(k), a);
    ASSERT_TRUE(disk.read(KvEntryKind::kBlock, key(0), out));  // 0 becomes the most recently used
    disk.write(KvEntryKind::kBlock, key(3), a);                // evicts 1
    EXPECT_TRUE(disk.contains(KvEntryKind::kBlock, key(0)));
    EXPECT_FALSE(disk.contains(KvEntryKind::kBlock, key(1)));
    EXPECT_TRUE(disk.contains(KvEntryKind::kBlock, key(2)));
    EXPECT_EQ(disk.used_bytes(), 3 * file);
    EXPECT_EQ(disk.stats().evicted, 1);
    disk.write(KvEntryKind::kBlock, key(9), pattern(4 * payload, 1));  // larger than the cap: dropped, not an error
    EXPECT_FALSE(disk.contains(KvEntryKind::kBlock, key(9)));
}

KvTierConfig small_tiers(const std::filesystem::path& disk_dir = {}) {
    KvTierConfig c;
    c.host_blocks = 2;
    c.host_snapshots = 1;
    c.block_bytes = 64;
    c.snapshot_bytes = 96;
    c.disk_dir = disk_dir;
    c.disk_bytes = 1 << 20;
    return c;
}

TEST(KvTiers, WriteThroughEvictsLeastRecentlyUsedAndDemotesToDisk) {
    const TempDir dir("dsv4_kv_tiers_test");
    const KvTierConfig c = small_tiers(dir.path);
    std::vector<std::byte> memory(static_cast<size_t>(c.host_bytes()));
    KvTiers tiers(c, memory);
    std::vector<StateOp> ops;
    tiers.on_cached(KvEntryKind::kBlock, 10, key(1), ops);
    tiers.on_cached(KvEntryKind::kBlock, 11, key(2), ops);
    ASSERT_EQ(ops.size(), 2u);
    EXPECT_EQ(ops[0], StateOp::tier(StateOp::Kind::kOffloadBlock, 10, 0));
    EXPECT_EQ(ops[1], StateOp::tier(StateOp::Kind::kOffloadBlock, 11, 1));
    ops.clear();
    tiers.on_cached(KvEntryKind::kBlock, 12, key(1), ops);  // already on the host: touched, no copy
    EXPECT_TRUE(ops.empty());
    // The pool is full: key 2 (least recently used) is demoted to disk before its entry takes key 3.
    std::ranges::copy(pattern(64, 5), tiers.host_entry(KvEntryKind::kBlock, 1).begin());
    tiers.on_cached(KvEntryKind::kBlock, 13, key(3), ops);
    ASSERT_EQ(ops.size(), 2u);
    EXPECT_EQ(ops[0].kind, StateOp::Kind::kDemote);
    EXPECT_EQ(ops[1], StateOp::tier(StateOp::Kind::kOffloadBlock, 13, 1));
    tiers.demote(ops[0].a);  // what the runner does, in order
    tiers.ops_applied();
    EXPECT_EQ(tiers.find(KvEntryKind::kBlock, key(2)), KvTier::kDisk);
    EXPECT_EQ(tiers.find(KvEntryKind::kBlock, key(3)), KvTier::kHost);
    EXPECT_EQ(tiers.find(KvEntryKind::kBlock, key(7)), std::nullopt);

    // A disk hit: prepared (read and checked), loaded from staging with the bytes that were demoted.
    ops.clear();
    ASSERT_TRUE(tiers.prepare(KvEntryKind::kBlock, key(2)));
    EXPECT_EQ(tiers.load(KvEntryKind::kBlock, key(2), 20, ops), KvTier::kDisk);
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_EQ(ops[0].kind, StateOp::Kind::kLoadStaged);
    EXPECT_EQ(tiers.staged(ops[0].a).bytes, pattern(64, 5));
    EXPECT_EQ(tiers.load(KvEntryKind::kBlock, key(3), 21, ops), KvTier::kHost);
    EXPECT_EQ(ops[1], StateOp::tier(StateOp::Kind::kLoadBlock, 1, 21));
    tiers.ops_applied();
    EXPECT_FALSE(tiers.prepare(KvEntryKind::kBlock, key(7)));
}

// The KV manager with tiers, at the level of the ops it emits: a prefix whose device blocks and snapshot were
// evicted is found in the host pool, and admit() loads it into new device blocks and a device snapshot.
TEST(KvTiers, ManagerFindsEvictedPrefixesInTheHostPool) {
    KvCacheConfig kc;
    kc.max_slots = 2;
    kc.num_blocks = 3;
    kc.block_tokens = 4;
    kc.num_snapshots = 1;
    kc.rewind_capacity = 2;
    KvCacheManager kv(kc);
    KvTierConfig tc = small_tiers();
    tc.host_blocks = 4;
    tc.host_snapshots = 2;
    std::vector<std::byte> memory(static_cast<size_t>(tc.host_bytes()));
    KvTiers tiers(tc, memory);
    kv.attach_tiers(&tiers);

    std::vector<int32_t> prompt(10);
    std::iota(prompt.begin(), prompt.end(), 100);
    auto run = [&](std::vector<int32_t> tokens, PrefixHit& hit) {
        SequenceKv s;
        hit = kv.find_prefix(s, tokens);
        std::vector<StateOp> ops;
        kv.admit(s, kv.take_slot(), hit, static_cast<int64_t>(tokens.size()), ops);
        const std::vector<StateOp> admit_ops = ops;
        ops.clear();
        kv.on_computed(s, tokens, hit.tokens, static_cast<int64_t>(tokens.size()), ops);
        tiers.ops_applied();
        kv.free(s);
        return std::make_pair(admit_ops, ops);
    };
    PrefixHit hit;
    const auto [first_admit, first_computed] = run(prompt, hit);
    EXPECT_EQ(hit.tokens, 0);
    // Two full blocks cached and written through, one snapshot at 8 saved and written through.
    EXPECT_EQ(std::ranges::count(first_computed, StateOp::Kind::kOffloadBlock, &StateOp::kind), 2);
    EXPECT_EQ(std::ranges::count(first_computed, StateOp::Kind::kOffloadSnapshot, &StateOp::kind), 1);

    std::vector<int32_t> other(10);
    std::iota(other.begin(), other.end(), 500);
    run(other, hit);  // takes every device block and the device snapshot
    EXPECT_FALSE(kv.block_pool().lookup(hash_block({}, std::span(prompt).subspan(0, 4))));

    std::vector<int32_t> again = prompt;
    again[9] = 7;
    const auto [admit_ops, computed_ops] = run(again, hit);
    EXPECT_EQ(hit.tokens, 8);
    EXPECT_EQ(hit.tier_tokens[static_cast<size_t>(KvTier::kHost)], 8);
    EXPECT_EQ(std::ranges::count(admit_ops, StateOp::Kind::kLoadBlock, &StateOp::kind), 2);
    EXPECT_EQ(std::ranges::count(admit_ops, StateOp::Kind::kLoadSnapshot, &StateOp::kind), 1);
    EXPECT_EQ(admit_ops.back().kind, StateOp::Kind::kRestoreSnapshot);  // after the loads
    EXPECT_EQ(kv.stats().prefix_hits_by_tier[static_cast<size_t>(KvTier::kHost)], 8);
}

}  // namespace
}  // namespace dsv4
