// Hand-written golden prompts, one rule of model-spec 6.2 each (see chat_encoding_golden_test.cpp for DeepSeek's own).
#include "tokenizer/chat_encoding.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "tokenizer/chat_tokens.h"

namespace dsv4 {
namespace {

using Json = nlohmann::ordered_json;
namespace ct = chat_tokens;

const std::string kBos(ct::kBos);
const std::string kEos(ct::kEos);

ChatMessage message(ChatRole role, std::string content) {
    ChatMessage out;
    out.role = role;
    out.content = std::move(content);
    return out;
}
ChatMessage system(std::string content) {
    return message(ChatRole::kSystem, std::move(content));
}
ChatMessage user(std::string content) {
    return message(ChatRole::kUser, std::move(content));
}
ChatMessage assistant(std::string content, std::string reasoning = {}, std::vector<ChatToolCall> calls = {}) {
    ChatMessage out = message(ChatRole::kAssistant, std::move(content));
    out.reasoning_content = std::move(reasoning);
    out.tool_calls = std::move(calls);
    return out;
}
ChatMessage tool(std::string content, std::string id = {}) {
    ChatMessage out = message(ChatRole::kTool, std::move(content));
    out.tool_call_id = std::move(id);
    return out;
}

ChatOptions chat_mode() {
    ChatOptions options;
    options.thinking_mode = ThinkingMode::kChat;
    return options;
}
ChatOptions thinking_mode() {
    ChatOptions options;
    options.thinking_mode = ThinkingMode::kThinking;
    return options;
}

std::string encode(std::vector<ChatMessage> messages, const ChatOptions& options,
                   ChatTemplateRevision revision = ChatTemplateRevision::kV4_0731, std::vector<Json> tools = {}) {
    return ChatEncoder(revision).encode({std::move(messages), std::move(tools)}, options);
}

Json weather_tool() {
    return Json::parse(R"({"name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}})");
}

std::string tools_block(const std::vector<Json>& tools) {
    return render_tools_block(tools);
}

TEST(ChatEncoding, SingleUserTurnChatAndThinking) {
    EXPECT_EQ(encode({user("Hi")}, chat_mode()), kBos + "<｜User｜>Hi<｜Assistant｜></think>");
    EXPECT_EQ(encode({user("Hi")}, thinking_mode()), kBos + "<｜User｜>Hi<｜Assistant｜><think>");
    EXPECT_EQ(encode({system("Be brief."), user("Hi")}, chat_mode()),
              kBos + "Be brief.<｜User｜>Hi<｜Assistant｜></think>");
}

TEST(ChatEncoding, NoBosAndEmptyConversation) {
    ChatOptions options = chat_mode();
    options.add_bos = false;
    EXPECT_EQ(encode({user("Hi")}, options), "<｜User｜>Hi<｜Assistant｜></think>");
    EXPECT_EQ(encode({}, chat_mode()), kBos);
}

TEST(ChatEncoding, MultiTurnChatModeHasNoReasoning) {
    const std::string prompt = encode({user("Q1"), assistant("A1", "hidden thoughts"), user("Q2")}, chat_mode());
    EXPECT_EQ(prompt, kBos + "<｜User｜>Q1<｜Assistant｜></think>A1" + kEos + "<｜User｜>Q2<｜Assistant｜></think>");
}

TEST(ChatEncoding, ThinkingDropsReasoningBeforeLastUserTurn) {
    const std::string prompt = encode({user("Q1"), assistant("A1", "R1"), user("Q2")}, thinking_mode());
    EXPECT_EQ(prompt, kBos + "<｜User｜>Q1<｜Assistant｜></think>A1" + kEos + "<｜User｜>Q2<｜Assistant｜><think>");
}

TEST(ChatEncoding, DropThinkingOffKeepsAllReasoning) {
    ChatOptions options = thinking_mode();
    options.drop_thinking = false;
    const std::string prompt = encode({user("Q1"), assistant("A1", "R1"), user("Q2")}, options);
    EXPECT_EQ(prompt,
              kBos + "<｜User｜>Q1<｜Assistant｜><think>R1</think>A1" + kEos + "<｜User｜>Q2<｜Assistant｜><think>");
}

TEST(ChatEncoding, AssistantAfterLastUserKeepsReasoning) {
    // The final assistant turn (e.g. a conversation replayed for training) keeps its reasoning and gets EOS.
    const std::string prompt = encode({user("Q"), assistant("A", "R")}, thinking_mode());
    EXPECT_EQ(prompt, kBos + "<｜User｜>Q<｜Assistant｜><think>R</think>A" + kEos);
}

TEST(ChatEncoding, ConsecutiveUserMessagesMergeWithBlankLine) {
    EXPECT_EQ(encode({user("part one"), user("part two")}, chat_mode()),
              kBos + "<｜User｜>part one\n\npart two<｜Assistant｜></think>");
}

TEST(ChatEncoding, RequestToolsGoIntoNewSystemMessageWhenFirstIsUser) {
    const std::vector<Json> tools = {weather_tool()};
    const std::string prompt = encode({user("Weather?")}, chat_mode(), ChatTemplateRevision::kV4_0731, tools);
    EXPECT_EQ(prompt, kBos + "\n\n" + tools_block(tools) + "<｜User｜>Weather?<｜Assistant｜></think>");
}

TEST(ChatEncoding, RequestToolsAttachToLeadingSystemMessage) {
    const std::vector<Json> tools = {weather_tool()};
    const std::string prompt =
        encode({system("You help."), user("Weather?")}, chat_mode(), ChatTemplateRevision::kV4_0731, tools);
    EXPECT_EQ(prompt, kBos + "You help.\n\n" + tools_block(tools) + "<｜User｜>Weather?<｜Assistant｜></think>");
    EXPECT_NE(prompt.find(R"({"name": "get_weather", "description": "Weather", "parameters": {"type": "object", )"
                          R"("properties": {"city": {"type": "string"}}, "required": ["city"]}})"),
              std::string::npos);
}

TEST(ChatEncoding, RequestToolsReplaceToolsOfLeadingMessage) {
    ChatMessage head = system("S");
    head.tools = {Json::parse(R"({"name": "old"})")};
    const std::vector<Json> tools = {weather_tool()};
    const std::string prompt = encode({head, user("U")}, chat_mode(), ChatTemplateRevision::kV4_0731, tools);
    EXPECT_EQ(prompt, kBos + "S\n\n" + tools_block(tools) + "<｜User｜>U<｜Assistant｜></think>");
}

TEST(ChatEncoding, ToolCallsToolResultsAndFollowUp) {
    const std::vector<Json> tools = {weather_tool()};
    std::vector<ChatMessage> messages = {
        user("Weather in Paris and Oslo?"),
        assistant("", "Two calls.",
                  {{"c1", "get_weather", R"({"city": "Paris"})"}, {"c2", "get_weather", R"({"city": "Oslo"})"}}),
        tool("Oslo: 3C", "c2"),
        tool("Paris: 20C", "c1"),
    };
    const std::string prompt = encode(messages, thinking_mode(), ChatTemplateRevision::kV4_0731, tools);
    const std::string expected =
        kBos + "\n\n" + tools_block(tools) +
        "<｜User｜>Weather in Paris and Oslo?<｜Assistant｜><think>Two calls.</think>" +
        "\n\n<｜DSML｜tool_calls>\n"
        "<｜DSML｜invoke name=\"get_weather\">\n"
        "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
        "</｜DSML｜invoke>\n"
        "<｜DSML｜invoke name=\"get_weather\">\n"
        "<｜DSML｜parameter name=\"city\" string=\"true\">Oslo</｜DSML｜parameter>\n"
        "</｜DSML｜invoke>\n"
        "</｜DSML｜tool_calls>" +
        kEos + "<｜User｜><tool_result>Paris: 20C</tool_result>\n\n<tool_result>Oslo: 3C</tool_result>" +
        "<｜Assistant｜><think>";
    EXPECT_EQ(prompt, expected);
}

TEST(ChatEncoding, UserTextAfterToolResultsJoinsTheSameTurn) {
    std::vector<ChatMessage> messages = {user("Go"), assistant("", "", {{"a", "f", "{}"}}), tool("done", "a"),
                                         user("Thanks, now summarise.")};
    const std::string prompt = encode(messages, chat_mode());
    EXPECT_EQ(prompt,
              kBos + "<｜User｜>Go<｜Assistant｜></think>" +
                  "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" +
                  kEos + "<｜User｜><tool_result>done</tool_result>\n\nThanks, now summarise." +
                  "<｜Assistant｜></think>");
}

TEST(ChatEncoding, ToolCallsWithoutToolsDeclaredStillDropOldReasoning) {
    std::vector<ChatMessage> messages = {user("Go"), assistant("", "R0", {{"a", "f", "{}"}}), tool("ok", "a")};
    const std::string prompt = encode(messages, thinking_mode());
    // The merged tool-result turn is the last user turn, so the assistant turn before it loses its reasoning.
    EXPECT_EQ(prompt,
              kBos + "<｜User｜>Go<｜Assistant｜></think>" +
                  "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" +
                  kEos + "<｜User｜><tool_result>ok</tool_result><｜Assistant｜><think>");
}

TEST(ChatEncoding, ArgumentTypingStringVersusJson) {
    const std::string arguments =
        R"({"s": "text", "n": 5, "f": 2.50, "big": 1e20, "b": true, "z": null, "o": {"k": "v", "a": 1}, )"
        R"("a": [1, "x", false], "u": "北京", "e": ""})";
    const std::string dsml = render_dsml_tool_calls({{"id", "f", arguments}});
    const std::string expected =
        "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
        "<｜DSML｜parameter name=\"s\" string=\"true\">text</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"n\" string=\"false\">5</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"f\" string=\"false\">2.5</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"big\" string=\"false\">1e+20</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"b\" string=\"false\">true</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"z\" string=\"false\">null</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"o\" string=\"false\">{\"k\": \"v\", \"a\": 1}</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"a\" string=\"false\">[1, \"x\", false]</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"u\" string=\"true\">北京</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"e\" string=\"true\"></｜DSML｜parameter>\n"
        "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
    EXPECT_EQ(dsml, expected);
}

TEST(ChatEncoding, StringArgumentsAreWrittenRaw) {
    // string="true" values are not JSON-escaped: quotes and newlines appear as they are.
    const std::string dsml = render_dsml_tool_calls({{"", "w", R"({"code": "print(\"hi\")\nx = 1"})"}});
    EXPECT_NE(dsml.find("<｜DSML｜parameter name=\"code\" string=\"true\">print(\"hi\")\nx = 1</｜DSML｜parameter>"),
              std::string::npos);
}

TEST(ChatEncoding, UnparsableArgumentsBecomeOneArgumentsParameter) {
    const std::string dsml = render_dsml_tool_calls({{"", "f", "not json"}});
    EXPECT_NE(dsml.find("<｜DSML｜parameter name=\"arguments\" string=\"true\">not json</｜DSML｜parameter>"),
              std::string::npos);
    // Blank arguments mean a call without parameters.
    EXPECT_EQ(render_dsml_tool_calls({{"", "f", ""}}),
              "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
}

TEST(ChatEncoding, NonAsciiContent) {
    EXPECT_EQ(encode({system("你是助手。"), user("温泉？ 💡 ñ")}, chat_mode()),
              kBos + "你是助手。<｜User｜>温泉？ 💡 ñ<｜Assistant｜></think>");
}

TEST(ChatEncoding, ResponseFormatBlock) {
    ChatMessage head = system("S");
    head.response_format = Json::parse(R"({"type": "json_schema", "schema": {"type": "object"}})");
    EXPECT_EQ(encode({head, user("U")}, chat_mode()),
              kBos + "S\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n" +
                  R"({"type": "json_schema", "schema": {"type": "object"}})" + "<｜User｜>U<｜Assistant｜></think>");
}

TEST(ChatEncoding, DeveloperAndLatestReminder) {
    ChatMessage developer = message(ChatRole::kDeveloper, "Dev question");
    ChatMessage reminder = message(ChatRole::kLatestReminder, "2026-01-01");
    EXPECT_EQ(encode({system("S"), reminder, developer}, chat_mode()),
              kBos + "S<｜latest_reminder｜>2026-01-01<｜User｜>Dev question<｜Assistant｜></think>");
}

TEST(ChatEncoding, OldDeveloperMessagesAreDroppedInThinkingMode) {
    ChatMessage developer = message(ChatRole::kDeveloper, "Old dev");
    const std::vector<ChatMessage> messages = {developer, assistant("A", "R"), user("Q")};
    EXPECT_EQ(encode(messages, thinking_mode()), kBos + "A" + kEos + "<｜User｜>Q<｜Assistant｜><think>");
    EXPECT_EQ(encode(messages, chat_mode()),
              kBos + "<｜User｜>Old dev<｜Assistant｜></think>A" + kEos + "<｜User｜>Q<｜Assistant｜></think>");
}

TEST(ChatEncoding, ReasoningEffortPerRevision) {
    const std::string tail = "<｜User｜>Q<｜Assistant｜><think>";
    const std::string absolute(ct::kEffortAbsoluteMaximum);
    const std::string beyond(ct::kEffortBeyondMaximum);
    auto with_effort = [&](ChatTemplateRevision revision, ReasoningEffort effort) {
        ChatOptions options = thinking_mode();
        options.reasoning_effort = effort;
        return encode({user("Q")}, options, revision);
    };
    using enum ReasoningEffort;
    EXPECT_EQ(with_effort(ChatTemplateRevision::kV4, kDefault), kBos + tail);
    EXPECT_EQ(with_effort(ChatTemplateRevision::kV4, kLow), kBos + tail);
    EXPECT_EQ(with_effort(ChatTemplateRevision::kV4, kHigh), kBos + tail);
    EXPECT_EQ(with_effort(ChatTemplateRevision::kV4, kMax), kBos + absolute + tail);
    EXPECT_EQ(with_effort(ChatTemplateRevision::kV4_0731, kDefault), kBos + tail);
    EXPECT_EQ(with_effort(ChatTemplateRevision::kV4_0731, kLow), kBos + tail);
    EXPECT_EQ(with_effort(ChatTemplateRevision::kV4_0731, kHigh), kBos + absolute + tail);
    EXPECT_EQ(with_effort(ChatTemplateRevision::kV4_0731, kMax), kBos + beyond + tail);
    // "none" turns thinking off.
    EXPECT_EQ(with_effort(ChatTemplateRevision::kV4_0731, kNone), kBos + "<｜User｜>Q<｜Assistant｜></think>");
}

TEST(ChatEncoding, ReasoningEffortTextsAreByteExact) {
    EXPECT_EQ(ct::kEffortAbsoluteMaximum.substr(0, 64),
              "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n");
    EXPECT_EQ(ct::kEffortBeyondMaximum.substr(0, 81),
              "Reasoning Effort: Beyond maximum \xE2\x80\x94 exhaustive, relentless, and uncompromising.\n");
    EXPECT_TRUE(ct::kEffortAbsoluteMaximum.ends_with("left unchecked.\n\n"));
    EXPECT_TRUE(ct::kEffortBeyondMaximum.ends_with("no error remains undiscovered.\n\n"));
    EXPECT_EQ(ct::kEffortAbsoluteMaximum.size(), 476u);
    EXPECT_EQ(ct::kEffortBeyondMaximum.size(), 528u);
}

TEST(ChatEncoding, ReasoningEffortGoesBeforeSystemAndNotInChatMode) {
    ChatOptions options = thinking_mode();
    options.reasoning_effort = ReasoningEffort::kMax;
    EXPECT_EQ(encode({system("S"), user("Q")}, options, ChatTemplateRevision::kV4),
              kBos + std::string(ct::kEffortAbsoluteMaximum) + "S<｜User｜>Q<｜Assistant｜><think>");
    options.thinking_mode = ThinkingMode::kChat;
    EXPECT_EQ(encode({system("S"), user("Q")}, options, ChatTemplateRevision::kV4),
              kBos + "S<｜User｜>Q<｜Assistant｜></think>");
}

TEST(ChatEncoding, ReasoningEffortAliases) {
    EXPECT_EQ(parse_reasoning_effort("none"), ReasoningEffort::kNone);
    EXPECT_EQ(parse_reasoning_effort("minimal"), ReasoningEffort::kLow);
    EXPECT_EQ(parse_reasoning_effort("low"), ReasoningEffort::kLow);
    EXPECT_EQ(parse_reasoning_effort("medium"), ReasoningEffort::kHigh);
    EXPECT_EQ(parse_reasoning_effort("high"), ReasoningEffort::kHigh);
    EXPECT_EQ(parse_reasoning_effort("xhigh"), ReasoningEffort::kMax);
    EXPECT_EQ(parse_reasoning_effort("max"), ReasoningEffort::kMax);
    EXPECT_THROW(parse_reasoning_effort("extreme"), Error);
    EXPECT_THROW(parse_reasoning_effort(""), Error);
    ChatOptions options;
    options.reasoning_effort = parse_reasoning_effort("none");
    EXPECT_EQ(options.effective_thinking_mode(), ThinkingMode::kChat);
}

TEST(ChatEncoding, ActionTaskTransition) {
    ChatMessage question = user("Which springs?");
    question.task = ChatTask::kAction;
    EXPECT_EQ(encode({question, assistant("Search", "ignored")}, thinking_mode()),
              kBos + "<｜User｜>Which springs?<｜Assistant｜><think><｜action｜>Search" + kEos);
    ChatMessage title = user("Name this chat");
    title.task = ChatTask::kTitle;
    EXPECT_EQ(encode({title}, chat_mode()), kBos + "<｜User｜>Name this chat<｜title｜>");
}

std::string error_of(std::vector<ChatMessage> messages) {
    try {
        encode(std::move(messages), chat_mode());
    } catch (const Error& error) {
        return error.what();
    }
    return "no error";
}

TEST(ChatEncoding, InvalidConversationsAreRejected) {
    EXPECT_EQ(error_of({user("Q"), tool("result", "x")}),
              "message 1 (tool): a tool message must follow an assistant message with tool_calls");
    EXPECT_EQ(error_of({tool("result")}),
              "message 0 (tool): a tool message must follow an assistant message with tool_calls");
    EXPECT_EQ(error_of({user("Q"), assistant("", "", {{"a", "f", "{}"}}), tool("r", "b")}),
              "message 2 (tool): tool_call_id 'b' matches no tool call of assistant message 1");
    EXPECT_EQ(error_of({user("Q"), assistant("", "", {{"a", "", "{}"}})}),
              "message 1 (assistant): a tool call has no function name");
    EXPECT_EQ(error_of({user("Q"), assistant("", "", {{"a", "f", "[1, 2]"}})}),
              "message 1 (assistant): tool call 'f': arguments must be a JSON object, got: [1, 2]");
    EXPECT_EQ(error_of({message(ChatRole::kDeveloper, "")}), "message 0 (developer): content must not be empty");
    ChatMessage user_with_tools = user("Q");
    user_with_tools.tools = {weather_tool()};
    EXPECT_EQ(error_of({user_with_tools}),
              "message 0 (user): only system and developer messages can carry tools or response_format");
    ChatMessage system_with_task = system("S");
    system_with_task.task = ChatTask::kQuery;
    EXPECT_EQ(error_of({system_with_task}), "message 0 (system): only user messages can carry a task");
    ChatMessage bad_tool_schema = system("S");
    bad_tool_schema.tools = {Json("not an object")};
    EXPECT_EQ(error_of({bad_tool_schema}), "message 0 (system): each tool must be a JSON object");
    EXPECT_THROW(parse_chat_role("function"), Error);
    EXPECT_THROW(parse_chat_task("summarise"), Error);
}

// Conversations that start with an assistant turn (as some agents replay them); expected texts from other engines'
// ports of encoding_dsv4.py.
TEST(ChatEncoding, LeadingAssistantTurnWithToolResultsInCallOrder) {
    std::vector<ChatMessage> messages = {
        assistant("", "", {{"second", "second_tool", "{}"}, {"first", "first_tool", "{}"}}),
        tool("first result", "first"), tool("second result", "second")};
    EXPECT_EQ(encode(messages, chat_mode()),
              kBos +
                  "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"second_tool\">\n\n</｜DSML｜invoke>\n"
                  "<｜DSML｜invoke name=\"first_tool\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" +
                  kEos +
                  "<｜User｜><tool_result>second result</tool_result>\n\n<tool_result>first result</tool_result>" +
                  "<｜Assistant｜></think>");
    ChatOptions options = thinking_mode();
    options.drop_thinking = false;
    EXPECT_EQ(encode({assistant("old answer", "old reasoning"), user("next")}, options),
              kBos + "old reasoning</think>old answer" + kEos + "<｜User｜>next<｜Assistant｜><think>");
}

TEST(ChatEncoding, ParallelToolMessagesMayFollowEachOther) {
    std::vector<ChatMessage> messages = {user("Q"), assistant("", "", {{"a", "f", "{}"}, {"b", "g", "{}"}}),
                                         tool("ra", "a"), tool("rb", "b")};
    EXPECT_NO_THROW(encode(messages, chat_mode()));
}

}  // namespace
}  // namespace dsv4
