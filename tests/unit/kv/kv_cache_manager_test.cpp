// KvCacheManager: slots, block tables, prefix lookups that back off to a snapshot, the state ops it emits,
// chunk limits at snapshot boundaries, forks with a copied partial block, and that everything is returned.
#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/error.h"

namespace dsv4 {
namespace {

constexpr int kBlock = 128;

KvCacheConfig config(int blocks = 16, int slots = 4, int snapshots = 4) {
    KvCacheConfig c;
    c.max_slots = slots;
    c.num_blocks = blocks;
    c.block_tokens = kBlock;
    c.num_snapshots = snapshots;
    c.rewind_capacity = 16;
    return c;
}

std::vector<int32_t> tokens(int n, int32_t offset = 0) {
    std::vector<int32_t> t(n);
    std::iota(t.begin(), t.end(), offset);
    return t;
}

// Admits a sequence with its cached prefix, computing [hit, end) in one step.
PrefixHit admit(KvCacheManager& kv, SequenceKv& seq, const std::vector<int32_t>& toks, int64_t end,
                std::vector<StateOp>& ops) {
    PrefixHit hit = kv.find_prefix(seq, toks);
    kv.admit(seq, kv.take_slot(), hit, end, ops);
    return hit;
}

TEST(KvCacheManager, AdmitAllocatesBlocksAndResetsTheSlot) {
    KvCacheManager kv(config());
    SequenceKv seq;
    std::vector<StateOp> ops;
    const auto toks = tokens(300);
    const PrefixHit hit = admit(kv, seq, toks, 300, ops);
    EXPECT_EQ(hit.tokens, 0);
    EXPECT_EQ(seq.blocks.size(), 3u);
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_EQ(ops[0], StateOp::reset_slot(seq.slot));
    EXPECT_EQ(kv.num_free_blocks(), 13);
    EXPECT_EQ(kv.num_free_slots(), 3);
    kv.free(seq);
    EXPECT_EQ(kv.num_free_blocks(), 16);
    EXPECT_EQ(kv.num_free_slots(), 4);
    EXPECT_TRUE(seq.blocks.empty());
    EXPECT_EQ(seq.slot, -1);
}

TEST(KvCacheManager, HitRestoresTheSnapshotAndSharesBlocks) {
    KvCacheManager kv(config());
    std::vector<StateOp> ops;
    const auto toks = tokens(300);
    SequenceKv a;
    admit(kv, a, toks, 300, ops);
    ops.clear();
    kv.on_computed(a, toks, 0, 256, ops);  // ends exactly on a boundary: snapshot saved
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_EQ(ops[0].kind, StateOp::Kind::kSaveSnapshot);
    EXPECT_EQ(ops[0].a, a.slot);
    EXPECT_EQ(ops[0].boundary, 256);
    const int32_t snapshot = ops[0].b;

    auto other = toks;
    other[270] = 9999;  // same first 270 tokens
    SequenceKv b;
    ops.clear();
    const PrefixHit hit = admit(kv, b, other, 300, ops);
    EXPECT_EQ(hit.tokens, 256);
    EXPECT_EQ(hit.matched_tokens, 256);
    ASSERT_EQ(ops.size(), 2u);
    EXPECT_EQ(ops[0], StateOp::reset_slot(b.slot));
    EXPECT_EQ(ops[1], StateOp::restore_snapshot(b.slot, snapshot, 256));
    ASSERT_EQ(b.blocks.size(), 3u);
    EXPECT_EQ(b.blocks[0], a.blocks[0]);
    EXPECT_EQ(b.blocks[1], a.blocks[1]);
    EXPECT_NE(b.blocks[2], a.blocks[2]);
    EXPECT_EQ(kv.block_pool().ref_count(a.blocks[0]), 2);
    EXPECT_EQ(kv.stats().prefix_hits, 256);
}

TEST(KvCacheManager, HitBacksOffToTheLastSnapshotAndTargetsTheMatchedBoundary) {
    KvCacheManager kv(config());
    std::vector<StateOp> ops;
    const auto toks = tokens(400);
    SequenceKv a;
    admit(kv, a, toks, 400, ops);
    ops.clear();
    kv.on_computed(a, toks, 0, 128, ops);    // snapshot at 128
    kv.on_computed(a, toks, 128, 300, ops);  // 300 - 256 > rewind capacity: no snapshot at 256
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_EQ(ops[0].boundary, 128);

    auto other = toks;
    other[350] = 7;
    SequenceKv b;
    const PrefixHit hit = kv.find_prefix(b, other);
    EXPECT_EQ(hit.matched_tokens, 256);  // blocks 0 and 1 are cached ...
    EXPECT_EQ(hit.tokens, 128);          // ... but only boundary 128 has a snapshot
    ops.clear();
    kv.admit(b, kv.take_slot(), hit, 300, ops);
    EXPECT_EQ(b.snapshot_target, 256);
    // The chunk stops at 256 so that its snapshot can be saved.
    EXPECT_EQ(kv.limit_chunk(b, 128, 300, 400), 256);
    ops.clear();
    kv.on_computed(b, other, 128, 256, ops);
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_EQ(ops[0].kind, StateOp::Kind::kSaveSnapshot);
    EXPECT_EQ(ops[0].boundary, 256);
    // Now a third sequence resumes at 256 (on a's cached blocks with b's snapshot).
    SequenceKv c;
    EXPECT_EQ(kv.find_prefix(c, other).tokens, 256);
    // Once saved, the chunk limit no longer stops there.
    EXPECT_EQ(kv.limit_chunk(b, 128, 300, 300), 300);
}

TEST(KvCacheManager, ChunkStopsAtThePromptsLastBoundary) {
    KvCacheManager kv(config());
    SequenceKv a;
    const auto toks = tokens(300);
    kv.find_prefix(a, toks);  // hashes the prompt's blocks
    EXPECT_EQ(kv.limit_chunk(a, 0, 300, 300), 256);
    EXPECT_EQ(kv.limit_chunk(a, 0, 200, 300), 200);  // the boundary is beyond the chunk
    EXPECT_EQ(kv.limit_chunk(a, 0, 266, 300), 266);  // within the rewind capacity: saved after the step anyway
    EXPECT_EQ(kv.limit_chunk(a, 256, 300, 300), 300);
}

TEST(KvCacheManager, HitNeverCoversTheLastToken) {
    KvCacheManager kv(config());
    std::vector<StateOp> ops;
    const auto toks = tokens(256);
    SequenceKv a;
    admit(kv, a, toks, 256, ops);
    kv.on_computed(a, toks, 0, 128, ops);
    kv.on_computed(a, toks, 128, 256, ops);
    SequenceKv b;
    const PrefixHit hit = kv.find_prefix(b, toks);
    EXPECT_EQ(hit.tokens, 128);  // 256 would leave no token to compute
    auto longer = tokens(257);
    SequenceKv c;
    EXPECT_EQ(kv.find_prefix(c, longer).tokens, 256);
}

TEST(KvCacheManager, EvictedBlocksEndTheChain) {
    KvCacheManager kv(config(/*blocks=*/3));
    std::vector<StateOp> ops;
    const auto toks = tokens(300);
    SequenceKv a;
    admit(kv, a, toks, 256, ops);
    kv.on_computed(a, toks, 0, 128, ops);
    kv.on_computed(a, toks, 128, 256, ops);
    kv.free(a);
    EXPECT_EQ(kv.num_free_blocks(), 3);
    EXPECT_EQ(kv.block_pool().num_cached(), 2);
    // Another prompt takes every block: the cached prefix is evicted (the tail block first).
    SequenceKv b;
    admit(kv, b, tokens(300, 5000), 300, ops);
    EXPECT_EQ(kv.block_pool().num_cached(), 0);
    kv.free(b);
    SequenceKv c;
    EXPECT_EQ(kv.find_prefix(c, toks).tokens, 0);
}

TEST(KvCacheManager, GrowFailsWithoutChangingAnything) {
    KvCacheManager kv(config(/*blocks=*/2));
    std::vector<StateOp> ops;
    SequenceKv a;
    admit(kv, a, tokens(100), 100, ops);
    EXPECT_TRUE(kv.grow(a, 256));
    EXPECT_EQ(a.blocks.size(), 2u);
    EXPECT_FALSE(kv.grow(a, 257));
    EXPECT_EQ(a.blocks.size(), 2u);
    EXPECT_EQ(kv.num_free_blocks(), 0);
}

TEST(KvCacheManager, ForkSharesFullBlocksAndCopiesThePartialOne) {
    KvCacheManager kv(config());
    std::vector<StateOp> ops;
    const auto toks = tokens(300);
    SequenceKv parent;
    admit(kv, parent, toks, 300, ops);
    kv.on_computed(parent, toks, 0, 300, ops);
    SequenceKv child;
    child.slot = kv.take_slot();
    ops.clear();
    ASSERT_TRUE(kv.fork(parent, 300, child, ops));
    ASSERT_EQ(ops.size(), 2u);
    EXPECT_EQ(ops[0], StateOp::copy_slot(parent.slot, child.slot));
    ASSERT_EQ(child.blocks.size(), 3u);
    EXPECT_EQ(ops[1], StateOp::copy_block(parent.blocks[2], child.blocks[2]));
    EXPECT_EQ(child.blocks[0], parent.blocks[0]);
    EXPECT_EQ(child.blocks[1], parent.blocks[1]);
    EXPECT_NE(child.blocks[2], parent.blocks[2]);
    EXPECT_EQ(kv.block_pool().ref_count(parent.blocks[1]), 2);
    EXPECT_EQ(kv.block_pool().ref_count(parent.blocks[2]), 1);
    kv.free(parent);
    kv.free(child);
    EXPECT_EQ(kv.num_free_blocks(), 16);
    EXPECT_EQ(kv.num_free_slots(), 4);
}

TEST(KvCacheManager, ForkAtABoundaryCopiesNoBlockAndFailsCleanlyWhenFull) {
    KvCacheManager kv(config(/*blocks=*/3));
    std::vector<StateOp> ops;
    SequenceKv parent;
    admit(kv, parent, tokens(256), 256, ops);
    SequenceKv child;
    child.slot = kv.take_slot();
    ops.clear();
    ASSERT_TRUE(kv.fork(parent, 256, child, ops));
    EXPECT_EQ(ops.size(), 1u);  // copy_slot only
    EXPECT_EQ(child.blocks, parent.blocks);

    SequenceKv p2;
    admit(kv, p2, tokens(100, 7), 100, ops);  // takes the last block
    SequenceKv c2;
    c2.slot = kv.take_slot();
    ops.clear();
    EXPECT_FALSE(kv.fork(p2, 100, c2, ops));  // no block for the partial copy
    EXPECT_TRUE(ops.empty());
    EXPECT_TRUE(c2.blocks.empty());
}

TEST(KvCacheManager, NoPrefixCachingMeansNoHashesNoSnapshots) {
    KvCacheConfig c = config();
    c.enable_prefix_caching = false;
    KvCacheManager kv(c);
    std::vector<StateOp> ops;
    const auto toks = tokens(300);
    SequenceKv a;
    admit(kv, a, toks, 256, ops);
    ops.clear();
    kv.on_computed(a, toks, 0, 256, ops);
    EXPECT_TRUE(ops.empty());
    SequenceKv b;
    EXPECT_EQ(kv.find_prefix(b, toks).tokens, 0);
    EXPECT_EQ(kv.limit_chunk(b, 0, 300, 300), 300);
}

TEST(KvCacheManager, SlotsRunOut) {
    KvCacheManager kv(config(16, 2));
    const int32_t s0 = kv.take_slot();
    kv.take_slot();
    EXPECT_EQ(kv.num_free_slots(), 0);
    EXPECT_THROW(kv.take_slot(), Error);
    kv.release_slot(s0);
    EXPECT_THROW(kv.release_slot(s0), Error);
}

}  // namespace
}  // namespace dsv4

namespace dsv4 {
namespace {

// Speculative decoding: a verify step wrote rejected drafts past the accepted end. Only the accepted range is
// hashed, and the snapshot of the boundary it crossed is saved only while everything written is within the rewind
// capacity of it (rejected rows evict ring rows as well).
TEST(KvCacheManager, RejectedPositionsAreNeverHashedAndBoundTheSnapshot) {
    for (const int64_t written : {int64_t{130}, int64_t{150}}) {
        KvCacheManager kv(config());
        SequenceKv a;
        std::vector<StateOp> ops;
        const auto toks = tokens(140);
        admit(kv, a, toks, 125, ops);
        ops.clear();
        ASSERT_TRUE(kv.grow(a, 150));
        kv.on_computed(a, std::span(toks).first(129), 125, 129, ops, written);
        EXPECT_EQ(a.hashes.size(), 1u);  // block 0 only: positions >= 129 were rejected
        const bool saved = !ops.empty();
        EXPECT_EQ(saved, written - kBlock <= 16) << "written end " << written;
        kv.free(a);
    }
}

}  // namespace
}  // namespace dsv4
