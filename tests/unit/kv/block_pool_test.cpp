// BlockPool and SnapshotPool: reference counts, the free queue's eviction order, and the hash maps.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kv/snapshot_pool.h"

namespace dsv4 {
namespace {

BlockHash key(uint64_t i) {
    return {i, i * 31 + 7};
}

TEST(BlockPool, AllocatesEveryBlockOnceThenRunsOut) {
    BlockPool pool(4);
    std::vector<int32_t> got;
    for (int i = 0; i < 4; ++i) got.push_back(*pool.allocate());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2, 3}));
    EXPECT_FALSE(pool.allocate().has_value());
    EXPECT_EQ(pool.num_free(), 0);
    pool.release(2);
    EXPECT_EQ(pool.num_free(), 1);
    EXPECT_EQ(*pool.allocate(), 2);
}

TEST(BlockPool, ReferenceCountsKeepSharedBlocks) {
    BlockPool pool(2);
    const int32_t b = *pool.allocate();
    pool.ref(b);
    EXPECT_EQ(pool.ref_count(b), 2);
    pool.release(b);
    EXPECT_EQ(pool.num_free(), 1);  // still held once
    pool.release(b);
    EXPECT_EQ(pool.num_free(), 2);
    EXPECT_THROW(pool.release(b), Error);  // more releases than references
}

TEST(BlockPool, CachedBlocksStayFindableUntilEvictedLeastRecentlyFreedFirst) {
    BlockPool pool(3);
    const int32_t a = *pool.allocate(), b = *pool.allocate(), c = *pool.allocate();
    ASSERT_TRUE(pool.register_full(a, key(1)));
    ASSERT_TRUE(pool.register_full(b, key(2)));
    pool.release(a);  // cached, freed first -> evicted first among cached
    pool.release(b);
    pool.release(c);  // uncached -> handed out before any cached block
    EXPECT_EQ(pool.num_cached(), 2);
    EXPECT_EQ(*pool.lookup(key(1)), a);
    EXPECT_EQ(*pool.allocate(), c);
    EXPECT_EQ(*pool.allocate(), a);  // evicts key 1
    EXPECT_FALSE(pool.lookup(key(1)).has_value());
    EXPECT_EQ(*pool.lookup(key(2)), b);
    // A hit on a free cached block takes it out of the free queue.
    pool.ref(b);
    EXPECT_EQ(pool.num_free(), 0);
    EXPECT_FALSE(pool.allocate().has_value());
}

TEST(BlockPool, DuplicatePrefixKeepsTheFirstBlock) {
    BlockPool pool(2);
    const int32_t a = *pool.allocate(), b = *pool.allocate();
    EXPECT_TRUE(pool.register_full(a, key(5)));
    EXPECT_FALSE(pool.register_full(b, key(5)));
    EXPECT_EQ(*pool.lookup(key(5)), a);
    EXPECT_FALSE(pool.is_cached(b));
    EXPECT_TRUE(pool.register_full(a, key(5)));          // a fork registering the same block again
    EXPECT_THROW(pool.register_full(a, key(6)), Error);  // a cached block cannot change its prefix
}

TEST(SnapshotPool, EvictsLeastRecentlyUsed) {
    SnapshotPool pool(2);
    const int32_t s1 = *pool.acquire(key(1));
    const int32_t s2 = *pool.acquire(key(2));
    EXPECT_NE(s1, s2);
    EXPECT_EQ(*pool.find(key(1)), s1);  // key 1 is now the most recently used
    const int32_t s3 = *pool.acquire(key(3));
    EXPECT_EQ(s3, s2);  // key 2 was evicted
    EXPECT_FALSE(pool.contains(key(2)));
    EXPECT_TRUE(pool.contains(key(1)));
    EXPECT_TRUE(pool.contains(key(3)));
    EXPECT_EQ(pool.num_used(), 2);
    EXPECT_THROW(pool.acquire(key(3)), Error);
}

TEST(SnapshotPool, EmptyPoolGivesNothing) {
    SnapshotPool pool(0);
    EXPECT_FALSE(pool.acquire(key(1)).has_value());
    EXPECT_FALSE(pool.find(key(1)).has_value());
}

}  // namespace
}  // namespace dsv4
