// Structured outputs through the whole HTTP server (FakeEngine, which follows the constraint's masks: its own
// token when allowed, else the end when allowed, else an allowed token): every spelling (response_format,
// guided_*, structured_outputs, llama-server's grammar / json_schema) gives output that parses and validates, in
// every mode (stream, n > 1), max_tokens mid-object gives "length", stop strings still cut, forced tool calls
// parse, bad or unsupported schemas are 400s naming the field and the feature, and /metrics counts it all.
#include <gtest/gtest.h>

#include "test_support.h"

namespace dsv4::testing {
namespace {

using nlohmann::json;

constexpr const char* kSchema =
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},"size":{"enum":["S","M","L"]},)"
    R"("count":{"type":"integer","minimum":1,"maximum":9}},"required":["name","size","count"],)"
    R"("additionalProperties":false})";

std::string chat(const std::string& extra) {
    return R"({"model":"dsv4-test","messages":[{"role":"user","content":"describe it"}],)" + extra + "}";
}

void expect_valid_object(const std::string& text) {
    const json value = json::parse(text, nullptr, false);
    ASSERT_TRUE(value.is_object()) << text;
    EXPECT_TRUE(value["name"].is_string() && value["name"].get<std::string>().size() <= 6 * 4) << text;
    EXPECT_TRUE(value["size"] == "S" || value["size"] == "M" || value["size"] == "L") << text;
    EXPECT_TRUE(value["count"].is_number_integer() && value["count"] >= 1 && value["count"] <= 9) << text;
    EXPECT_EQ(value.size(), 3u) << text;
}

TEST(ServerStructured, JsonSchemaInEverySpellingAndMode) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const std::string schema = kSchema;
    for (const std::string& field :
         {R"("response_format":{"type":"json_schema","json_schema":{"name":"item","strict":true,"schema":)" + schema +
              "}}",
          R"("guided_json":)" + schema, R"("structured_outputs":{"json":)" + schema + "}",
          R"("json_schema":)" + schema}) {
        const HttpResult once =
            post_json(server, "/v1/chat/completions", chat(field + R"(,"max_tokens":200,"n":2,"seed":3)"));
        ASSERT_EQ(once.status, 200) << once.body;
        const json response = once.json();
        for (const json& choice : response["choices"]) {
            expect_valid_object(choice["message"]["content"]);
            EXPECT_EQ(choice["finish_reason"], "stop");
        }
    }
    const HttpResult stream = post_json(server, "/v1/chat/completions",
                                        chat(R"("guided_json":)" + schema + R"(,"max_tokens":200,"stream":true)"));
    std::string content;
    for (const json& chunk : parse_sse(stream.body)) {
        for (const json& choice : chunk["choices"]) {
            if (choice["delta"].contains("content")) content += choice["delta"]["content"].get<std::string>();
        }
    }
    expect_valid_object(content);
    const HttpResult completion =
        post_json(server, "/v1/completions", R"({"prompt":"x","max_tokens":200,"guided_json":)" + schema + "}");
    ASSERT_EQ(completion.status, 200) << completion.body;
    expect_valid_object(completion.json()["choices"][0]["text"]);
}

TEST(ServerStructured, OtherGrammarsLengthAndStopStrings) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    auto content = [&](const std::string& extra) {
        const HttpResult r = post_json(server, "/v1/chat/completions", chat(extra));
        EXPECT_EQ(r.status, 200) << r.body;
        return r.json()["choices"][0];
    };
    // JSON mode: free-form strings may run to max_tokens (then the text is an unfinished object), else an object.
    const json object = content(R"("response_format":{"type":"json_object"},"max_tokens":100)");
    const std::string object_text = object["message"]["content"];
    if (object["finish_reason"] == "stop") {
        EXPECT_TRUE(json::parse(object_text, nullptr, false).is_object()) << object_text;
    } else {
        EXPECT_EQ(object_text.substr(0, 1), "{");
    }
    const std::string choice = content(R"("guided_choice":["red","green"],"max_tokens":20)")["message"]["content"];
    EXPECT_TRUE(choice == "red" || choice == "green") << choice;
    const std::string digits = content(R"("guided_regex":"[0-9]{3}-[a-c]","max_tokens":20)")["message"]["content"];
    EXPECT_EQ(digits.size(), 5u);
    EXPECT_EQ(digits[3], '-') << digits;
    EXPECT_EQ(content(R"("grammar":"root ::= \"yes\" | \"no\"","max_tokens":20)")["message"]["content"]
                  .get<std::string>()
                  .substr(0, 1)
                  .find_first_of("yn"),
              0u);
    // max_tokens inside the object: "length", and the text is a prefix of a valid object.
    const json cut = content(std::string(R"("guided_json":)") + kSchema + R"(,"max_tokens":3)");
    EXPECT_EQ(cut["finish_reason"], "length");
    EXPECT_EQ(cut["message"]["content"].get<std::string>().substr(0, 1), "{");
    // A stop string still ends the choice where it matches.
    const json stopped =
        content(std::string(R"("guided_json":)") + kSchema + R"(,"max_tokens":200,"stop":["\"size\""])");
    EXPECT_EQ(stopped["finish_reason"], "stop");
    EXPECT_EQ(stopped["message"]["content"].get<std::string>().find("size"), std::string::npos);
}

TEST(ServerStructured, ForcedToolCallsAreWellFormed) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    const std::string tools =
        R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":)"
        R"({"city":{"type":"string","maxLength":5},"days":{"type":"integer","minimum":1,"maximum":3}},"required":["city"]}}},)"
        R"({"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"enum":["UTC"]}},"required":["zone"]}}}])";
    for (const std::string& choice : {std::string(R"("required","parallel_tool_calls":false)"),
                                      std::string(R"({"type":"function","function":{"name":"get_time"}})")}) {
        const HttpResult r =
            post_json(server, "/v1/chat/completions", chat(tools + R"(,"max_tokens":1000,"tool_choice":)" + choice));
        ASSERT_EQ(r.status, 200) << r.body;
        const json message = r.json()["choices"][0]["message"];
        ASSERT_TRUE(message["tool_calls"].is_array() && message["tool_calls"].size() == 1) << r.body;
        EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "tool_calls");
        for (const json& call : message["tool_calls"]) {
            const json args = json::parse(call["function"]["arguments"].get<std::string>());
            if (call["function"]["name"] == "get_weather") {
                EXPECT_TRUE(args["city"].is_string());
                EXPECT_NE(choice.find("required"), std::string::npos);
            } else {
                EXPECT_EQ(call["function"]["name"], "get_time");
                EXPECT_EQ(args["zone"], "UTC");
            }
        }
    }
}

TEST(ServerStructured, RefusalsNameTheFieldAndTheFeature) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    auto refusal = [&](const std::string& extra) {
        const HttpResult r = post_json(server, "/v1/chat/completions", chat(extra));
        EXPECT_EQ(r.status, 400) << r.body;
        return r.json()["error"];
    };
    json e = refusal(R"("guided_json":{"type":"array","uniqueItems":true})");
    EXPECT_EQ(e["param"], "guided_json");
    EXPECT_NE(e["message"].get<std::string>().find("'uniqueItems'"), std::string::npos) << e;
    e = refusal(
        R"x("response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string","pattern":"(?=x)"}}})x");
    EXPECT_EQ(e["param"], "response_format.json_schema.schema");
    EXPECT_NE(e["message"].get<std::string>().find("lookahead"), std::string::npos) << e;
    EXPECT_EQ(refusal(R"("guided_regex":"a","grammar":"root ::= \"a\"")")["param"], "grammar");
    EXPECT_EQ(refusal(R"("grammar":"root ::= root \"a\"")")["param"], "grammar");
    EXPECT_EQ(refusal(R"("use_beam_search":true)")["param"], "use_beam_search");
    EXPECT_EQ(refusal(R"("guided_json":{},"ignore_eos":true)")["param"], "ignore_eos");
    EXPECT_EQ(
        post_json(server, "/v1/chat/completions", chat(R"("use_beam_search":false,"top_a":0.5,"max_tokens":2)")).status,
        200);
}

TEST(ServerStructured, MetricsCountGrammarsAndMasks) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    for (int i = 0; i < 2; ++i)
        post_json(server, "/v1/chat/completions", chat(R"("guided_choice":["a","b"],"max_tokens":5)"));
    const std::string metrics = get(server, "/metrics").body;
    auto value = [&](const std::string& name) {
        const size_t at = metrics.find("\n" + name + "{");
        if (at == std::string::npos) return -1.0;
        return std::stod(metrics.substr(metrics.find("} ", at) + 2));
    };
    EXPECT_EQ(value("dsv4:structured_output_grammars_compiled_total"), 1.0);
    EXPECT_EQ(value("dsv4:structured_output_grammar_cache_hits_total"), 1.0);
    EXPECT_GE(value("dsv4:structured_output_mask_seconds_count"), 4.0);
}

}  // namespace
}  // namespace dsv4::testing
