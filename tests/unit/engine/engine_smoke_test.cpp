#include <gtest/gtest.h>

#include "engine_test_util.h"

namespace dsv4::engine_test {
namespace {

TEST(EngineSmoke, GeneratesGreedyTokens) {
    auto engine = Engine::create(small_config("flash_schedule"));
    auto prompt = fixture_tokens("flash_schedule");
    prompt.resize(40);
    auto r = engine->submit(make_request("a", prompt, greedy(5)));
    ASSERT_TRUE(r.stream) << r.message;
    auto out = drain(*r.stream);
    ASSERT_EQ(out[0].tokens.size(), 5u);
    EXPECT_EQ(out[0].reason, FinishReason::kLength);
    EXPECT_EQ(out[0].prompt_tokens, 40);
    engine->shutdown(std::chrono::milliseconds(100));
}

}  // namespace
}  // namespace dsv4::engine_test
namespace dsv4::engine_test {
TEST(EngineSmoke, Timing) {
    auto t0 = std::chrono::steady_clock::now();
    auto engine = Engine::create(small_config("flash_schedule"));
    auto t1 = std::chrono::steady_clock::now();
    auto prompt = fixture_tokens("flash_schedule");
    prompt.resize(40);
    auto r = engine->submit(make_request("a", prompt, greedy(5)));
    auto out = drain(*r.stream);
    auto t2 = std::chrono::steady_clock::now();
    engine->shutdown(std::chrono::milliseconds(100));
    auto t3 = std::chrono::steady_clock::now();
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    printf("create %.1f ms, generate %.1f ms, shutdown %.1f ms\n", ms(t0, t1), ms(t1, t2), ms(t2, t3));
}
}
