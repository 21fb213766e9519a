// /v1/completions, /tokenize, /detokenize, /v1/models, /health, /version, /metrics in-process (FakeEngine).
#include <gtest/gtest.h>

#include "test_support.h"

namespace dsv4::testing {
namespace {

using nlohmann::json;

std::vector<int32_t> tokenize(const TestServer& server, const std::string& text, bool special = true) {
    const HttpResult r = post_json(server, "/tokenize", json{{"prompt", text}, {"add_special_tokens", special}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json()["tokens"].get<std::vector<int32_t>>();
}

TEST(ServerCompletion, TextPromptStartsWithBosAndMatchesTheEngine) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const HttpResult result = post_json(server, "/v1/completions",
                                        R"({"model":"dsv4-test","prompt":"Once upon","max_tokens":7,"temperature":0})");
    ASSERT_EQ(result.status, 200) << result.body;
    const json response = result.json();
    EXPECT_EQ(response["object"], "text_completion");
    EXPECT_EQ(response["id"].get<std::string>().rfind("cmpl-", 0), 0u);
    const std::vector<int32_t> prompt = tokenize(server, "Once upon");
    ASSERT_FALSE(prompt.empty());
    EXPECT_EQ(prompt[0], server.engine().model_info().bos_token_id);
    SamplingParams params;
    params.temperature = 0;
    params.max_tokens = 7;
    const std::vector<int32_t> expected = server.engine().expected_tokens(prompt, params, 0);
    EXPECT_EQ(response["choices"][0]["text"], server.tokenizer().decode(expected, true));
    EXPECT_EQ(response["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(response["usage"]["prompt_tokens"], prompt.size());
}

TEST(ServerCompletion, TokenIdPromptsListsAndSeveralChoices) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const std::vector<int32_t> a = tokenize(server, "first prompt", false);
    const std::vector<int32_t> b = tokenize(server, "second", false);
    const std::string body = json{{"prompt", {a, b}}, {"n", 2}, {"max_tokens", 4}, {"temperature", 0}}.dump();
    const HttpResult result = post_json(server, "/v1/completions", body);
    ASSERT_EQ(result.status, 200) << result.body;
    const json choices = result.json()["choices"];
    ASSERT_EQ(choices.size(), 4u);
    SamplingParams params;
    params.temperature = 0;
    params.max_tokens = 4;
    const std::string text_a = server.tokenizer().decode(server.engine().expected_tokens(a, params, 0), true);
    const std::string text_b = server.tokenizer().decode(server.engine().expected_tokens(b, params, 0), true);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(choices[i]["index"], i);
        EXPECT_EQ(choices[i]["text"], i < 2 ? text_a : text_b);
    }
    EXPECT_EQ(result.json()["usage"]["prompt_tokens"], a.size() + b.size());
    EXPECT_EQ(result.json()["usage"]["completion_tokens"], 16);

    // The same request streamed: every choice index appears and ends.
    const HttpResult stream =
        post_json(server, "/v1/completions",
                  json{{"prompt", {a, b}}, {"n", 2}, {"max_tokens", 4}, {"temperature", 0}, {"stream", true}}.dump());
    std::vector<std::string> texts(4);
    std::vector<std::string> finish(4);
    for (const json& chunk : parse_sse(stream.body)) {
        for (const json& choice : chunk["choices"]) {
            const int index = choice["index"];
            texts.at(static_cast<size_t>(index)) += choice["text"].get<std::string>();
            if (choice["finish_reason"].is_string()) finish.at(static_cast<size_t>(index)) = choice["finish_reason"];
        }
    }
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(texts[i], i < 2 ? text_a : text_b);
        EXPECT_EQ(finish[i], "length");
    }
}

TEST(ServerCompletion, EchoAndLogprobs) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const HttpResult echo = post_json(server, "/v1/completions", R"({"prompt":"Say:","echo":true,"max_tokens":3})");
    EXPECT_EQ(echo.json()["choices"][0]["text"].get<std::string>().rfind("Say:", 0), 0u);

    const HttpResult result = post_json(server, "/v1/completions", R"({"prompt":"Say:","logprobs":2,"max_tokens":4})");
    ASSERT_EQ(result.status, 200) << result.body;
    const json logprobs = result.json()["choices"][0]["logprobs"];
    ASSERT_EQ(logprobs["tokens"].size(), 4u);
    ASSERT_EQ(logprobs["token_logprobs"].size(), 4u);
    ASSERT_EQ(logprobs["top_logprobs"].size(), 4u);
    std::string joined;
    for (size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(logprobs["text_offset"][i], joined.size());
        joined += logprobs["tokens"][i].get<std::string>();
        EXPECT_LE(logprobs["top_logprobs"][i].size(), 2u);
        EXPECT_GE(logprobs["top_logprobs"][i].size(), 1u);
    }
    EXPECT_EQ(joined, result.json()["choices"][0]["text"]);
}

TEST(ServerCompletion, StopTokenIdsAndEos) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    // The [[stop]] script ends with EOS: finish_reason stop, stop_reason null, EOS not in the text but counted.
    const HttpResult eos = post_json(server, "/v1/completions", R"({"prompt":"[[stop]]","max_tokens":100})");
    const json choice = eos.json()["choices"][0];
    EXPECT_EQ(choice["text"], kFakeStopText);
    EXPECT_EQ(choice["finish_reason"], "stop");
    EXPECT_TRUE(choice["stop_reason"].is_null());
    const size_t text_tokens = tokenize(server, kFakeStopText, false).size();
    EXPECT_EQ(eos.json()["usage"]["completion_tokens"], text_tokens + 1);
    // ignore_eos: runs to max_tokens.
    const HttpResult ignored =
        post_json(server, "/v1/completions", R"({"prompt":"[[stop]]","max_tokens":40,"ignore_eos":true})");
    EXPECT_EQ(ignored.json()["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(ignored.json()["usage"]["completion_tokens"], 40);
    // A stop token id: reported as stop_reason.
    const int32_t world = tokenize(server, " world", false).at(0);
    const HttpResult by_id =
        post_json(server, "/v1/completions", json{{"prompt", "[[stop]]"}, {"stop_token_ids", {world}}}.dump());
    EXPECT_EQ(by_id.json()["choices"][0]["text"], "Hello");
    EXPECT_EQ(by_id.json()["choices"][0]["stop_reason"], world);
}

TEST(ServerInfo, TokenizeDetokenizeModelsHealthVersion) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const std::vector<int32_t> ids = tokenize(server, "Hello world", false);
    const HttpResult back = post_json(server, "/detokenize", json{{"tokens", ids}}.dump());
    EXPECT_EQ(back.json()["prompt"], "Hello world");
    EXPECT_EQ(post_json(server, "/tokenize", R"({"prompt":"x"})").json()["max_model_len"], 4096);

    const HttpResult models = get(server, "/v1/models");
    ASSERT_EQ(models.status, 200);
    EXPECT_EQ(models.json()["object"], "list");
    EXPECT_EQ(models.json()["data"][0]["id"], "dsv4-test");
    EXPECT_EQ(models.json()["data"][0]["max_model_len"], 4096);
    EXPECT_EQ(get(server, "/v1/models/dsv4-test").status, 200);
    EXPECT_EQ(get(server, "/v1/models/other").status, 404);
    EXPECT_EQ(get(server, "/health").status, 200);
    EXPECT_EQ(get(server, "/version").json()["version"], "0.1.0");
}

TEST(ServerInfo, MetricsUseVllmNames) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    ASSERT_EQ(post_json(server, "/v1/completions", R"({"prompt":"hi","max_tokens":5,"stream":true})").status, 200);
    ASSERT_EQ(post_json(server, "/v1/completions", R"({"prompt":"[[stop]]","max_tokens":50})").status, 200);
    const HttpResult metrics = get(server, "/metrics");
    ASSERT_EQ(metrics.status, 200);
    EXPECT_NE(metrics.headers.find("Content-Type")->second.find("text/plain"), std::string::npos);
    const std::string& text = metrics.body;
    for (const char* line : {
             "# TYPE vllm:num_requests_running gauge",
             "vllm:num_requests_running{model_name=\"dsv4-test\"} 0",
             "vllm:num_requests_waiting{model_name=\"dsv4-test\"} 0",
             "vllm:request_success_total{model_name=\"dsv4-test\",finished_reason=\"length\"} 1",
             "vllm:request_success_total{model_name=\"dsv4-test\",finished_reason=\"stop\"} 1",
             "vllm:time_to_first_token_seconds_count{model_name=\"dsv4-test\"} 2",
             "vllm:e2e_request_latency_seconds_count{model_name=\"dsv4-test\"} 2",
             "vllm:time_to_first_token_seconds_bucket{model_name=\"dsv4-test\",le=\"+Inf\"} 2",
             "# TYPE vllm:inter_token_latency_seconds histogram",
             "# TYPE vllm:prompt_tokens_total counter",
             "vllm:generation_tokens_total{model_name=\"dsv4-test\"}",
             "vllm:prefix_cache_queries_total{model_name=\"dsv4-test\"}",
             "vllm:spec_decode_num_accepted_tokens_total{model_name=\"dsv4-test\"} 0",
             "vllm:kv_cache_usage_perc{model_name=\"dsv4-test\"}",
             "dsv4:http_responses_total{model_name=\"dsv4-test\",code=\"200\"} ",  // logged after the reply: 1 or 2
             "dsv4:stream_event_overhead_seconds_count{model_name=\"dsv4-test\"} ",
         }) {
        EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "\n" << text;
    }
}

}  // namespace
}  // namespace dsv4::testing
