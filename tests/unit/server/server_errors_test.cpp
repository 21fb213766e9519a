// Bad input and overload: every failure is an OpenAI error object with the right status (and Retry-After where a
// retry can help), and the server keeps answering afterwards.
#include <gtest/gtest.h>

#include <thread>

#include "test_support.h"

namespace dsv4::testing {
namespace {

using nlohmann::json;

const char* kChat = R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":4})";

void expect_error(const HttpResult& result, int status, const std::string& type, const std::string& param = "") {
    EXPECT_EQ(result.status, status) << result.body;
    const json body = json::parse(result.body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << result.body;
    ASSERT_TRUE(body.contains("error")) << result.body;
    EXPECT_EQ(body["error"]["type"], type) << result.body;
    EXPECT_TRUE(body["error"]["message"].is_string());
    if (!param.empty()) {
        EXPECT_EQ(body["error"]["param"], param) << result.body;
    }
}

TEST(ServerErrors, BadRequestsGet400NamingTheParameter) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    expect_error(post_json(server, "/v1/chat/completions", "{\"messages\": ["), 400, "invalid_request_error");
    expect_error(
        post_json(server, "/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"top_p":"x"})"), 400,
        "invalid_request_error", "top_p");
    expect_error(
        post_json(server, "/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"top_p":0})"), 400,
        "invalid_request_error", "top_p");
    expect_error(
        post_json(server, "/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"temperature":-1})"),
        400, "invalid_request_error", "temperature");
    expect_error(post_json(server, "/v1/chat/completions",
                           R"({"messages":[{"role":"user","content":"hi"}],"logit_bias":{"999999999":1}})"),
                 400, "invalid_request_error", "logit_bias");
    expect_error(post_json(server, "/v1/completions", R"({"prompt":[1, 99999999]})"), 400, "invalid_request_error",
                 "prompt");
    expect_error(
        post_json(server, "/v1/chat/completions", R"({"messages":[{"role":"tool","tool_call_id":"x","content":"r"}]})"),
        400, "invalid_request_error", "messages");
    expect_error(post_json(server, "/v1/chat/completions",
                           R"({"messages":[{"role":"user","content":"hi"}],"min_tokens":10,"max_tokens":5})"),
                 400, "invalid_request_error", "min_tokens");
}

TEST(ServerErrors, ContextOverflowIs400) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server({.engine = {}, .server = {}, .max_model_len = 64});
    const HttpResult too_many = post_json(server, "/v1/completions", R"({"prompt":"hello","max_tokens":100})");
    expect_error(too_many, 400, "invalid_request_error", "max_tokens");
    EXPECT_NE(too_many.body.find("maximum context length is 64"), std::string::npos);
    std::string long_prompt(400, 'a');
    for (size_t i = 1; i < long_prompt.size(); i += 2) long_prompt[i] = ' ';
    expect_error(post_json(server, "/v1/completions", json{{"prompt", long_prompt}}.dump()), 400,
                 "invalid_request_error", "prompt");
    // No max_tokens on chat: the rest of the context is used.
    const HttpResult rest =
        post_json(server, "/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}]})");
    ASSERT_EQ(rest.status, 200) << rest.body;
    EXPECT_EQ(rest.json()["usage"]["total_tokens"], 64);
}

TEST(ServerErrors, UnknownModelRouteAndMethod) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    expect_error(
        post_json(server, "/v1/chat/completions", R"({"model":"gpt-9","messages":[{"role":"user","content":"hi"}]})"),
        404, "not_found_error");
    expect_error(post_json(server, "/v1/nothing", "{}"), 404, "not_found_error");
    const HttpResult wrong_method = get(server, "/v1/chat/completions");
    expect_error(wrong_method, 405, "invalid_request_error");
}

TEST(ServerErrors, BodyOverTheLimitIs413) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server({.engine = {}, .server = [](server::ServerConfig& c) { c.max_request_bytes = 1000; }});
    const std::string big = json{{"prompt", std::string(5000, 'x')}}.dump();
    expect_error(post_json(server, "/v1/completions", big), 413, "invalid_request_error");
    EXPECT_EQ(post_json(server, "/v1/completions", R"({"prompt":"ok","max_tokens":2})").status, 200);
}

TEST(ServerErrors, ApiKey) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server({.engine = {}, .server = [](server::ServerConfig& c) {
                           c.api_key = "sekrit";
                           c.public_health = true;
                           c.public_metrics = false;
                       }});
    expect_error(post_json(server, "/v1/chat/completions", kChat), 401, "authentication_error");
    expect_error(post_json(server, "/v1/chat/completions", kChat, {{"Authorization", "Bearer sekri"}}), 401,
                 "authentication_error");
    expect_error(post_json(server, "/v1/chat/completions", kChat, {{"Authorization", "Bearer sekrit2"}}), 401,
                 "authentication_error");
    EXPECT_EQ(post_json(server, "/v1/chat/completions", kChat, {{"Authorization", "Bearer sekrit"}}).status, 200);
    EXPECT_EQ(post_json(server, "/v1/chat/completions", kChat, {{"X-Api-Key", "sekrit"}}).status, 200);
    expect_error(get(server, "/v1/models"), 401, "authentication_error");
    EXPECT_EQ(get(server, "/health").status, 200);
    expect_error(get(server, "/metrics"), 401, "authentication_error");
    EXPECT_EQ(get(server, "/metrics", {{"Authorization", "Bearer sekrit"}}).status, 200);

    TestServer open_metrics({.engine = {}, .server = [](server::ServerConfig& c) {
                                 c.api_key = "k";
                                 c.public_health = false;
                                 c.public_metrics = true;
                             }});
    EXPECT_EQ(get(open_metrics, "/metrics").status, 200);
    expect_error(get(open_metrics, "/health"), 401, "authentication_error");
}

TEST(ServerErrors, EngineQueueFullIs429WithRetryAfter) {
    DSV4_REQUIRE_TOKENIZER();
    // One running slot and one queue place: a running request and a queued one fill the engine.
    TestServer server({.engine =
                           [](FakeEngineOptions& o) {
                               o.max_running = 1;
                               o.max_queued_requests = 1;
                               o.step_interval = std::chrono::microseconds(20000);
                           },
                       .server = {}});
    std::vector<std::thread> long_requests;
    for (int i = 0; i < 2; ++i) {
        long_requests.emplace_back(
            [&] { EXPECT_EQ(post_json(server, "/v1/completions", R"({"prompt":"a","max_tokens":15})").status, 200); });
        while (server.engine().live_requests() <= i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const HttpResult rejected = post_json(server, "/v1/completions", R"({"prompt":"b","max_tokens":2})");
    expect_error(rejected, 429, "rate_limit_error");
    EXPECT_EQ(rejected.headers.find("Retry-After")->second, "1");
    for (std::thread& t : long_requests) t.join();
    EXPECT_EQ(post_json(server, "/v1/completions", R"({"prompt":"b","max_tokens":2})").status, 200);
}

TEST(ServerErrors, TooManyInFlightIs429) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server({.engine = [](FakeEngineOptions& o) { o.step_interval = std::chrono::microseconds(20000); },
                       .server = [](server::ServerConfig& c) { c.max_in_flight = 2; }});
    std::vector<std::thread> holders;
    for (int i = 0; i < 2; ++i) {
        holders.emplace_back(
            [&] { EXPECT_EQ(post_json(server, "/v1/completions", R"({"prompt":"a","max_tokens":15})").status, 200); });
    }
    while (server.http().state().gate().in_flight() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const HttpResult rejected = post_json(server, "/v1/completions", R"({"prompt":"b","max_tokens":2})");
    expect_error(rejected, 429, "rate_limit_error");
    EXPECT_TRUE(rejected.headers.count("Retry-After"));
    EXPECT_EQ(get(server, "/health").status, 200);  // non-generation routes still answer
    for (auto& t : holders) t.join();
    const HttpResult metrics = get(server, "/metrics");
    EXPECT_NE(metrics.body.find("dsv4:http_responses_total{model_name=\"dsv4-test\",code=\"429\"} 1"),
              std::string::npos);
}

TEST(ServerErrors, ServerStillAnswersAfterGarbage) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const std::vector<std::string> bodies = {
        "",
        "null",
        "[]",
        "\"x\"",
        "{\"messages\":null}",
        "{\"messages\":[null]}",
        "{\"messages\":[[]]}",
        "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"\"}}]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":1e999}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"function\":{\"name\":\"f\",\"parameters\":"
        "5}}]}",
        std::string("{\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\"}]}"),
        "{\"messages\":[{\"role\":\"user\",\"content\":\"\\ud800\"}]}"};
    for (const std::string& body : bodies) {
        const HttpResult r = post_json(server, "/v1/chat/completions", body);
        EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    }
    EXPECT_EQ(post_json(server, "/v1/chat/completions", kChat).status, 200);
}

}  // namespace
}  // namespace dsv4::testing
