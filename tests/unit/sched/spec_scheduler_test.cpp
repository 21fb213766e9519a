// Speculative decoding's bookkeeping without a model (sched_harness.h): verify entries count their drafts in the
// token budget and are trimmed to it and to max_tokens; the accepted prefix is appended and the rest is rewound (the
// shadow state checks that no rewind exceeds the capacity and that every prefix-cache block and snapshot holds only
// accepted tokens); rejections deeper than the capacity re-prefill; the output equals decoding without drafts.
#include <gtest/gtest.h>

#include <numeric>

#include "sched/scheduler.h"
#include "sched_harness.h"

namespace dsv4::sched_test {
namespace {

constexpr int64_t kVocab = 1000;

KvCacheConfig kv_config(int rewind) {
    KvCacheConfig c;
    c.max_slots = 8;
    c.num_blocks = 96;
    c.block_tokens = 16;
    c.num_snapshots = 8;
    c.rewind_capacity = rewind;
    return c;
}

SchedulerConfig sched_config(int k, int budget = 64, int disable = 0) {
    SchedulerConfig c;
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = budget;
    c.long_prefill_token_threshold = 32;
    c.max_model_len = 4096;
    c.vocab_size = kVocab;
    c.eos_token_ids = {1};
    c.num_speculative_tokens = k;
    c.spec_disable_batch_size = disable;
    return c;
}

GenerateRequest request(const std::string& id, int prompt_len, int max_tokens, int n = 1) {
    return sched_test::request(id, prompt_len, max_tokens, n, 7 * prompt_len, kVocab);
}

struct SpecFixture {
    SpecFixture(int drafts, int rewind, int budget = 64, int disable = 0)
        : k(drafts),
          kv(kv_config(rewind)),
          shadow(kv_config(rewind)),
          scheduler(sched_config(drafts, budget, disable), kv) {}
    int k;
    KvCacheManager kv;
    ShadowState shadow;
    Scheduler scheduler;
    EventLog log;

    // Wrong drafts at position 1 for every third history length and at position 0 for every fifth: steps accept
    // 0, 1 or all 3 drafts.
    SchedulerOutput step() {
        SchedulerOutput out = scheduler.schedule();
        shadow.apply(out.state_ops);
        shadow.run_step(out, scheduler.kv());
        auto wrong = [](size_t length, int i) { return (length % 3 == 0 && i == 1) || (length % 5 == 0 && i == 0); };
        UpdateResult r = scheduler.update(out, fake_spec_run(out, kVocab, k, wrong));
        shadow.apply(r.state_ops);
        log.add(r);
        return out;
    }
    void run() {
        for (int i = 0; i < 10000 && scheduler.has_work(); ++i) {
            step();
            if (::testing::Test::HasFatalFailure()) return;
        }
        ASSERT_FALSE(scheduler.has_work());
        EXPECT_EQ(kv.num_free_slots(), kv.config().max_slots);
        EXPECT_EQ(kv.num_free_blocks(), kv.config().num_blocks);
    }
};

std::vector<int32_t> plain_tokens(const GenerateRequest& r, int completion = 0) {
    KvCacheManager kv(kv_config(16));
    ShadowState shadow(kv_config(16));
    Scheduler s(sched_config(0), kv);
    EventLog log;
    s.add(r);
    for (int i = 0; i < 10000 && s.has_work(); ++i) step(s, shadow, log);
    return log.get(r.request_id, completion).tokens;
}

TEST(SpecScheduler, OutputEqualsDecodingWithoutDrafts) {
    for (int rewind : {16, 2}) {  // 2: a rejection at draft 0 of k = 3 rewinds 3 positions and re-prefills
        SCOPED_TRACE(rewind);
        SpecFixture f(3, rewind);
        const std::vector<GenerateRequest> requests = {request("a", 20, 40), request("b", 33, 30),
                                                       request("c", 15, 25, 2)};
        for (const auto& r : requests) f.scheduler.add(r);
        f.run();
        ASSERT_FALSE(::testing::Test::HasFatalFailure());
        for (const auto& r : requests) {
            for (int c = 0; c < r.params.n; ++c) {
                EXPECT_EQ(f.log.get(r.request_id, c).tokens, plain_tokens(r, c)) << r.request_id << "/" << c;
                EXPECT_EQ(f.log.get(r.request_id, c).reason, FinishReason::kLength);
            }
        }
        const SchedulerStats& s = f.scheduler.stats();
        EXPECT_GT(s.spec_drafts_total, 10);
        EXPECT_GT(s.spec_accepted_tokens_total, s.spec_drafts_total);  // most steps accept 1 or all 3
        EXPECT_LT(s.spec_accepted_tokens_total, s.spec_draft_tokens_total);
        ASSERT_EQ(s.spec_accepted_per_pos.size(), 3u);
        EXPECT_GE(s.spec_accepted_per_pos[0], s.spec_accepted_per_pos[1]);
        EXPECT_EQ(s.spec_reprefills_total > 0, rewind == 2);
    }
}

TEST(SpecScheduler, DraftsCountInTheBudgetAndStopAtMaxTokens) {
    SpecFixture f(4, 16, /*budget=*/12);
    f.scheduler.add(request("a", 8, 7));
    f.scheduler.add(request("b", 8, 40));
    f.step();  // both prompts: 16 tokens > 12, so b's prompt is chunked
    f.step();
    const SchedulerOutput out = f.step();
    int64_t total = 0;
    for (const auto& e : out.seqs) {
        total += e.num_tokens;
        if (!e.drafts.empty()) {
            EXPECT_EQ(e.num_tokens, 1 + static_cast<int>(e.drafts.size()));
        }
    }
    EXPECT_EQ(total, out.num_batched_tokens);
    EXPECT_LE(out.num_batched_tokens, 12);
    f.run();
    EXPECT_EQ(f.log.get("a", 0).tokens.size(), 7u);  // drafts past max_tokens are never fed
    EXPECT_EQ(f.log.get("b", 0).tokens.size(), 40u);
}

TEST(SpecScheduler, LargeBatchesTurnSpeculationOff) {
    SpecFixture f(3, 16, 256, /*disable=*/2);
    for (int i = 0; i < 3; ++i) f.scheduler.add(request("r" + std::to_string(i), 10, 12));
    for (int i = 0; i < 4; ++i) {
        const SchedulerOutput out = f.step();
        EXPECT_FALSE(out.propose_drafts);
        for (const auto& e : out.seqs) EXPECT_TRUE(e.drafts.empty());
    }
    f.run();
    EXPECT_EQ(f.scheduler.stats().spec_drafts_total, 0);
}

}  // namespace
}  // namespace dsv4::sched_test
