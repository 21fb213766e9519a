// Prefix caching on DeepSeek-V4's hybrid state must be exact: a request that resumes from cached blocks and a
// boundary snapshot sees bit-identical logits to a cold run. Prompts diverge from a cached one at and right after a
// block boundary, inside a CSA compression window, early (no snapshot yet: the second such request pays one chunk
// split, the third hits), extend it (multi-turn), or continue text that was generated (blocks filled by decode).
// Block size 128 (the HCA ratio) so the 280-300-token fixture prompts span several blocks.
#include <gtest/gtest.h>

#include "runtime_harness.h"

namespace dsv4::engine_test {
namespace {

constexpr int kMaxTokens = 3;

struct Variant {
    std::string name;
    std::vector<int32_t> prompt;
    int expected_cached;
};

std::vector<int32_t> diverge(const std::vector<int32_t>& base, size_t at, int64_t vocab) {
    std::vector<int32_t> t = base;
    for (size_t i = at; i < t.size(); ++i) {
        int32_t v = static_cast<int32_t>((t[i] * 7 + 3 + static_cast<int32_t>(i)) % (vocab - 2) + 2);
        if (v == t[i]) v = v == vocab - 1 ? 2 : v + 1;
        t[i] = v;
    }
    return t;
}

class PrefixCacheExact : public ::testing::TestWithParam<const char*> {};

TEST_P(PrefixCacheExact, HitsGiveTheLogitsOfAColdRun) {
    const std::string fixture = GetParam();
    const std::vector<int32_t> base = RuntimeHarness::tokens(fixture);
    HarnessOptions o;
    o.fixture = fixture;
    RuntimeHarness warm(o);
    const int64_t vocab = warm.scheduler().config().vocab_size;
    warm.add("base", base, kMaxTokens);
    warm.run();
    ASSERT_EQ(warm.output("base").cached, 0);

    std::vector<int32_t> extended = base;
    for (int i = 0; i < 20; ++i) extended.push_back(static_cast<int32_t>(2 + (i * 37) % (vocab - 2)));
    const std::vector<Variant> variants = {
        {"identical", base, 256},  // 256, not 280/300: a hit never covers the last prompt token's block
        {"at_boundary", diverge(base, 256, vocab), 256},
        {"after_boundary", diverge(base, 257, vocab), 256},
        {"in_csa_window", diverge(base, 258, vocab), 256},
        {"extended", extended, 256},
        {"early", diverge(base, 130, vocab), 0},          // block 0 is cached, but no snapshot at 128 yet ...
        {"early_again", diverge(base, 200, vocab), 128},  // ... "early" saved it
    };
    for (const Variant& v : variants) {
        warm.add(v.name, v.prompt, kMaxTokens);
        warm.run();
        EXPECT_EQ(warm.output(v.name).cached, v.expected_cached) << v.name;
    }

    // Cold: every variant in one batch on an engine without prefix caching (batch invariance makes this the same
    // as running each alone).
    o.prefix_caching = false;
    o.num_blocks = 60;
    o.max_num_seqs = 8;
    RuntimeHarness cold(o);
    for (const Variant& v : variants) cold.add(v.name, v.prompt, kMaxTokens);
    cold.run();
    for (const Variant& v : variants) {
        ASSERT_EQ(warm.logits(v.name).size(), static_cast<size_t>(kMaxTokens)) << v.name;
        EXPECT_TRUE(same_rows(warm.logits(v.name), cold.logits(v.name))) << v.name;
        EXPECT_EQ(warm.output(v.name).tokens, cold.output(v.name).tokens) << v.name;
    }
}

TEST_P(PrefixCacheExact, GeneratedBlocksAreCachedToo) {
    const std::string fixture = GetParam();
    const std::vector<int32_t> base = RuntimeHarness::tokens(fixture);
    HarnessOptions o;
    o.fixture = fixture;
    RuntimeHarness warm(o);
    const int64_t vocab = warm.scheduler().config().vocab_size;
    // 250 prompt tokens + 10 generated: decoding crosses the boundary at 256 and saves its snapshot.
    std::vector<int32_t> prompt(base.begin(), base.begin() + 250);
    warm.add("first_turn", prompt, 10);
    warm.run();
    std::vector<int32_t> next = prompt;
    const auto& generated = warm.output("first_turn").tokens;
    ASSERT_EQ(generated.size(), 10u);
    next.insert(next.end(), generated.begin(), generated.begin() + 9);  // the state covers the first 9
    for (int i = 0; i < 12; ++i) next.push_back(static_cast<int32_t>(2 + (i * 53) % (vocab - 2)));
    warm.add("second_turn", next, kMaxTokens);
    warm.run();
    EXPECT_EQ(warm.output("second_turn").cached, 256);

    o.prefix_caching = false;
    RuntimeHarness cold(o);
    cold.add("second_turn", next, kMaxTokens);
    cold.run();
    EXPECT_TRUE(same_rows(warm.logits("second_turn"), cold.logits("second_turn")));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PrefixCacheExact, ::testing::Values("flash_schedule", "odd_dims"));

}  // namespace
}  // namespace dsv4::engine_test
