// Batch invariance: a request's logits (and so its greedy output) are bit-identical whether it runs alone or in a
// batch with other requests of different lengths at different stages: all at once, staggered with small budgets
// (prefill chunks interleaved with decodes), queued behind max_num_seqs, and preempted and recomputed when blocks
// run out.
#include <gtest/gtest.h>

#include <functional>

#include "runtime_harness.h"

namespace dsv4::engine_test {
namespace {

struct Req {
    std::string id;
    std::vector<int32_t> prompt;
    int max_tokens;
    int arrive_at_step;  // staggered mixes: submitted before this step
};

std::vector<Req> requests(const std::string& fixture) {
    const auto t = RuntimeHarness::tokens(fixture);
    auto slice = [&](size_t b, size_t e) { return std::vector<int32_t>(t.begin() + b, t.begin() + e); };
    std::vector<int32_t> reversed(t.rbegin(), t.rbegin() + 90);
    return {
        {"mid", slice(0, 47), 6, 0},
        {"long", slice(20, 220), 3, 1},
        {"tiny", slice(5, 8), 8, 2},
        {"rev", reversed, 4, 4},
        {"same_prompt", slice(0, 47), 5, 6},
        {"edge", slice(40, 165), 6, 0},  // 125 tokens: decoding crosses into a second block
    };
}

void run_mix(RuntimeHarness& h, const std::vector<Req>& reqs, bool staggered) {
    int step = 0;
    size_t next = 0;
    while (next < reqs.size() || h.scheduler().has_work()) {
        while (next < reqs.size() && (!staggered || reqs[next].arrive_at_step <= step)) {
            h.add(reqs[next].id, reqs[next].prompt, reqs[next].max_tokens);
            ++next;
        }
        if (h.scheduler().has_work()) h.step();
        ASSERT_LT(++step, 10000);
    }
}

class BatchInvariance : public ::testing::TestWithParam<const char*> {};

TEST_P(BatchInvariance, LogitsDoNotDependOnTheBatch) {
    const std::string fixture = GetParam();
    const std::vector<Req> reqs = requests(fixture);
    HarnessOptions alone_options;
    alone_options.fixture = fixture;
    alone_options.prefix_caching = false;
    RuntimeHarness alone(alone_options);
    for (const Req& r : reqs) {  // one at a time
        alone.add(r.id, r.prompt, r.max_tokens);
        alone.run();
    }

    struct Mix {
        const char* name;
        std::function<void(HarnessOptions&)> configure;
        bool staggered;
    };
    const Mix mixes[] = {
        {"all_at_once", [](HarnessOptions&) {}, false},
        {"staggered_small_budget",
         [](HarnessOptions& o) {
             o.budget = 48;
             o.long_prefill = 40;
         },
         true},
        {"queued_two_at_a_time",
         [](HarnessOptions& o) {
             o.max_num_seqs = 2;
             o.budget = 100;
         },
         true},
        // 3 blocks of 128 positions: "edge" and "long" fill them, and the next block someone needs preempts.
        {"preempted",
         [](HarnessOptions& o) {
             o.num_blocks = 3;
             o.budget = 256;
             o.long_prefill = 256;
         },
         false},
    };
    for (const Mix& mix : mixes) {
        HarnessOptions o;
        o.fixture = fixture;
        mix.configure(o);
        RuntimeHarness h(o);
        run_mix(h, reqs, mix.staggered);
        for (const Req& r : reqs) {
            EXPECT_TRUE(same_rows(h.logits(r.id), alone.logits(r.id))) << mix.name << " / " << r.id;
            EXPECT_EQ(h.output(r.id).tokens, alone.output(r.id).tokens) << mix.name << " / " << r.id;
            EXPECT_EQ(h.output(r.id).tokens.size(), static_cast<size_t>(r.max_tokens)) << mix.name << " / " << r.id;
        }
        if (std::string(mix.name) == "preempted") {
            EXPECT_GT(h.scheduler().stats().preemptions_total, 0) << "the mix was meant to preempt";
        }
        EXPECT_EQ(h.kv().num_free_blocks(), o.num_blocks);
        EXPECT_EQ(h.kv().num_free_slots(), o.max_num_seqs);
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BatchInvariance, ::testing::Values("flash_schedule", "odd_dims"));

}  // namespace
}  // namespace dsv4::engine_test
