// The prefix cache's host and disk tiers on the CPU backend (kv/kv_tiers.h; the host pool is a separate allocation
// reached only through the StateStore tier copies): a prefix evicted from the device and found in host memory or on
// disk gives bit-identical logits to a cold run; evicting blocks while a sequence reads a shared prefix is safe; a
// corrupted (truncated) disk file is detected and recomputed; a full host pool only degrades to recompute.
// The odd_dims fixture and 150-token prompts (one full 128-token block each) keep it cheap.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "kv/block_hash.h"
#include "runtime_harness.h"

namespace dsv4::engine_test {
namespace {

constexpr int kMaxTokens = 2;
constexpr size_t kPromptTokens = 150;
const std::string kFixture = "odd_dims";

std::vector<int32_t> prompt(int seed, int64_t vocab) {
    std::vector<int32_t> t(kPromptTokens);
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>(2 + (i * 131 + seed * 977 + 7) % (vocab - 2));
    return t;
}

// The same first block, other tokens after it.
std::vector<int32_t> variant(std::vector<int32_t> t, int64_t vocab) {
    for (size_t i = 140; i < t.size(); ++i) t[i] = static_cast<int32_t>(2 + (t[i] * 5 + 11) % (vocab - 2));
    return t;
}

BlockHash first_block_key(const std::vector<int32_t>& t) {
    return hash_block({}, std::span(t).subspan(0, 128));
}

// A small device cache (1 snapshot; 3 blocks: the second prompt after a prompt evicts its block; 4 blocks: the third).
HarnessOptions small_device(int blocks, int host_blocks, int host_snapshots, const std::string& disk_dir = {}) {
    HarnessOptions o;
    o.fixture = kFixture;
    o.num_blocks = blocks;
    o.num_snapshots = 1;
    o.max_num_seqs = 2;
    o.host_blocks = host_blocks;
    o.host_snapshots = host_snapshots;
    o.disk_dir = disk_dir;
    return o;
}

void run_prompts(RuntimeHarness& h, const std::vector<int>& seeds) {
    const int64_t vocab = h.scheduler().config().vocab_size;
    for (int seed : seeds) {
        h.add("p" + std::to_string(seed), prompt(seed, vocab), kMaxTokens);
        h.run();
    }
}

// Every prompt together on an engine without prefix caching (batch invariance: the same as each alone).
RuntimeHarness& cold_run(RuntimeHarness& cold, const std::vector<std::pair<std::string, std::vector<int32_t>>>& runs,
                         int max_tokens) {
    for (const auto& [id, tokens] : runs) cold.add(id, tokens, max_tokens);
    cold.run();
    return cold;
}

HarnessOptions cold_options() {
    HarnessOptions o;
    o.fixture = kFixture;
    o.prefix_caching = false;
    return o;
}

size_t tier(KvTier t) {
    return static_cast<size_t>(t);
}

struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& name)
        : path(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
        std::filesystem::remove_all(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(KvTiersExact, HostHitIsExactAndEvictingWhileItIsReadIsSafe) {
    RuntimeHarness warm(small_device(4, 8, 4));  // 4 blocks: the reader and the churn run together
    const int64_t vocab = warm.scheduler().config().vocab_size;
    run_prompts(warm, {0, 1, 2, 3});
    const std::vector<int32_t> reader = variant(prompt(0, vocab), vocab);
    ASSERT_FALSE(warm.kv().block_pool().lookup(first_block_key(reader))) << "evicted from the device";
    // The reader resumes from the host tier and keeps reading its loaded block while another prompt churns the
    // device blocks and the host pool.
    warm.add("reader", reader, 8);
    warm.step();
    warm.step();
    const std::vector<int32_t> churn = prompt(7, vocab);
    warm.add("churn", churn, kMaxTokens);
    warm.run();
    EXPECT_EQ(warm.output("reader").cached, 128);
    EXPECT_EQ(warm.kv().stats().prefix_hits_by_tier[tier(KvTier::kHost)], 128);
    EXPECT_GT(warm.tiers()->stats().loaded_bytes, 0);
    RuntimeHarness cold(cold_options());
    cold_run(cold, {{"reader", reader}}, 8);
    EXPECT_TRUE(same_rows(warm.logits("reader"), cold.logits("reader")));
}

TEST(KvTiersExact, DiskHitIsExactAndATruncatedFileIsRecomputed) {
    const TempDir dir("dsv4_kv_disk_tier_test");
    // A host pool of one block and one snapshot: every older prefix goes down to disk.
    RuntimeHarness warm(small_device(3, 1, 1, dir.path.string()));
    const int64_t vocab = warm.scheduler().config().vocab_size;
    run_prompts(warm, {0, 1, 2, 3});
    const DiskKvStore& disk = *warm.tiers()->disk();
    const std::vector<int32_t> from_disk = variant(prompt(0, vocab), vocab);
    const std::vector<int32_t> corrupt = variant(prompt(1, vocab), vocab);
    for (const auto* t : {&from_disk, &corrupt}) {
        ASSERT_FALSE(warm.kv().block_pool().lookup(first_block_key(*t)));
        ASSERT_TRUE(disk.contains(KvEntryKind::kBlock, first_block_key(*t)));
        ASSERT_TRUE(disk.contains(KvEntryKind::kSnapshot, first_block_key(*t)));
    }
    const auto file = disk.path_of(KvEntryKind::kBlock, first_block_key(corrupt));
    std::filesystem::resize_file(file, std::filesystem::file_size(file) - 1);

    warm.add("from_disk", from_disk, kMaxTokens);
    warm.run();
    EXPECT_EQ(warm.output("from_disk").cached, 128);
    EXPECT_EQ(warm.kv().stats().prefix_hits_by_tier[tier(KvTier::kDisk)], 128);
    warm.add("corrupt", corrupt, kMaxTokens);
    warm.run();
    EXPECT_EQ(warm.output("corrupt").cached, 0) << "the truncated block is recomputed";
    EXPECT_EQ(disk.stats().corrupt, 1);
    EXPECT_FALSE(std::filesystem::exists(file)) << "a bad file is removed";

    RuntimeHarness cold(cold_options());
    cold_run(cold, {{"from_disk", from_disk}, {"corrupt", corrupt}}, kMaxTokens);
    EXPECT_TRUE(same_rows(warm.logits("from_disk"), cold.logits("from_disk")));
    EXPECT_TRUE(same_rows(warm.logits("corrupt"), cold.logits("corrupt")));
}

TEST(KvTiersExact, AFullHostPoolDegradesToRecompute) {
    // One block and one snapshot of host memory, no disk: every new prefix evicts the previous one; nothing fails.
    RuntimeHarness warm(small_device(3, 1, 1));
    const int64_t vocab = warm.scheduler().config().vocab_size;
    run_prompts(warm, {0, 1, 2});
    const std::vector<int32_t> again = variant(prompt(0, vocab), vocab);
    warm.add("again", again, kMaxTokens);
    warm.run();
    EXPECT_EQ(warm.output("again").cached, 0);
    EXPECT_GT(warm.tiers()->stats().host_evictions, 0);
    RuntimeHarness cold(cold_options());
    cold_run(cold, {{"again", again}}, kMaxTokens);
    EXPECT_TRUE(same_rows(warm.logits("again"), cold.logits("again")));
}

}  // namespace
}  // namespace dsv4::engine_test
