// /v1/chat/completions end to end in-process (FakeEngine): plain, streamed, reasoning, tools, stop strings, logprobs.
#include <gtest/gtest.h>

#include "test_support.h"

namespace dsv4::testing {
namespace {

using nlohmann::json;

std::string chat_body(const std::string& user, const std::string& extra = "") {
    json body = {{"model", "dsv4-test"}, {"messages", json::array({{{"role", "user"}, {"content", user}}})}};
    std::string text = body.dump();
    if (!extra.empty()) text = text.substr(0, text.size() - 1) + "," + extra + "}";
    return text;
}

// Prompt tokens of a chat body, as the server renders them (through /tokenize).
std::vector<int32_t> chat_prompt_tokens(const TestServer& server, const std::string& body) {
    const HttpResult result = post_json(server, "/tokenize", body);
    EXPECT_EQ(result.status, 200) << result.body;
    return result.json()["tokens"].get<std::vector<int32_t>>();
}

// Concatenated text of one field over all stream chunks of choice `index`.
std::string stream_field(const std::vector<json>& chunks, const std::string& field, int index = 0) {
    std::string text;
    for (const json& chunk : chunks) {
        for (const json& choice : chunk["choices"]) {
            if (choice["index"] == index && choice["delta"].contains(field) && choice["delta"][field].is_string()) {
                text += choice["delta"][field].get<std::string>();
            }
        }
    }
    return text;
}

std::string finish_reason_of(const std::vector<json>& chunks, int index = 0) {
    for (const json& chunk : chunks) {
        for (const json& choice : chunk["choices"]) {
            if (choice["index"] == index && choice["finish_reason"].is_string()) return choice["finish_reason"];
        }
    }
    return "";
}

TEST(ServerChat, GreedyOutputIsTheEngineTokensDecoded) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const std::string body = chat_body("Tell me a story", R"("temperature":0,"max_tokens":12)");
    const HttpResult result = post_json(server, "/v1/chat/completions", body);
    ASSERT_EQ(result.status, 200) << result.body;
    const json response = result.json();
    EXPECT_EQ(response["object"], "chat.completion");
    EXPECT_EQ(response["model"], "dsv4-test");
    EXPECT_EQ(response["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
    const json& choice = response["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "length");
    EXPECT_EQ(choice["message"]["role"], "assistant");

    SamplingParams params;
    params.temperature = 0;
    params.max_tokens = 12;
    const std::vector<int32_t> prompt = chat_prompt_tokens(server, chat_body("Tell me a story"));
    const std::vector<int32_t> expected = server.engine().expected_tokens(prompt, params, 0);
    EXPECT_EQ(choice["message"]["content"], server.tokenizer().decode(expected, true));
    EXPECT_EQ(response["usage"]["prompt_tokens"], prompt.size());
    EXPECT_EQ(response["usage"]["completion_tokens"], 12);
    EXPECT_EQ(response["usage"]["total_tokens"], prompt.size() + 12);
    EXPECT_EQ(result.headers.find("X-Request-Id")->second, response["id"]);
}

TEST(ServerChat, StreamingChunksAddUpAndEndWithUsageAndDone) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const std::string body = chat_body(
        "Tell me a story", R"("temperature":0,"max_tokens":9,"stream":true,"stream_options":{"include_usage":true})");
    const HttpResult result = post_json(server, "/v1/chat/completions", body);
    ASSERT_EQ(result.status, 200) << result.body;
    EXPECT_NE(result.headers.find("Content-Type")->second.find("text/event-stream"), std::string::npos);
    bool done = false;
    const std::vector<json> chunks = parse_sse(result.body, &done);
    EXPECT_TRUE(done);
    ASSERT_GE(chunks.size(), 3u);
    EXPECT_EQ(chunks.front()["choices"][0]["delta"]["role"], "assistant");
    EXPECT_EQ(chunks.front()["object"], "chat.completion.chunk");
    for (size_t i = 0; i + 1 < chunks.size(); ++i) EXPECT_TRUE(chunks[i]["usage"].is_null());
    const json& last = chunks.back();
    EXPECT_TRUE(last["choices"].empty());
    EXPECT_EQ(last["usage"]["completion_tokens"], 9);

    const HttpResult once =
        post_json(server, "/v1/chat/completions", chat_body("Tell me a story", R"("temperature":0,"max_tokens":9)"));
    EXPECT_EQ(stream_field(chunks, "content"), once.json()["choices"][0]["message"]["content"]);
    EXPECT_EQ(finish_reason_of(chunks), "length");
}

TEST(ServerChat, ReasoningIsSeparatedAndReportedUnderBothNames) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const HttpResult thinking = post_json(server, "/v1/chat/completions",
                                          chat_body("[[think]] six times seven?", R"("reasoning_effort":"high")"));
    ASSERT_EQ(thinking.status, 200) << thinking.body;
    const json message = thinking.json()["choices"][0]["message"];
    EXPECT_EQ(message["reasoning_content"], kFakeThinkReasoning);
    EXPECT_EQ(message["reasoning"], kFakeThinkReasoning);
    EXPECT_EQ(message["content"], kFakeThinkAnswer);
    EXPECT_EQ(thinking.json()["choices"][0]["finish_reason"], "stop");
    const json usage = thinking.json()["usage"];
    EXPECT_GT(usage["completion_tokens_details"]["reasoning_tokens"].get<int>(), 0);
    EXPECT_LT(usage["completion_tokens_details"]["reasoning_tokens"].get<int>(), usage["completion_tokens"].get<int>());

    // Server default (chat mode): no reasoning.
    const HttpResult chat = post_json(server, "/v1/chat/completions", chat_body("[[think]] six times seven?"));
    EXPECT_EQ(chat.json()["choices"][0]["message"]["content"], kFakeThinkAnswer);
    EXPECT_TRUE(chat.json()["choices"][0]["message"]["reasoning_content"].is_null());

    // Streamed: reasoning deltas under both names, then content.
    const HttpResult stream =
        post_json(server, "/v1/chat/completions",
                  chat_body("[[think]] six times seven?", R"("stream":true,"chat_template_kwargs":{"thinking":true})"));
    const std::vector<json> chunks = parse_sse(stream.body);
    EXPECT_EQ(stream_field(chunks, "reasoning_content"), kFakeThinkReasoning);
    EXPECT_EQ(stream_field(chunks, "reasoning"), kFakeThinkReasoning);
    EXPECT_EQ(stream_field(chunks, "content"), kFakeThinkAnswer);
    // reasoning_effort "none" forces chat mode even when thinking is the server default.
    TestServer thinking_default(
        {.engine = {}, .server = [](server::ServerConfig& c) { c.default_thinking = ThinkingMode::kThinking; }});
    const HttpResult none =
        post_json(thinking_default, "/v1/chat/completions", chat_body("[[think]] q", R"("reasoning_effort":"none")"));
    EXPECT_TRUE(none.json()["choices"][0]["message"]["reasoning_content"].is_null());
    const HttpResult by_default = post_json(thinking_default, "/v1/chat/completions", chat_body("[[think]] q"));
    EXPECT_EQ(by_default.json()["choices"][0]["message"]["reasoning_content"], kFakeThinkReasoning);
}

const char* kTools = R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}},
    {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string"}}}}}])";

TEST(ServerChat, ToolCallsNonStreaming) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const HttpResult result = post_json(server, "/v1/chat/completions", chat_body("[[tool]] weather?", kTools));
    ASSERT_EQ(result.status, 200) << result.body;
    const json choice = result.json()["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
    EXPECT_TRUE(choice["message"]["content"].is_null());
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
    const json& call = choice["message"]["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
              json::parse(R"({"city":"Paris","days":3})"));
    EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
}

TEST(ServerChat, ToolCallArgumentsStreamInPieces) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const HttpResult result = post_json(server, "/v1/chat/completions",
                                        chat_body("[[tool]] weather?", std::string(kTools) + R"(,"stream":true)"));
    ASSERT_EQ(result.status, 200);
    const std::vector<json> chunks = parse_sse(result.body);
    std::string name, id, arguments;
    int argument_chunks = 0;
    for (const json& chunk : chunks) {
        for (const json& choice : chunk["choices"]) {
            if (!choice["delta"].contains("tool_calls")) continue;
            const json& call = choice["delta"]["tool_calls"][0];
            EXPECT_EQ(call["index"], 0);
            if (call.contains("id")) id = call["id"];
            if (call["function"].contains("name")) name = call["function"]["name"];
            const std::string piece = call["function"]["arguments"];
            if (!piece.empty()) ++argument_chunks;
            arguments += piece;
        }
    }
    EXPECT_EQ(name, "get_weather");
    EXPECT_FALSE(id.empty());
    EXPECT_EQ(json::parse(arguments), json::parse(R"({"city":"Paris","days":3})"));
    EXPECT_GE(argument_chunks, 3) << "arguments must stream as they are generated, not in one piece";
    EXPECT_EQ(finish_reason_of(chunks), "tool_calls");
    EXPECT_EQ(stream_field(chunks, "content"), "");
    EXPECT_EQ(result.body.find("DSML"), std::string::npos) << "DSML markup leaked";
}

TEST(ServerChat, ParallelToolCallsAndTheSwitch) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const HttpResult both = post_json(server, "/v1/chat/completions", chat_body("[[parallel]]", kTools));
    const json calls = both.json()["choices"][0]["message"]["tool_calls"];
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(calls[1]["function"]["name"], "get_time");
    EXPECT_NE(calls[0]["id"], calls[1]["id"]);
    const HttpResult one =
        post_json(server, "/v1/chat/completions",
                  chat_body("[[parallel]]", std::string(kTools) + R"(,"parallel_tool_calls":false)"));
    EXPECT_EQ(one.json()["choices"][0]["message"]["tool_calls"].size(), 1u);
}

TEST(ServerChat, ToolResultsGoBackIntoThePrompt) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const std::string body = std::string(R"({"messages":[{"role":"user","content":"weather?"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
            "function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
        {"role":"tool","tool_call_id":"call_1","content":"sunny, 21C"}],)") +
                             kTools + "}";
    const HttpResult result = post_json(server, "/v1/chat/completions", body);
    ASSERT_EQ(result.status, 200) << result.body;
    EXPECT_EQ(result.json()["choices"][0]["message"]["content"], kFakeToolResultAnswer);
    // The rendered prompt carries the result block (what the scripted model keyed on).
    const HttpResult tokens = post_json(server, "/tokenize", body);
    const std::string prompt = server.tokenizer().decode(tokens.json()["tokens"].get<std::vector<int32_t>>(), false);
    EXPECT_NE(prompt.find("<tool_result>sunny, 21C</tool_result>"), std::string::npos) << prompt;
}

TEST(ServerChat, ToolChoiceNoneHidesToolsAndNamedShowsOnlyThatOne) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    auto prompt_text = [&](const std::string& extra) {
        const HttpResult r = post_json(server, "/tokenize", chat_body("q", std::string(kTools) + "," + extra));
        return server.tokenizer().decode(r.json()["tokens"].get<std::vector<int32_t>>(), false);
    };
    const std::string automatic = prompt_text(R"("tool_choice":"auto")");
    EXPECT_NE(automatic.find("get_weather"), std::string::npos);
    EXPECT_NE(automatic.find("get_time"), std::string::npos);
    EXPECT_EQ(prompt_text(R"("tool_choice":"none")").find("get_weather"), std::string::npos);
    const std::string named = prompt_text(R"("tool_choice":{"type":"function","function":{"name":"get_time"}})");
    EXPECT_EQ(named.find("get_weather"), std::string::npos);
    EXPECT_NE(named.find("get_time"), std::string::npos);
    // required without constrained decoding: what the model produced is returned as is (documented).
    const HttpResult required =
        post_json(server, "/v1/chat/completions",
                  chat_body("no tools here", std::string(kTools) + R"(,"tool_choice":"required","max_tokens":4)"));
    EXPECT_EQ(required.status, 200);
    EXPECT_EQ(required.json()["choices"][0]["finish_reason"], "length");
}

TEST(ServerChat, StopStringCutsTheOutputAndEndsTheChoice) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const HttpResult result = post_json(server, "/v1/chat/completions", chat_body("[[stop]]", R"("stop":["STOP"])"));
    ASSERT_EQ(result.status, 200);
    const json choice = result.json()["choices"][0];
    EXPECT_EQ(choice["message"]["content"], "Hello world. ");
    EXPECT_EQ(choice["finish_reason"], "stop");
    EXPECT_EQ(choice["stop_reason"], "STOP");

    const HttpResult kept = post_json(server, "/v1/chat/completions",
                                      chat_body("[[stop]]", R"("stop":["STOP"],"include_stop_str_in_output":true)"));
    EXPECT_EQ(kept.json()["choices"][0]["message"]["content"], "Hello world. STOP");

    const HttpResult stream =
        post_json(server, "/v1/chat/completions", chat_body("[[stop]]", R"("stop":["STOP"],"stream":true)"));
    const std::vector<json> chunks = parse_sse(stream.body);
    EXPECT_EQ(stream_field(chunks, "content"), "Hello world. ");
    EXPECT_EQ(finish_reason_of(chunks), "stop");
    EXPECT_EQ(stream.body.find("more text"), std::string::npos);
    // Usage counts only the tokens up to the one that completed the stop string.
    const HttpResult full = post_json(server, "/v1/chat/completions", chat_body("[[stop]]"));
    EXPECT_LT(result.json()["usage"]["completion_tokens"].get<int>(),
              full.json()["usage"]["completion_tokens"].get<int>());
}

TEST(ServerChat, MultiByteCharactersSurviveStreaming) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const HttpResult stream = post_json(server, "/v1/chat/completions", chat_body("[[utf8]]", R"("stream":true)"));
    EXPECT_EQ(stream_field(parse_sse(stream.body), "content"), kFakeUtf8Text);
}

TEST(ServerChat, LogprobsAndTopLogprobs) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const HttpResult result = post_json(server, "/v1/chat/completions",
                                        chat_body("hi", R"("max_tokens":5,"logprobs":true,"top_logprobs":3)"));
    ASSERT_EQ(result.status, 200) << result.body;
    const json content = result.json()["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(content.size(), 5u);
    std::string joined;
    for (const json& entry : content) {
        EXPECT_LT(entry["logprob"].get<double>(), 0.0);
        EXPECT_EQ(entry["top_logprobs"].size(), 3u);
        EXPECT_EQ(entry["top_logprobs"][0]["token"], entry["token"]);
        EXPECT_FALSE(entry["bytes"].empty());
        joined += entry["token"].get<std::string>();
    }
    EXPECT_EQ(joined, result.json()["choices"][0]["message"]["content"]);

    const HttpResult stream =
        post_json(server, "/v1/chat/completions",
                  chat_body("hi", R"("max_tokens":5,"logprobs":true,"top_logprobs":2,"stream":true)"));
    size_t streamed = 0;
    for (const json& chunk : parse_sse(stream.body)) {
        for (const json& choice : chunk["choices"]) {
            if (choice["logprobs"].is_object()) streamed += choice["logprobs"]["content"].size();
        }
    }
    EXPECT_EQ(streamed, 5u);
}

TEST(ServerChat, SeveralChoices) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const HttpResult greedy =
        post_json(server, "/v1/chat/completions", chat_body("story", R"("n":3,"temperature":0,"max_tokens":6)"));
    const json choices = greedy.json()["choices"];
    ASSERT_EQ(choices.size(), 3u);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(choices[i]["index"], i);
        EXPECT_EQ(choices[i]["message"]["content"], choices[0]["message"]["content"]);
    }
    EXPECT_EQ(greedy.json()["usage"]["completion_tokens"], 18);

    const HttpResult sampled = post_json(server, "/v1/chat/completions",
                                         chat_body("story", R"("n":2,"seed":7,"max_tokens":12,"stream":true)"));
    const std::vector<json> chunks = parse_sse(sampled.body);
    const std::string first = stream_field(chunks, "content", 0);
    const std::string second = stream_field(chunks, "content", 1);
    EXPECT_FALSE(first.empty());
    EXPECT_NE(first, second);
    // Same seed, same output.
    const HttpResult again = post_json(server, "/v1/chat/completions",
                                       chat_body("story", R"("n":2,"seed":7,"max_tokens":12,"stream":true)"));
    EXPECT_EQ(stream_field(parse_sse(again.body), "content", 1), second);
}

}  // namespace
}  // namespace dsv4::testing
