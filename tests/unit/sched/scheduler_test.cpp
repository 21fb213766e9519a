// Scheduler without a model (sched_harness.h): the token budget, chunked prefill and its cap, FCFS admission,
// preemption by recompute, aborts, n > 1 forks, and a long randomized run that checks the state after every step
// and counts slots, blocks and snapshots at the end.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "sched_harness.h"

namespace dsv4::sched_test {
namespace {

constexpr int64_t kVocab = 1000;

KvCacheConfig kv_config(int blocks = 64, int slots = 8, int snapshots = 8) {
    KvCacheConfig c;
    c.max_slots = slots;
    c.num_blocks = blocks;
    c.block_tokens = 16;
    c.num_snapshots = snapshots;
    c.rewind_capacity = 2;
    return c;
}

SchedulerConfig sched_config(int budget = 64, int threshold = 32, int max_seqs = 8) {
    SchedulerConfig c;
    c.max_num_seqs = max_seqs;
    c.max_num_batched_tokens = budget;
    c.long_prefill_token_threshold = threshold;
    c.max_model_len = 4096;
    c.vocab_size = kVocab;
    c.eos_token_ids = {1};
    return c;
}

const ScheduledSequence* find(const SchedulerOutput& out, const std::string& id, int completion = 0) {
    for (const auto& e : out.seqs) {
        if (e.seq->group->request_id == id && e.seq->completion_index == completion) return &e;
    }
    return nullptr;
}

struct Fixture {
    explicit Fixture(KvCacheConfig k = kv_config(), SchedulerConfig s = sched_config())
        : kv(k), shadow(k), scheduler(s, kv) {}
    KvCacheManager kv;
    ShadowState shadow;
    Scheduler scheduler;
    EventLog log;

    SchedulerOutput step() { return sched_test::step(scheduler, shadow, log); }
    void run_to_completion(int max_steps = 10000) {
        for (int i = 0; i < max_steps && scheduler.has_work(); ++i) {
            step();
            if (::testing::Test::HasFatalFailure()) return;
        }
        ASSERT_FALSE(scheduler.has_work()) << "did not finish";
    }
    void expect_all_free() {
        EXPECT_EQ(kv.num_free_slots(), kv.config().max_slots);
        EXPECT_EQ(kv.num_free_blocks(), kv.config().num_blocks);
        EXPECT_EQ(scheduler.num_running(), 0);
        EXPECT_EQ(scheduler.num_waiting(), 0);
        EXPECT_LE(kv.snapshot_pool().num_used(), kv.snapshot_pool().capacity());
    }
};

TEST(Scheduler, LongPrefillCapLetsAShortRequestStartInTheFirstStep) {
    Fixture f;
    f.scheduler.add(request("long", 200, 4));
    f.scheduler.add(request("short", 10, 4));
    const SchedulerOutput out = f.step();
    const auto* long_entry = find(out, "long");
    const auto* short_entry = find(out, "short");
    ASSERT_NE(long_entry, nullptr);
    ASSERT_NE(short_entry, nullptr);
    EXPECT_EQ(long_entry->num_tokens, 32);  // long_prefill_token_threshold
    EXPECT_FALSE(long_entry->sample);
    EXPECT_EQ(short_entry->num_tokens, 10);
    EXPECT_TRUE(short_entry->sample);  // its first token comes out of step 1
    EXPECT_EQ(f.log.get("short", 0).tokens.size(), 1u);
    EXPECT_EQ(out.num_batched_tokens, 42);
}

TEST(Scheduler, DecodesComeFirstAndPrefillsShareTheRestOfTheBudget) {
    Fixture f(kv_config(), sched_config(/*budget=*/40, /*threshold=*/0));
    for (int i = 0; i < 3; ++i) f.scheduler.add(request("d" + std::to_string(i), 5, 50));
    f.step();  // prefills all three (15 tokens)
    f.scheduler.add(request("big", 100, 2));
    const SchedulerOutput out = f.step();
    ASSERT_EQ(out.seqs.size(), 4u);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(out.seqs[i].num_tokens, 1) << "decode " << i;
    EXPECT_EQ(out.seqs[3].seq->group->request_id, "big");
    EXPECT_EQ(out.seqs[3].num_tokens, 37);  // the budget left
    EXPECT_EQ(out.num_batched_tokens, 40);
}

TEST(Scheduler, MaxNumSeqsAndFcfs) {
    Fixture f(kv_config(), sched_config(64, 32, /*max_seqs=*/2));
    for (int i = 0; i < 4; ++i) f.scheduler.add(request("r" + std::to_string(i), 4, 3));
    const SchedulerOutput out = f.step();
    ASSERT_EQ(out.seqs.size(), 2u);
    EXPECT_EQ(out.seqs[0].seq->group->request_id, "r0");
    EXPECT_EQ(out.seqs[1].seq->group->request_id, "r1");
    f.run_to_completion();
    // Finished in arrival order pairs: r0, r1 before r2, r3.
    ASSERT_EQ(f.log.finished_requests.size(), 4u);
    EXPECT_EQ(f.log.finished_requests[2].substr(0, 1), "r");
    EXPECT_TRUE((f.log.finished_requests[0] == "r0" || f.log.finished_requests[0] == "r1"));
    for (int i = 0; i < 4; ++i) EXPECT_EQ(f.log.get("r" + std::to_string(i), 0).tokens.size(), 3u);
    f.expect_all_free();
}

TEST(Scheduler, PreemptsTheLatestByRecomputeAndReproducesTheSameTokens) {
    // Reference: plenty of blocks.
    Fixture ref(kv_config(64));
    // Tight: 6 blocks of 16 tokens for three sequences that each grow to 40 tokens (3 blocks).
    Fixture tight(kv_config(6));
    for (Fixture* f : {&ref, &tight}) {
        for (int i = 0; i < 3; ++i) f->scheduler.add(request("p" + std::to_string(i), 12, 28, 1, 100 * i));
        f->run_to_completion();
        ASSERT_FALSE(::testing::Test::HasFatalFailure());
        f->expect_all_free();
    }
    EXPECT_EQ(ref.scheduler.stats().preemptions_total, 0);
    EXPECT_GT(tight.scheduler.stats().preemptions_total, 0);
    for (int i = 0; i < 3; ++i) {
        const auto key = std::make_pair("p" + std::to_string(i), 0);
        EXPECT_EQ(tight.log.get(key.first, key.second).tokens, ref.log.get(key.first, key.second).tokens) << key.first;
        EXPECT_EQ(tight.log.get(key.first, key.second).tokens.size(), 28u);
    }
}

TEST(Scheduler, BlockedHeadOfQueueBlocksLaterRequests) {
    Fixture f(kv_config(/*blocks=*/4), sched_config(64, 0));
    f.scheduler.add(request("a", 40, 20));  // 3 blocks now, 4 later
    f.step();
    f.scheduler.add(request("b", 33, 2, 1, 500));  // first chunk [0, 32) needs 2 blocks: does not fit
    f.scheduler.add(request("c", 4, 2, 1, 700));   // would fit, but waits behind b (FCFS)
    const SchedulerOutput out = f.step();
    EXPECT_EQ(find(out, "b"), nullptr);
    EXPECT_EQ(find(out, "c"), nullptr);
    f.run_to_completion();
    f.expect_all_free();
}

TEST(Scheduler, AbortFreesStateAndEndsTheStream) {
    Fixture f;
    f.scheduler.add(request("a", 30, 100));
    f.scheduler.add(request("b", 30, 100, /*n=*/3));
    f.step();
    f.step();
    UpdateResult r;
    f.scheduler.abort("a", r);
    f.scheduler.abort("b", r);
    f.scheduler.abort("unknown", r);
    f.log.add(r);
    EXPECT_EQ(f.log.get("a", 0).reason, FinishReason::kAbort);
    for (int i = 0; i < 3; ++i) EXPECT_EQ((f.log.get("b", i).reason), FinishReason::kAbort);
    EXPECT_FALSE(f.scheduler.has_work());
    EXPECT_FALSE(f.scheduler.contains("a"));
    f.expect_all_free();
}

TEST(Scheduler, ForkSharesThePromptAndCopiesTheState) {
    Fixture f;
    f.scheduler.add(request("n3", 40, 5, /*n=*/3));  // 40 = 2 full blocks + a partial one
    SchedulerOutput out = f.scheduler.schedule();
    ASSERT_EQ(out.seqs.size(), 1u);           // the prompt runs once
    EXPECT_EQ(f.kv.num_free_slots(), 8 - 3);  // but the children's slots are reserved
    ASSERT_EQ(out.seqs[0].num_tokens, 32);
    f.shadow.apply(out.state_ops);
    f.shadow.run_step(out, f.kv);
    UpdateResult r = f.scheduler.update(out, fake_run(out, kVocab));
    f.shadow.apply(r.state_ops);
    f.log.add(r);
    out = f.scheduler.schedule();  // the rest of the prompt: samples three first tokens
    ASSERT_EQ(out.seqs.size(), 1u);
    ASSERT_EQ(out.seqs[0].fork_children.size(), 2u);
    f.shadow.apply(out.state_ops);
    f.shadow.run_step(out, f.kv);
    r = f.scheduler.update(out, fake_run(out, kVocab));
    int copy_slots = 0, copy_blocks = 0;
    for (const StateOp& op : r.state_ops) {
        copy_slots += op.kind == StateOp::Kind::kCopySlot;
        copy_blocks += op.kind == StateOp::Kind::kCopyBlock;
    }
    EXPECT_EQ(copy_slots, 2);
    EXPECT_EQ(copy_blocks, 2);  // the partial third block, once per child
    f.shadow.apply(r.state_ops);
    f.log.add(r);
    out = f.step();
    EXPECT_EQ(out.seqs.size(), 3u);  // three independent decodes
    f.run_to_completion();
    for (int i = 0; i < 3; ++i) EXPECT_EQ((f.log.get("n3", i).tokens.size()), 5u);
    // Different completions see different histories (fake_next_token mixes in the completion index).
    EXPECT_NE((f.log.get("n3", 0).tokens), (f.log.get("n3", 1).tokens));
    f.expect_all_free();
}

TEST(Scheduler, ChildrenThatFinishOnTheirFirstTokenNeedNoState) {
    Fixture f;
    f.scheduler.add(request("one", 20, /*max_tokens=*/1, /*n=*/4));
    f.run_to_completion();
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ((f.log.get("one", i).tokens.size()), 1u);
        EXPECT_EQ((f.log.get("one", i).reason), FinishReason::kLength);
    }
    f.expect_all_free();
}

TEST(Scheduler, FinishEndsOneCompletionAsStop) {
    Fixture f;
    f.scheduler.add(request("s", 10, 50, 2));
    f.step();
    UpdateResult r;
    f.scheduler.finish("s", 1, r);
    f.log.add(r);
    EXPECT_EQ((f.log.get("s", 1).reason), FinishReason::kStop);
    EXPECT_TRUE(f.scheduler.contains("s"));
    f.run_to_completion();
    EXPECT_EQ((f.log.get("s", 0).tokens.size()), 50u);
    f.expect_all_free();
}

TEST(Scheduler, EosAndStopTokensFinish) {
    Fixture f;
    GenerateRequest r = request("e", 10, 1000);
    r.params.ignore_eos = false;
    f.scheduler.add(r);
    f.run_to_completion();
    const auto& c = f.log.get("e", 0);
    ASSERT_FALSE(c.tokens.empty());
    if (c.tokens.size() < 1000) {
        EXPECT_EQ(c.tokens.back(), 1);  // only EOS ends it early
        EXPECT_EQ(c.reason, FinishReason::kStop);
    }
    // Stop token ids: a run without them tells which token comes 6th; with it as a stop id the run ends at its
    // first occurrence, reporting the id.
    Fixture g;
    g.scheduler.add(request("t", 10, 20));
    g.run_to_completion();
    const std::vector<int32_t> all = g.log.get("t", 0).tokens;
    ASSERT_EQ(all.size(), 20u);
    Fixture h;
    GenerateRequest s = request("t", 10, 20);
    s.params.stop_token_ids = {all[5]};
    h.scheduler.add(s);
    h.run_to_completion();
    const auto& stopped = h.log.get("t", 0);
    const auto first = std::find(all.begin(), all.end(), all[5]) - all.begin();
    EXPECT_EQ(stopped.tokens, std::vector<int32_t>(all.begin(), all.begin() + first + 1));
    EXPECT_EQ(stopped.reason, FinishReason::kStop);
    EXPECT_EQ(stopped.stop_token, all[5]);
    h.expect_all_free();
}

// Thousands of requests with shared prefixes, random lengths, n, aborts and finishes; the shadow checks every step.
TEST(Scheduler, RandomizedRunLeaksNothing) {
    KvCacheConfig k = kv_config(/*blocks=*/24, /*slots=*/8, /*snapshots=*/6);
    Fixture f(k, sched_config(/*budget=*/48, /*threshold=*/20, /*max_seqs=*/8));
    std::mt19937 rng(12345);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    std::vector<std::string> live;
    int submitted = 0;
    int64_t steps = 0;
    while (submitted < 3000 || f.scheduler.has_work()) {
        if (submitted < 3000 && f.scheduler.num_waiting() < 12) {
            for (int i = uniform(0, 3); i > 0 && submitted < 3000; --i) {
                // Prompts from 4 families share their first 0..60 tokens, so blocks and snapshots get reused.
                GenerateRequest r = request("q" + std::to_string(submitted++), uniform(1, 70), uniform(1, 24),
                                            uniform(1, 6) == 1 ? uniform(2, 3) : 1, 1000 * uniform(0, 3));
                for (size_t t = uniform(0, 60); t < r.prompt_tokens.size(); ++t) r.prompt_tokens[t] = uniform(2, 999);
                r.params.ignore_eos = uniform(0, 1) == 1;
                f.scheduler.add(r);
                live.push_back(r.request_id);
            }
        }
        UpdateResult r;
        if (!live.empty() && uniform(0, 9) == 0) {
            const std::string& victim = live[uniform(0, static_cast<int>(live.size()) - 1)];
            if (uniform(0, 1) == 0) {
                f.scheduler.abort(victim, r);
            } else {
                f.scheduler.finish(victim, uniform(0, 2), r);
            }
        }
        f.log.add(r);
        f.step();
        ASSERT_FALSE(HasFatalFailure()) << "step " << steps;
        ++steps;
        ASSERT_LT(steps, 200000) << "no progress";
        if (steps % 64 == 0) {
            std::erase_if(live, [&](const std::string& id) { return !f.scheduler.contains(id); });
        }
    }
    f.expect_all_free();
    EXPECT_EQ(f.log.finished_requests.size(), 3000u);
    for (const auto& [key, c] : f.log.completions) EXPECT_TRUE(c.finished) << key.first << "/" << key.second;
    EXPECT_GT(f.kv.stats().prefix_hits, 0);
    EXPECT_GT(f.kv.stats().snapshots_restored, 0);
    EXPECT_GT(f.scheduler.stats().preemptions_total, 0);
    std::printf("[ sched ] %lld steps, %lld preemptions, %lld prefix-hit tokens of %lld, %lld snapshots saved\n",
                static_cast<long long>(steps), static_cast<long long>(f.scheduler.stats().preemptions_total),
                static_cast<long long>(f.kv.stats().prefix_hits), static_cast<long long>(f.kv.stats().prefix_queries),
                static_cast<long long>(f.kv.stats().snapshots_saved));
}

}  // namespace
}  // namespace dsv4::sched_test
