// The public Engine (include/dsv4/engine.h) on the fixture models: streams, admission control, aborts, finish(),
// n > 1, seeds, logprobs, shutdown, stats, and a leak check after many requests with random aborts.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "core/error.h"
#include "engine/engine_core.h"
#include "engine_test_util.h"

namespace dsv4::engine_test {
namespace {

std::vector<int32_t> prompt_of(int n, int offset = 0, const std::string& fixture = "flash_schedule") {
    auto t = fixture_tokens(fixture);
    return std::vector<int32_t>(t.begin() + offset, t.begin() + offset + n);
}

EngineCore& core(Engine& e) {
    return dynamic_cast<EngineCore&>(e);
}

void expect_state_returned(Engine& e, int slots = 8) {
    const auto counts = core(e).state_counts();
    EXPECT_EQ(counts.free_slots, slots);
    EXPECT_EQ(counts.free_blocks, counts.num_blocks);
    EXPECT_EQ(counts.live_requests, 0);
}

TEST(Engine, GeneratesAndReportsPromptCounts) {
    auto engine = Engine::create(small_config("flash_schedule"));
    EXPECT_EQ(engine->model_info().name, "flash_schedule");
    EXPECT_EQ(engine->model_info().vocab_size, 512);
    EXPECT_EQ(engine->model_info().max_model_len, 1024);
    auto r = engine->submit(make_request("a", prompt_of(40), greedy(5)));
    ASSERT_TRUE(r.stream) << r.message;
    auto out = drain(*r.stream);
    ASSERT_EQ(out[0].tokens.size(), 5u);
    EXPECT_EQ(out[0].reason, FinishReason::kLength);
    EXPECT_EQ(out[0].prompt_tokens, 40);
    EXPECT_EQ(out[0].cached_prompt_tokens, 0);
    EXPECT_TRUE(r.stream->done());
    EXPECT_FALSE(r.stream->pop(std::chrono::milliseconds(1)).has_value());
    const EngineStats s = engine->stats();
    EXPECT_EQ(s.generation_tokens_total, 5);
    EXPECT_EQ(s.prompt_tokens_total, 40);
    EXPECT_EQ(s.requests_finished_total, 1);
    EXPECT_GE(s.steps_total, 5);
    expect_state_returned(*engine);
}

TEST(Engine, AdmissionControl) {
    EngineConfig c = small_config("flash_schedule");
    c.max_queued_tokens = 100;
    auto engine = Engine::create(c);
    auto bad = [&](GenerateRequest r, AdmissionError want, const std::string& words) {
        SubmitResult res = engine->submit(std::move(r));
        EXPECT_FALSE(res.stream);
        EXPECT_EQ(res.error, want) << res.message;
        EXPECT_NE(res.message.find(words), std::string::npos) << res.message;
    };
    SamplingParams p = greedy(4);
    p.temperature = -1.0;
    bad(make_request("t", prompt_of(5), p), AdmissionError::kInvalid, "temperature");
    bad(make_request("v", {1, 2, 512}, greedy(4)), AdmissionError::kInvalid, "vocabulary");
    bad(make_request("e", {}, greedy(4)), AdmissionError::kInvalid, "no tokens");
    bad(make_request("", prompt_of(5), greedy(4)), AdmissionError::kInvalid, "request_id");
    p = greedy(4);
    p.n = 9;
    bad(make_request("n", prompt_of(5), p), AdmissionError::kInvalid, "max_num_seqs");
    bad(make_request("l", prompt_of(50), greedy(1000)), AdmissionError::kTooLong, "context length");
    bad(make_request("q", prompt_of(150), greedy(4)), AdmissionError::kQueueFull, "max_queued_tokens");
    // A live id cannot be reused.
    auto first = engine->submit(make_request("dup", prompt_of(5), greedy(200)));
    ASSERT_TRUE(first.stream);
    bad(make_request("dup", prompt_of(5), greedy(4)), AdmissionError::kInvalid, "already in use");
    engine->abort("dup");
    drain(*first.stream);
    EXPECT_TRUE(engine->submit(make_request("dup", prompt_of(5), greedy(1))).stream);  // finished ids are free
    engine->shutdown(std::chrono::seconds(30));
    bad(make_request("late", prompt_of(5), greedy(1)), AdmissionError::kDraining, "shutting down");
}

TEST(Engine, QueueLimitOnRequests) {
    EngineConfig c = small_config("flash_schedule");
    c.max_queued_requests = 0;
    auto engine = Engine::create(c);
    auto r = engine->submit(make_request("x", prompt_of(5), greedy(1)));
    EXPECT_EQ(r.error, AdmissionError::kQueueFull);
}

// Regression: --max-num-seqs 4 --max-num-queued-reqs 1 refused two of three concurrent requests on an idle engine,
// because requests the engine thread had not picked up yet counted as queued. Only requests beyond the free
// sequence slots wait; the count must not depend on how far the engine thread got.
TEST(Engine, QueueLimitCountsOnlyRequestsBeyondTheFreeSlots) {
    EngineConfig c = small_config("flash_schedule", 4);
    c.max_queued_requests = 1;
    for (int round = 0; round < 3; ++round) {
        auto engine = Engine::create(c);
        std::vector<std::shared_ptr<ResultStream>> streams;
        for (int i = 0; i < 5; ++i) {  // 4 slots + 1 queued
            auto r = engine->submit(make_request(fmt::format("r{}", i), prompt_of(5, i), greedy(400)));
            ASSERT_TRUE(r.stream) << "round " << round << ", request " << i << ": " << r.message;
            streams.push_back(r.stream);
        }
        auto refused = engine->submit(make_request("r5", prompt_of(5), greedy(4)));
        EXPECT_EQ(refused.error, AdmissionError::kQueueFull) << refused.message;
        EXPECT_NE(refused.message.find("1 requests are waiting"), std::string::npos) << refused.message;
        for (int i = 0; i < 5; ++i) engine->abort(fmt::format("r{}", i));
        for (auto& stream : streams) drain(*stream);
        expect_state_returned(*engine, 4);
    }
}

TEST(Engine, StepTokenHistogramCountsEveryStep) {
    auto engine = Engine::create(small_config("flash_schedule"));
    const auto submitted = std::chrono::steady_clock::now();
    auto r = engine->submit(make_request("a", prompt_of(40), greedy(5)));
    ASSERT_TRUE(r.stream) << r.message;
    auto first = r.stream->pop(std::chrono::seconds(120));
    ASSERT_TRUE(first.has_value());
    ASSERT_TRUE(first->scheduled_at.has_value());  // the queue time's end, for vllm:request_queue_time_seconds
    EXPECT_GE(*first->scheduled_at, submitted);
    EXPECT_LE(*first->scheduled_at, std::chrono::steady_clock::now());
    drain(*r.stream);
    const EngineStats s = engine->stats();
    int64_t steps = 0;
    for (int64_t count : s.steps_by_tokens) steps += count;
    EXPECT_EQ(steps, s.steps_total);
    EXPECT_GT(s.step_seconds_total, 0.0);  // the steps' wall time, of which host work is a part
    EXPECT_GT(s.step_host_seconds_total, 0.0);
    EXPECT_LE(s.step_host_seconds_total, s.step_seconds_total);
    EXPECT_GT(s.step_sample_seconds_total, 0.0);  // a part of the host work
    EXPECT_LE(s.step_sample_seconds_total, s.step_host_seconds_total);
    EXPECT_EQ(s.step_tokens_total, 40 + 4);  // the prompt, then one token per decode step (the last is not fed)
    EXPECT_EQ(s.steps_by_tokens[0], s.steps_total - 1);  // decode steps of 1 token; one prefill step of 40 (<= 64)
    EXPECT_EQ(s.steps_by_tokens[4], 1);
    const CacheInfo& cache = engine->model_info().cache;
    EXPECT_EQ(cache.block_size, 128);
    EXPECT_EQ(cache.cache_dtype, "f32");
    EXPECT_GT(cache.num_blocks, 0);
    EXPECT_EQ(cache.num_slots, 8);
    EXPECT_TRUE(cache.enable_prefix_caching);
}

TEST(Engine, AbortAndFinishEndStreams) {
    auto engine = Engine::create(small_config("flash_schedule"));
    auto a = engine->submit(make_request("a", prompt_of(30), greedy(500)));
    SamplingParams p = greedy(500);
    p.n = 2;
    auto b = engine->submit(make_request("b", prompt_of(30, 3), p));
    ASSERT_TRUE(a.stream && b.stream);
    ASSERT_TRUE(a.stream->pop(std::chrono::seconds(60)).has_value());  // running
    ASSERT_TRUE(b.stream->pop(std::chrono::seconds(60)).has_value());
    engine->abort("a");
    engine->finish("b", 1);
    engine->abort("no-such-request");
    auto out_a = drain(*a.stream);
    EXPECT_EQ(out_a[0].reason, FinishReason::kAbort);
    EXPECT_LT(out_a[0].tokens.size(), 500u);
    // b: completion 1 stops, completion 0 runs on until aborted.
    auto ev = b.stream->pop(std::chrono::seconds(60));
    bool one_stopped = false;
    while (ev && !one_stopped) {
        one_stopped = ev->completion_index == 1 && ev->finished;
        if (one_stopped) {
            EXPECT_EQ(ev->finish_reason, FinishReason::kStop);
        } else {
            ev = b.stream->pop(std::chrono::seconds(60));
        }
    }
    EXPECT_TRUE(one_stopped);
    EXPECT_FALSE(b.stream->done());
    engine->abort("b");
    while (!b.stream->done()) ASSERT_TRUE(b.stream->pop(std::chrono::seconds(60)).has_value());
    engine->shutdown(std::chrono::seconds(30));
    expect_state_returned(*engine);
}

TEST(Engine, NCompletionsMatchSeparateSeededRequests) {
    auto engine = Engine::create(small_config("odd_dims"));
    const auto all = fixture_tokens("odd_dims");
    const std::vector<int32_t> prompt(all.begin(), all.begin() + 140);
    SamplingParams p;
    p.temperature = 0.9;
    p.top_p = 0.95;
    p.seed = 1234;
    p.max_tokens = 6;
    p.ignore_eos = true;
    p.logprobs = 2;
    p.n = 3;
    auto group = engine->submit(make_request("group", prompt, p));
    ASSERT_TRUE(group.stream) << group.message;
    const auto grouped = drain(*group.stream, 3);
    for (int i = 0; i < 3; ++i) {
        SamplingParams single = p;
        single.n = 1;
        single.seed = 1234 + i;  // completion i of n uses seed + i
        auto r = engine->submit(make_request("single" + std::to_string(i), prompt, single));
        const auto alone = drain(*r.stream);
        EXPECT_EQ(grouped[i].tokens, alone[0].tokens) << i;
        EXPECT_EQ(grouped[i].logprobs, alone[0].logprobs) << i;  // exact: same logits, same sampler
        ASSERT_EQ(grouped[i].top.size(), 6u);
        EXPECT_EQ(grouped[i].top[0].size(), 2u);
        EXPECT_EQ(grouped[i].prompt_tokens, 140);
    }
    EXPECT_NE(grouped[0].tokens, grouped[1].tokens);  // different seeds diverge (6 tokens at T=0.9)
    engine->shutdown(std::chrono::seconds(30));
    expect_state_returned(*engine);
}

TEST(Engine, PrefixCacheHitsAreReported) {
    auto engine = Engine::create(small_config("odd_dims"));
    const auto tokens = fixture_tokens("odd_dims");
    auto first = engine->submit(make_request("first", tokens, greedy(2)));
    const auto a = drain(*first.stream);
    auto second = engine->submit(make_request("second", tokens, greedy(2)));
    const auto b = drain(*second.stream);
    EXPECT_EQ(a[0].cached_prompt_tokens, 0);
    EXPECT_EQ(b[0].cached_prompt_tokens, 256);
    EXPECT_EQ(a[0].tokens, b[0].tokens);
    const EngineStats s = engine->stats();
    EXPECT_EQ(s.prefix_cache_hits, 256);
    EXPECT_EQ(s.prefix_cache_queries, 2 * static_cast<int64_t>(tokens.size()));
}

TEST(Engine, ShutdownAbortsWhatDoesNotFinishInTheGracePeriod) {
    auto engine = Engine::create(small_config("odd_dims"));
    auto quick = engine->submit(make_request("quick", prompt_of(4, 0, "odd_dims"), greedy(1)));
    auto slow = engine->submit(make_request("slow", prompt_of(4, 0, "odd_dims"), greedy(1000)));
    ASSERT_TRUE(quick.stream && slow.stream);
    engine->shutdown(std::chrono::milliseconds(50));
    engine->shutdown(std::chrono::milliseconds(50));  // idempotent
    const auto out = drain(*slow.stream);
    EXPECT_EQ(out[0].reason, FinishReason::kAbort);
    EXPECT_TRUE(quick.stream->done() || drain(*quick.stream)[0].reason != FinishReason::kNone);
}

TEST(Engine, CreateRejectsBadConfigurations) {
    EngineConfig c = small_config("flash_schedule");
    c.device = "tpu";
    EXPECT_THROW(Engine::create(c), Error);
    c = small_config("flash_schedule");
    c.block_tokens = 64;  // not a multiple of the HCA ratio 128
    EXPECT_THROW(Engine::create(c), Error);
    c = small_config("flash_schedule");
    c.kv_cache_bytes = 1 << 20;  // not even the slots
    EXPECT_THROW(Engine::create(c), Error);
    c = small_config("flash_schedule");
    c.model_dir = "/nonexistent";
    EXPECT_THROW(Engine::create(c), Error);
    c = small_config("flash_schedule");
    c.max_num_seqs = 0;
    EXPECT_THROW(Engine::create(c), Error);
}

// Many short requests from several threads with random aborts: every stream ends, every slot and block returns.
TEST(Engine, ManyRequestsWithRandomAbortsLeakNothing) {
    EngineConfig c = small_config("odd_dims");
    c.max_num_batched_tokens = 64;
    auto engine = Engine::create(c);
    const auto tokens = fixture_tokens("odd_dims");
    constexpr int kThreads = 3, kPerThread = 40;
    std::vector<std::thread> clients;
    std::atomic<int> aborted{0}, completed{0};
    for (int t = 0; t < kThreads; ++t) {
        clients.emplace_back([&, t] {
            std::mt19937 rng(100 + t);
            auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
            for (int i = 0; i < kPerThread; ++i) {
                const int offset = uniform(0, 100), len = uniform(1, 40);
                std::vector<int32_t> prompt(tokens.begin() + offset, tokens.begin() + offset + len);
                SamplingParams p = greedy(uniform(1, 12));
                p.n = uniform(0, 5) == 0 ? 2 : 1;
                const std::string id = "t" + std::to_string(t) + "_" + std::to_string(i);
                auto r = engine->submit(make_request(id, prompt, p));
                if (!r.stream) {
                    ADD_FAILURE() << r.message;
                    continue;
                }
                if (uniform(0, 3) == 0) {
                    if (uniform(0, 1) == 0) r.stream->pop(std::chrono::seconds(60));
                    engine->abort(id);
                }
                for (const Completion& comp : drain(*r.stream, p.n)) {
                    if (comp.reason == FinishReason::kAbort) ++aborted;
                    if (comp.reason == FinishReason::kLength) ++completed;
                    EXPECT_TRUE(comp.reason == FinishReason::kAbort || comp.reason == FinishReason::kLength);
                }
            }
        });
    }
    for (auto& th : clients) th.join();
    engine->shutdown(std::chrono::seconds(30));
    expect_state_returned(*engine);
    EXPECT_GT(aborted.load(), 0);
    EXPECT_GT(completed.load(), 0);
    EXPECT_EQ(engine->stats().requests_finished_total, kThreads * kPerThread);
}

}  // namespace
}  // namespace dsv4::engine_test
