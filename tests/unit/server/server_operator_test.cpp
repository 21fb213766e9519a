// Operator-facing defaults (issue 22): /health answers probes without the key (unless --protect-health) and says
// 503 while loading, never 401; /metrics keeps the key unless --public-metrics; the client's X-Request-Id names the
// response; CORS is off unless --allowed-origins lists the origin; refusals are counted by reason.
#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "server/http/cors.h"
#include "test_support.h"

namespace dsv4::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const char* kChat = R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":3})";

TestServerOptions keyed(const std::function<void(server::ServerConfig&)>& more = {}) {
    TestServerOptions options;
    options.server = [more](server::ServerConfig& c) {
        c.api_key = "secret";
        if (more) more(c);
    };
    return options;
}

std::string header(const HttpResult& result, const std::string& name) {
    const auto it = result.headers.find(name);
    return it == result.headers.end() ? std::string() : it->second;
}

TEST(OperatorDefaults, HealthIsPublicMetricsAreKeyed) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server(keyed());
    EXPECT_EQ(get(server, "/health").status, 200);
    EXPECT_EQ(get(server, "/metrics").status, 401);
    EXPECT_EQ(get(server, "/metrics", {{"Authorization", "Bearer secret"}}).status, 200);
    EXPECT_EQ(get(server, "/v1/models").status, 401);
    EXPECT_EQ(get(server, "/").status, 200);  // the chat page holds nothing; it asks for the key itself

    TestServer protected_health(keyed([](server::ServerConfig& c) {
        c.public_health = false;  // --protect-health
        c.public_metrics = true;  // --public-metrics
    }));
    EXPECT_EQ(get(protected_health, "/health").status, 401);
    EXPECT_EQ(get(protected_health, "/health", {{"X-Api-Key", "secret"}}).status, 200);
    EXPECT_EQ(get(protected_health, "/metrics").status, 200);
}

TEST(OperatorDefaults, ChatPageAtRootUnlessNoWebui) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer with_page;
    const HttpResult page = get(with_page, "/");
    EXPECT_EQ(page.status, 200);
    EXPECT_EQ(header(page, "Content-Type"), "text/html; charset=utf-8");
    EXPECT_NE(page.body.find("/v1/chat/completions"), std::string::npos);
    EXPECT_NE(header(page, "Content-Security-Policy").find("connect-src 'self'"), std::string::npos);
    TestServer without_page({.engine = {}, .server = [](server::ServerConfig& c) { c.webui = false; }});
    EXPECT_EQ(get(without_page, "/").status, 404);
    EXPECT_EQ(get(without_page, "/health").status, 200);
}

TEST(OperatorDefaults, HealthIs503WhileLoadingEvenWithAKey) {
    server::ServerConfig config;
    config.port = 0;
    config.api_key = "secret";
    config.quiet = true;
    server::HttpServer http(config);  // no model yet: loading
    const int port = http.bind();
    http.start();
    httplib::Client client("127.0.0.1", port);
    auto health = client.Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 503);
    EXPECT_TRUE(health->has_header("Retry-After"));
    EXPECT_NE(health->body.find("\"code\":\"model_loading\""), std::string::npos) << health->body;
    http.begin_drain();
    http.stop(0ms);
}

TEST(OperatorDefaults, ClientRequestIdNamesTheResponse) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const HttpResult chat = post_json(server, "/v1/chat/completions", kChat, {{"X-Request-Id", "trace-42"}});
    ASSERT_EQ(chat.status, 200) << chat.body;
    EXPECT_EQ(header(chat, "X-Request-Id"), "trace-42");
    EXPECT_EQ(chat.json()["id"], "chatcmpl-trace-42");
    EXPECT_EQ(chat.headers.count("X-Request-Id"), 1u);

    const HttpResult stream = post_json(server, "/v1/completions", R"({"prompt":"hi","max_tokens":2,"stream":true})",
                                        {{"X-Request-Id", "trace-43"}});
    ASSERT_EQ(stream.status, 200);
    EXPECT_EQ(header(stream, "X-Request-Id"), "trace-43");
    for (const json& chunk : parse_sse(stream.body)) EXPECT_EQ(chunk["id"], "cmpl-trace-43");

    // Two requests in flight with the same id both run (the engine ids differ).
    std::vector<std::thread> twins;
    for (int i = 0; i < 2; ++i) {
        twins.emplace_back([&] {
            const HttpResult r =
                post_json(server, "/v1/completions", R"({"prompt":"hi","max_tokens":20})", {{"X-Request-Id", "same"}});
            EXPECT_EQ(r.status, 200) << r.body;
        });
    }
    for (std::thread& t : twins) t.join();

    // Without one, the response id is the header's; other routes echo a given id.
    const HttpResult plain = post_json(server, "/v1/chat/completions", kChat);
    EXPECT_EQ(header(plain, "X-Request-Id"), plain.json()["id"]);
    EXPECT_EQ(header(get(server, "/health", {{"X-Request-Id", "probe-1"}}), "X-Request-Id"), "probe-1");
    const HttpResult bad = post_json(server, "/v1/chat/completions", kChat, {{"X-Request-Id", std::string(129, 'x')}});
    EXPECT_EQ(bad.status, 400);
    EXPECT_NE(bad.body.find("X-Request-Id"), std::string::npos) << bad.body;
}

TEST(OperatorDefaults, CorsIsOffByDefault) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const HttpResult models = get(server, "/v1/models", {{"Origin", "https://app.example"}});
    EXPECT_EQ(models.status, 200);
    EXPECT_EQ(models.headers.count("Access-Control-Allow-Origin"), 0u);
    httplib::Client client = server.client();
    auto preflight = client.Options("/v1/chat/completions",
                                    {{"Origin", "https://app.example"}, {"Access-Control-Request-Method", "POST"}});
    ASSERT_TRUE(preflight);
    EXPECT_EQ(preflight->status, 403);
    EXPECT_FALSE(preflight->has_header("Access-Control-Allow-Origin"));
}

TEST(OperatorDefaults, AllowedOriginsAreValidated) {
    const auto ok = server::parse_allowed_origins(
        {"https://app.example", "http://localhost:3000", "http://[::1]:8080", "http://10.0.0.7", "*"});
    EXPECT_EQ(ok.size(), 5u);
    for (const char* bad : {"app.example", "ftp://x.org", "https://x.org/path", "https://",
                            "https://x.org:", "http://[]", "https://x.org:1234567", "http://a b"}) {
        EXPECT_THROW(server::parse_allowed_origins({bad}), Error) << bad;
    }
}

TEST(OperatorDefaults, CorsForAllowedOriginsOnEveryRoute) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server(keyed([](server::ServerConfig& c) {
        c.allowed_origins = server::parse_allowed_origins({R"(["https://app.example"])", "http://localhost:3000"});
    }));
    const httplib::Headers from_app = {{"Origin", "https://app.example"}};
    httplib::Client client = server.client();
    auto preflight =
        client.Options("/v1/chat/completions", {{"Origin", "https://app.example"},
                                                {"Access-Control-Request-Method", "POST"},
                                                {"Access-Control-Request-Headers", "authorization, content-type"}});
    ASSERT_TRUE(preflight);
    EXPECT_EQ(preflight->status, 204);  // answered without the key: preflights carry none
    EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
    EXPECT_NE(preflight->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
    EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
    // Success, refusal and streaming responses all carry the headers.
    const HttpResult unauthorized = post_json(server, "/v1/chat/completions", kChat, from_app);
    EXPECT_EQ(unauthorized.status, 401);
    EXPECT_EQ(header(unauthorized, "Access-Control-Allow-Origin"), "https://app.example");
    httplib::Headers authorized = from_app;
    authorized.emplace("Authorization", "Bearer secret");
    const HttpResult ok = post_json(server, "/v1/chat/completions", kChat, authorized);
    EXPECT_EQ(ok.status, 200);
    EXPECT_EQ(header(ok, "Access-Control-Allow-Origin"), "https://app.example");
    EXPECT_EQ(header(ok, "Vary"), "Origin");
    EXPECT_NE(header(ok, "Access-Control-Expose-Headers").find("X-Request-Id"), std::string::npos);
    const HttpResult streamed =
        post_json(server, "/v1/completions", R"({"prompt":"hi","max_tokens":2,"stream":true})", authorized);
    EXPECT_EQ(header(streamed, "Access-Control-Allow-Origin"), "https://app.example");
    EXPECT_EQ(header(get(server, "/health", {{"Origin", "http://localhost:3000"}}), "Access-Control-Allow-Origin"),
              "http://localhost:3000");
    // Another origin gets nothing, and its preflight a 403.
    EXPECT_EQ(get(server, "/health", {{"Origin", "https://evil.example"}}).headers.count("Access-Control-Allow-Origin"),
              0u);
    auto evil = client.Options("/v1/chat/completions",
                               {{"Origin", "https://evil.example"}, {"Access-Control-Request-Method", "POST"}});
    ASSERT_TRUE(evil);
    EXPECT_EQ(evil->status, 403);
}

TEST(OperatorDefaults, AllowedOriginsAreCheckedAtStartup) {
    EXPECT_EQ(server::parse_allowed_origins({"https://a.example, http://b.example:8080/"}),
              (std::vector<std::string>{"https://a.example", "http://b.example:8080"}));
    EXPECT_EQ(server::parse_allowed_origins({"*"}), (std::vector<std::string>{"*"}));
    EXPECT_THROW(server::parse_allowed_origins({"https://a.example/path"}), dsv4::Error);
    EXPECT_THROW(server::parse_allowed_origins({"a.example"}), dsv4::Error);
    EXPECT_THROW(server::parse_allowed_origins({"[1, 2]"}), dsv4::Error);
    const server::CorsPolicy any(server::parse_allowed_origins({"*"}));
    EXPECT_TRUE(any.allows("https://x.example"));
    EXPECT_FALSE(any.allows(""));
}

// Regression: dsv4:requests_rejected_total was declared but never incremented outside a unit test.
TEST(OperatorDefaults, RefusalsAreCountedByReason) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server(keyed([](server::ServerConfig& c) {
        c.max_in_flight = 1;
        c.max_request_bytes = 2048;
    }));
    const httplib::Headers auth = {{"Authorization", "Bearer secret"}};
    EXPECT_EQ(post_json(server, "/v1/chat/completions", kChat).status, 401);
    EXPECT_EQ(post_json(server, "/v1/completions", std::string(3000, ' '), auth).status, 413);
    EXPECT_EQ(post_json(server, "/v1/completions", R"({"prompt":"hi","max_tokens":"x"})", auth).status, 400);
    EXPECT_EQ(post_json(server, "/v1/completions", R"({"prompt":"hi","max_tokens":100000})", auth).status, 400);
    std::thread holder([&] {
        EXPECT_EQ(post_json(server, "/v1/completions", R"({"prompt":"hold","max_tokens":400})", auth).status, 200);
    });
    while (server.http().state().gate().in_flight() == 0) std::this_thread::sleep_for(1ms);
    EXPECT_EQ(post_json(server, "/v1/completions", R"({"prompt":"hi","max_tokens":2})", auth).status, 429);
    holder.join();
    const std::string metrics = get(server, "/metrics", auth).body;
    for (const char* reason : {"unauthorized", "too_large", "invalid", "too_long", "server_busy"}) {
        EXPECT_NE(metrics.find(fmt::format("dsv4:requests_rejected_total{{model_name=\"dsv4-test\",reason=\"{}\"}} 1\n",
                                           reason)),
                  std::string::npos)
            << reason << "\n"
            << metrics;
    }
    EXPECT_NE(metrics.find("reason=\"queue_full\"} 0\n"), std::string::npos);
}

}  // namespace
}  // namespace dsv4::testing
