// Request parser: valid bodies become the right structs; every kind of bad input is a 400 ApiError naming the field.
#include "server/openai/request_parser.h"

#include <gtest/gtest.h>

#include "server/http/api_error.h"

namespace dsv4::server {
namespace {

// The param of the ApiError `body` raises (fails the test when it parses).
template <typename Parse>
std::string rejected_param(Parse parse, const std::string& body) {
    try {
        parse(body);
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400) << body;
        EXPECT_EQ(e.type(), "invalid_request_error");
        return e.param();
    }
    ADD_FAILURE() << "accepted: " << body;
    return "<accepted>";
}

std::string chat_rejects(const std::string& body) {
    return rejected_param(parse_chat_request, body);
}
std::string completion_rejects(const std::string& body) {
    return rejected_param(parse_completion_request, body);
}

constexpr const char* kHello = R"("messages":[{"role":"user","content":"hi"}])";

TEST(RequestParser, ChatDefaultsAndSampling) {
    const ChatRequest r = parse_chat_request(std::string("{") + kHello +
                                             R"(,"model":"m","temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.1,
        "presence_penalty":0.5,"frequency_penalty":-0.5,"repetition_penalty":1.1,"seed":-3,"n":2,"max_tokens":7,
        "min_tokens":2,"ignore_eos":true,"stop":["x","yz"],"stop_token_ids":[5],"logit_bias":{"12":250,"13":-1.5},
        "logprobs":true,"top_logprobs":3,"stream":true,"stream_options":{"include_usage":true},
        "skip_special_tokens":false,"include_stop_str_in_output":true,"unknown_field":{"ignored":1}})");
    const SamplingParams& p = r.options.sampling;
    EXPECT_EQ(r.options.model, "m");
    EXPECT_DOUBLE_EQ(p.temperature, 0.5);
    EXPECT_DOUBLE_EQ(p.top_p, 0.9);
    EXPECT_EQ(p.top_k, 40);
    EXPECT_DOUBLE_EQ(p.min_p, 0.1);
    EXPECT_DOUBLE_EQ(p.presence_penalty, 0.5);
    EXPECT_DOUBLE_EQ(p.frequency_penalty, -0.5);
    EXPECT_DOUBLE_EQ(p.repetition_penalty, 1.1);
    ASSERT_TRUE(p.seed.has_value());
    EXPECT_EQ(*p.seed, static_cast<uint64_t>(int64_t{-3}));
    EXPECT_EQ(p.n, 2);
    EXPECT_EQ(r.options.max_tokens, 7);
    EXPECT_EQ(p.min_tokens, 2);
    EXPECT_TRUE(p.ignore_eos);
    EXPECT_EQ(p.stop, (std::vector<std::string>{"x", "yz"}));
    EXPECT_EQ(p.stop_token_ids, (std::vector<int64_t>{5}));
    ASSERT_EQ(p.logit_bias.size(), 2u);
    EXPECT_EQ(p.logit_bias[0].first, 12);
    EXPECT_FLOAT_EQ(p.logit_bias[0].second, 100.0f);  // clamped to OpenAI's range
    EXPECT_FLOAT_EQ(p.logit_bias[1].second, -1.5f);
    EXPECT_TRUE(r.options.logprobs);
    EXPECT_EQ(r.options.top_logprobs, 3);
    EXPECT_EQ(p.logprobs, 3);
    EXPECT_TRUE(r.options.stream);
    EXPECT_TRUE(r.options.stream_options.include_usage);
    EXPECT_FALSE(p.skip_special_tokens);
    EXPECT_TRUE(p.include_stop_str_in_output);
}

TEST(RequestParser, NullMeansUnsetAndIntegralFloatsAreIntegers) {
    const ChatRequest r = parse_chat_request(std::string("{") + kHello +
                                             R"(,"temperature":null,"max_tokens":12.0,"stop":null,"seed":null})");
    EXPECT_DOUBLE_EQ(r.options.sampling.temperature, 1.0);
    EXPECT_EQ(r.options.max_tokens, 12);
    EXPECT_TRUE(r.options.sampling.stop.empty());
    EXPECT_FALSE(r.options.sampling.seed.has_value());
}

TEST(RequestParser, MaxCompletionTokensWins) {
    const ChatRequest r =
        parse_chat_request(std::string("{") + kHello + R"(,"max_tokens":5,"max_completion_tokens":9})");
    EXPECT_EQ(r.options.max_tokens, 9);
}

TEST(RequestParser, Messages) {
    const ChatRequest r = parse_chat_request(R"({"messages":[
        {"role":"system","content":"sys"},
        {"role":"developer","content":"dev"},
        {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
        {"role":"assistant","content":null,"reasoning_content":"why","tool_calls":[
            {"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},
            {"id":"c2","function":{"name":"g","arguments":{"y":2}}}]},
        {"role":"tool","tool_call_id":"c1","content":"r1"},
        {"role":"assistant","content":"ok","reasoning":"alias"}]})");
    const auto& m = r.conversation.messages;
    ASSERT_EQ(m.size(), 6u);
    EXPECT_EQ(m[0].role, ChatRole::kSystem);
    EXPECT_EQ(m[1].role, ChatRole::kSystem);  // OpenAI developer = system
    EXPECT_EQ(m[2].content, "a\nb");
    EXPECT_EQ(m[3].role, ChatRole::kAssistant);
    EXPECT_EQ(m[3].content, "");
    EXPECT_EQ(m[3].reasoning_content, "why");
    ASSERT_EQ(m[3].tool_calls.size(), 2u);
    EXPECT_EQ(m[3].tool_calls[0].id, "c1");
    EXPECT_EQ(m[3].tool_calls[0].arguments, "{\"x\":1}");
    EXPECT_EQ(m[3].tool_calls[1].arguments, "{\"y\":2}");  // an object is accepted and serialized
    EXPECT_EQ(m[4].role, ChatRole::kTool);
    EXPECT_EQ(m[4].tool_call_id, "c1");
    EXPECT_EQ(m[5].reasoning_content, "alias");
}

TEST(RequestParser, ToolsAndToolChoice) {
    const std::string tools =
        R"("tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
                    {"type":"function","function":{"name":"get_time"}}])";
    ChatRequest r = parse_chat_request(std::string("{") + kHello + "," + tools + "}");
    ASSERT_EQ(r.conversation.tools.size(), 2u);
    EXPECT_EQ(r.conversation.tools[0]["name"], "get_weather");
    // Key order is preserved (the chat encoder renders schemas in request order).
    EXPECT_EQ(r.conversation.tools[0].begin().key(), "name");
    EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
    EXPECT_TRUE(r.parallel_tool_calls);

    r = parse_chat_request(
        std::string("{") + kHello + "," + tools +
        R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}},"parallel_tool_calls":false})");
    EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
    EXPECT_EQ(r.tool_choice_name, "get_time");
    EXPECT_FALSE(r.parallel_tool_calls);
    EXPECT_EQ(parse_chat_request(std::string("{") + kHello + "," + tools + R"(,"tool_choice":"required"})").tool_choice,
              ToolChoice::kRequired);
    EXPECT_EQ(parse_chat_request(std::string("{") + kHello + "," + tools + R"(,"tool_choice":"none"})").tool_choice,
              ToolChoice::kNone);

    EXPECT_EQ(chat_rejects(std::string("{") + kHello + "," + tools + R"(,"tool_choice":"sometimes"})"), "tool_choice");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + "," + tools +
                           R"(,"tool_choice":{"type":"function","function":{"name":"nope"}}})"),
              "tool_choice");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"tool_choice":"required"})"), "tool_choice");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"tools":[{"type":"retrieval"}]})"), "tools[0].type");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"tools":[{"type":"function","function":{}}]})"),
              "tools[0].function.name");
}

TEST(RequestParser, ReasoningControls) {
    ChatRequest r = parse_chat_request(std::string("{") + kHello + R"(,"reasoning_effort":"xhigh"})");
    ASSERT_TRUE(r.reasoning_effort.has_value());
    EXPECT_EQ(*r.reasoning_effort, ReasoningEffort::kMax);
    EXPECT_FALSE(r.thinking.has_value());

    r = parse_chat_request(
        std::string("{") + kHello +
        R"(,"chat_template_kwargs":{"thinking":true,"reasoning_effort":"low","drop_thinking":false}})");
    EXPECT_EQ(r.thinking, true);
    EXPECT_EQ(*r.reasoning_effort, ReasoningEffort::kLow);
    EXPECT_EQ(r.drop_thinking, false);

    r = parse_chat_request(std::string("{") + kHello + R"(,"chat_template_kwargs":{"enable_thinking":false}})");
    EXPECT_EQ(r.thinking, false);

    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"reasoning_effort":"extreme"})"), "reasoning_effort");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"chat_template_kwargs":{"thinking":"yes"}})"),
              "chat_template_kwargs.thinking");
}

TEST(RequestParser, ChatRejectionsNameTheParameter) {
    EXPECT_EQ(chat_rejects("{not json"), "");
    EXPECT_EQ(chat_rejects("[1,2]"), "");
    EXPECT_EQ(chat_rejects("{}"), "messages");
    EXPECT_EQ(chat_rejects(R"({"messages":[]})"), "messages");
    EXPECT_EQ(chat_rejects(R"({"messages":"hi"})"), "messages");
    EXPECT_EQ(chat_rejects(R"({"messages":[{"content":"hi"}]})"), "messages[0].role");
    EXPECT_EQ(chat_rejects(R"({"messages":[{"role":"wizard","content":"hi"}]})"), "messages[0].role");
    EXPECT_EQ(chat_rejects(R"({"messages":[{"role":"user","content":5}]})"), "messages[0].content");
    EXPECT_EQ(chat_rejects(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})"),
              "messages[0].content[0]");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"temperature":"hot"})"), "temperature");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"max_tokens":0})"), "max_tokens");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"max_tokens":1.5})"), "max_tokens");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"max_tokens":1e300})"), "max_tokens");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"max_tokens":-1})"), "max_tokens");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"max_tokens":99999999999999999999})"), "max_tokens");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"n":0})"), "n");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"n":129})"), "n");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"best_of":3})"), "best_of");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"stop":[1]})"), "stop[0]");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"stop":{"a":1}})"), "stop");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"logit_bias":{"abc":1}})"), "logit_bias");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"logit_bias":{"5":"x"}})"), "logit_bias");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"logit_bias":[1]})"), "logit_bias");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"top_logprobs":2})"), "top_logprobs");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"logprobs":true,"top_logprobs":21})"), "top_logprobs");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"stream_options":{"include_usage":true}})"),
              "stream_options");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"stream":true,"stream_options":{"include_usage":1}})"),
              "stream_options.include_usage");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"response_format":{"type":"xml"}})"),
              "response_format.type");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"functions":[]})"), "functions");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"stop_token_ids":[-1]})"), "stop_token_ids[0]");
    EXPECT_EQ(chat_rejects(std::string("{") + kHello + R"(,"seed":1.5})"), "seed");
}

TEST(RequestParser, DeepNestingIsRejectedWithoutRecursion) {
    std::string body = R"({"messages":[{"role":"user","content":"x"}],"tools":)";
    body += std::string(100000, '[');
    body += std::string(100000, ']');
    body += "}";
    EXPECT_EQ(chat_rejects(body), "");
    EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[{{{{","b":[1,[2]]})"), 3);
    EXPECT_EQ(json_nesting_depth(R"({"a":"\"[[[["})"), 1);
}

TEST(RequestParser, InvalidUtf8IsRejected) {
    EXPECT_EQ(chat_rejects(std::string(R"({"messages":[{"role":"user","content":")") + "\xff\xfe" + "\"}]}"), "");
}

TEST(RequestParser, CompletionPrompts) {
    CompletionRequest r = parse_completion_request(R"({"prompt":"hello","echo":true,"max_tokens":3})");
    ASSERT_EQ(r.prompts.size(), 1u);
    EXPECT_TRUE(r.prompts[0].is_text);
    EXPECT_EQ(r.prompts[0].text, "hello");
    EXPECT_TRUE(r.echo);

    r = parse_completion_request(R"({"prompt":[1,2,3]})");
    ASSERT_EQ(r.prompts.size(), 1u);
    EXPECT_FALSE(r.prompts[0].is_text);
    EXPECT_EQ(r.prompts[0].tokens, (std::vector<int64_t>{1, 2, 3}));

    r = parse_completion_request(R"({"prompt":["a","b"],"logprobs":2})");
    EXPECT_EQ(r.prompts.size(), 2u);
    EXPECT_TRUE(r.options.logprobs);
    EXPECT_EQ(r.options.top_logprobs, 2);

    r = parse_completion_request(R"({"prompt":[[1,2],[3]]})");
    ASSERT_EQ(r.prompts.size(), 2u);
    EXPECT_EQ(r.prompts[1].tokens, (std::vector<int64_t>{3}));

    EXPECT_EQ(completion_rejects(R"({})"), "prompt");
    EXPECT_EQ(completion_rejects(R"({"prompt":[]})"), "prompt");
    EXPECT_EQ(completion_rejects(R"({"prompt":5})"), "prompt");
    EXPECT_EQ(completion_rejects(R"({"prompt":[1,"a"]})"), "prompt[1]");
    EXPECT_EQ(completion_rejects(R"({"prompt":[[1],[]]})"), "prompt[1]");
    EXPECT_EQ(completion_rejects(R"({"prompt":[1,-2]})"), "prompt[1]");
    EXPECT_EQ(completion_rejects(R"({"prompt":"a","logprobs":21})"), "logprobs");
    EXPECT_EQ(completion_rejects(R"({"prompt":"a","echo":true,"logprobs":1})"), "echo");
    EXPECT_EQ(completion_rejects(R"({"prompt":"a","suffix":"z"})"), "suffix");
    std::string many = R"({"prompt":[)";
    for (int i = 0; i <= kMaxPromptsPerRequest; ++i) many += std::string(i ? "," : "") + "\"p\"";
    EXPECT_EQ(completion_rejects(many + "]}"), "prompt");
}

TEST(RequestParser, TokenizeAndDetokenize) {
    TokenizeRequest t = parse_tokenize_request(R"({"prompt":"hi","add_special_tokens":false})");
    EXPECT_FALSE(t.is_chat);
    EXPECT_EQ(t.prompt, "hi");
    EXPECT_FALSE(t.add_special_tokens);
    t = parse_tokenize_request(R"({"messages":[{"role":"user","content":"hi"}]})");
    EXPECT_TRUE(t.is_chat);
    EXPECT_EQ(t.chat.conversation.messages.size(), 1u);
    EXPECT_EQ(rejected_param(parse_tokenize_request, "{}"), "prompt");

    const DetokenizeRequest d = parse_detokenize_request(R"({"tokens":[0,5,7]})");
    EXPECT_EQ(d.tokens, (std::vector<int64_t>{0, 5, 7}));
    EXPECT_EQ(rejected_param(parse_detokenize_request, R"({"tokens":[1.5]})"), "tokens[0]");
    EXPECT_EQ(rejected_param(parse_detokenize_request, R"({"tokens":"1"})"), "tokens");
}

TEST(ApiErrorJson, IsAnOpenAiErrorObject) {
    const ApiError error(400, "invalid_request_error", "bad \"x\"", "temperature");
    const nlohmann::json j = nlohmann::json::parse(error.to_json());
    EXPECT_EQ(j["error"]["message"], "bad \"x\"");
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_EQ(j["error"]["param"], "temperature");
    EXPECT_TRUE(j["error"]["code"].is_null());
    // Bytes from the request that are not UTF-8 never break the error JSON.
    const ApiError odd(400, "invalid_request_error", std::string("bad \xff byte"));
    EXPECT_TRUE(nlohmann::json::parse(odd.to_json())["error"]["message"].is_string());
}

}  // namespace
}  // namespace dsv4::server
