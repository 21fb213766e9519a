// Loading, draining (SIGTERM semantics), client disconnects and concurrent streams, in-process (FakeEngine).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/error.h"
#include "test_support.h"

namespace dsv4::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string stream_text(const std::string& sse_body) {
    std::string text;
    for (const json& chunk : parse_sse(sse_body)) {
        for (const json& choice : chunk["choices"]) {
            if (choice.contains("text")) text += choice["text"].get<std::string>();
            if (choice.contains("delta") && choice["delta"].contains("content")) {
                text += choice["delta"]["content"].get<std::string>();
            }
        }
    }
    return text;
}

std::string last_finish_reason(const std::string& sse_body) {
    std::string reason;
    for (const json& chunk : parse_sse(sse_body)) {
        for (const json& choice : chunk["choices"]) {
            if (choice["finish_reason"].is_string()) reason = choice["finish_reason"];
        }
    }
    return reason;
}

TEST(ServerLifecycle, LoadingAnswers503UntilTheModelIsSet) {
    DSV4_REQUIRE_TOKENIZER();
    server::ServerConfig config;
    config.port = 0;
    config.quiet = true;
    server::HttpServer http(config);
    const int port = http.bind();
    http.start();
    httplib::Client client("127.0.0.1", port);
    auto health = client.Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 503);
    EXPECT_EQ(json::parse(health->body)["error"]["message"], "Loading model");
    EXPECT_EQ(health->get_header_value("Retry-After"), "5");
    auto chat =
        client.Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}]})", "application/json");
    ASSERT_TRUE(chat);
    EXPECT_EQ(chat->status, 503);
    auto metrics = client.Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("dsv4:model_loaded{model_name=\"\"} 0"), std::string::npos);
    http.begin_drain();
    http.stop(std::chrono::milliseconds(0));
}

TEST(ServerLifecycle, ABusyPortIsAnError) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer first;
    server::ServerConfig config;
    config.port = first.port();
    config.quiet = true;
    server::HttpServer second(config);
    try {
        second.bind();
        FAIL() << "a second server bound port " << first.port();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(std::to_string(first.port())), std::string::npos) << e.what();
    }
}

TEST(ServerLifecycle, DrainLetsRunningStreamsFinish) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server({.engine = [](FakeEngineOptions& o) { o.step_interval = 10ms; }, .server = {}});
    std::string body;
    std::thread client(
        [&] { body = post_json(server, "/v1/completions", R"({"prompt":"a","max_tokens":30,"stream":true})").body; });
    while (server.engine().live_requests() == 0) std::this_thread::sleep_for(1ms);
    server.http().begin_drain();
    // Draining: new work and health checks get 503 (load balancers stop sending), the running stream goes on.
    const HttpResult refused = post_json(server, "/v1/completions", R"({"prompt":"b"})");
    EXPECT_EQ(refused.status, 503);
    EXPECT_EQ(refused.headers.count("Retry-After"), 1u);
    EXPECT_EQ(get(server, "/health").status, 503);
    const auto start = Clock::now();
    server.shutdown(10s);  // generous grace: the 300 ms request completes
    client.join();
    EXPECT_LT(Clock::now() - start, 5s);
    EXPECT_EQ(last_finish_reason(body), "length");
    bool done = false;
    parse_sse(body, &done);
    EXPECT_TRUE(done);
    // The listener is closed: nothing answers any more.
    EXPECT_EQ(get(server, "/health").status, -1);
}

TEST(ServerLifecycle, DrainAbortsWhatOutlivesTheGrace) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server({.engine = [](FakeEngineOptions& o) { o.step_interval = 20ms; }, .server = {}});
    std::string stream_body;
    HttpResult once;
    std::thread streaming([&] {
        stream_body = post_json(server, "/v1/completions", R"({"prompt":"a","max_tokens":1000,"stream":true})").body;
    });
    std::thread non_streaming(
        [&] { once = post_json(server, "/v1/completions", R"({"prompt":"b","max_tokens":1000})"); });
    // Both admitted and both generating (each has tokens before the abort).
    while (server.engine().live_requests() < 2 || server.engine().stats().generation_tokens_total < 4) {
        std::this_thread::sleep_for(1ms);
    }
    const auto start = Clock::now();
    server.shutdown(100ms);
    streaming.join();
    non_streaming.join();
    EXPECT_LT(Clock::now() - start, 3s);
    EXPECT_EQ(last_finish_reason(stream_body), "abort");
    ASSERT_EQ(once.status, 200) << once.body;
    EXPECT_EQ(once.json()["choices"][0]["finish_reason"], "abort");
    EXPECT_GT(once.json()["usage"]["completion_tokens"].get<int>(), 0);
}

TEST(ServerLifecycle, DrainDoesNotWaitForIdleKeepAliveConnections) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server({.engine = {}, .server = [](server::ServerConfig& c) { c.keep_alive_timeout_s = 30; }});
    httplib::Client client("127.0.0.1", server.port());
    client.set_keep_alive(true);
    ASSERT_EQ(client.Get("/health")->status, 200);  // the connection stays open and idle
    const auto start = Clock::now();
    server.shutdown(0ms);
    EXPECT_LT(Clock::now() - start, 2s);
}

TEST(ServerLifecycle, ClientDisconnectAbortsWithinOneStep) {
    DSV4_REQUIRE_TOKENIZER();
    constexpr auto kStep = 100ms;
    TestServer server({.engine = [&](FakeEngineOptions& o) { o.step_interval = kStep; }, .server = {}});
    RawConnection connection(server.port());
    connection.send_all(http_post_request("/v1/completions", R"({"prompt":"a","max_tokens":1000,"stream":true})"));
    const std::string received = connection.read_until("\"text\":\" ", 5s);
    ASSERT_NE(received.find("\"text\":"), std::string::npos) << received;
    const auto closed_at = Clock::now();
    connection.close_now();
    while (server.engine().live_requests() > 0 && Clock::now() - closed_at < 5s) std::this_thread::sleep_for(1ms);
    EXPECT_EQ(server.engine().live_requests(), 0) << "the engine request must be freed";
    const auto aborts = server.engine().aborts();
    ASSERT_EQ(aborts.size(), 1u);
    EXPECT_LT(aborts[0].when - closed_at, kStep) << "abort must reach the engine before its next step";
    EXPECT_LE(aborts[0].generated, 3);
    EXPECT_LE(server.engine().max_steps_to_apply_abort(), 1);
    // The request's thread records its end after the engine has dropped it: poll rather than race it.
    HttpResult metrics = get(server, "/metrics");
    for (const auto polled = Clock::now(); Clock::now() - polled < 5s; metrics = get(server, "/metrics")) {
        if (metrics.body.find("finished_reason=\"abort\"} 1") != std::string::npos) break;
        std::this_thread::sleep_for(5ms);
    }
    EXPECT_NE(metrics.body.find("dsv4:client_disconnects_total{model_name=\"dsv4-test\"} 1"), std::string::npos);
    EXPECT_NE(metrics.body.find("finished_reason=\"abort\"} 1"), std::string::npos);
}

TEST(ServerLifecycle, DisconnectDuringPrefillAbortsToo) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server({.engine = [](FakeEngineOptions& o) { o.first_token_delay = 30s; }, .server = {}});
    for (const bool stream : {true, false}) {
        RawConnection connection(server.port());
        connection.send_all(
            http_post_request("/v1/chat/completions",
                              json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stream", stream}}.dump()));
        while (server.engine().live_requests() == 0) std::this_thread::sleep_for(1ms);
        const auto closed_at = Clock::now();
        connection.close_now();
        while (server.engine().live_requests() > 0 && Clock::now() - closed_at < 5s) {
            std::this_thread::sleep_for(1ms);
        }
        EXPECT_EQ(server.engine().live_requests(), 0) << "stream=" << stream;
        EXPECT_LT(Clock::now() - closed_at, 1s) << "stream=" << stream;
    }
    EXPECT_EQ(server.engine().aborts().size(), 2u);
}

// 64 concurrent greedy streams with distinct prompts: each one's text equals what that request gives alone.
TEST(ServerLifecycle, ConcurrentStreamsAreIsolated) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    constexpr int kStreams = 64;
    std::vector<std::string> bodies(kStreams);
    std::vector<std::thread> clients;
    std::atomic<int> failures{0};
    for (int i = 0; i < kStreams; ++i) {
        clients.emplace_back([&, i] {
            const std::string body = json{
                {"prompt", "request number " + std::to_string(i)},
                {"max_tokens", 20 + i % 7},
                {"temperature", 0},
                {"stream", true}}.dump();
            const HttpResult result = post_json(server, "/v1/completions", body);
            if (result.status != 200) ++failures;
            bodies[static_cast<size_t>(i)] = result.body;
        });
    }
    for (auto& c : clients) c.join();
    EXPECT_EQ(failures.load(), 0);
    for (int i = 0; i < kStreams; ++i) {
        const HttpResult alone = post_json(
            server, "/v1/completions",
            json{{"prompt", "request number " + std::to_string(i)}, {"max_tokens", 20 + i % 7}, {"temperature", 0}}
                .dump());
        EXPECT_EQ(stream_text(bodies[static_cast<size_t>(i)]), alone.json()["choices"][0]["text"]) << i;
    }
}

}  // namespace
}  // namespace dsv4::testing
