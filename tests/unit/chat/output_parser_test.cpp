// Behaviour of the output parser on well-formed and on misbehaving model output.
#include "tokenizer/output_parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "output_parser_test_util.h"

namespace dsv4 {
namespace {

using test::contains;
using test::thinking_options;

const std::string kEos = "<｜end▁of▁sentence｜>";

std::string invoke(std::string_view name, std::string_view params) {
    return "<｜DSML｜invoke name=\"" + std::string(name) + "\">\n" + std::string(params) + "</｜DSML｜invoke>";
}
std::string param(std::string_view key, std::string_view value, bool is_string = true) {
    return "<｜DSML｜parameter name=\"" + std::string(key) + "\" string=\"" + (is_string ? "true" : "false") + "\">" +
           std::string(value) + "</｜DSML｜parameter>\n";
}
std::string block(std::string_view invokes) {
    return "\n\n<｜DSML｜tool_calls>\n" + std::string(invokes) + "\n</｜DSML｜tool_calls>";
}

TEST(OutputParser, ThinkingThenContent) {
    const ParsedOutput out = parse_output("Let me think.</think>The answer is 4." + kEos, thinking_options());
    EXPECT_EQ(out.reasoning, "Let me think.");
    EXPECT_EQ(out.content, "The answer is 4.");
    EXPECT_TRUE(out.tool_calls.empty());
}

TEST(OutputParser, ChatModeIsAllContent) {
    const ParsedOutput out = parse_output("Hello, world!" + kEos);
    EXPECT_EQ(out.reasoning, "");
    EXPECT_EQ(out.content, "Hello, world!");
}

TEST(OutputParser, WellFormedToolCall) {
    const std::string text = "I need the weather.</think>" +
                             block(invoke("get_weather", param("location", "Beijing") + param("days", "3", false))) +
                             kEos;
    const ParsedOutput out = parse_output(text, thinking_options());
    EXPECT_EQ(out.reasoning, "I need the weather.");
    EXPECT_EQ(out.content, "");
    ASSERT_EQ(out.tool_calls.size(), 1u);
    EXPECT_EQ(out.tool_calls[0].id, "call_0");
    EXPECT_EQ(out.tool_calls[0].name, "get_weather");
    EXPECT_EQ(out.tool_calls[0].arguments, R"({"location": "Beijing", "days": 3})");
    EXPECT_TRUE(out.tool_calls[0].complete);
    EXPECT_FALSE(out.tool_calls[0].arguments_repaired);
}

TEST(OutputParser, ContentBeforeToolsLosesOnlyTheBlankLine) {
    const std::string text = "Let me check.\n\n\n" + block(invoke("f", "")).substr(2) + kEos;
    const ParsedOutput out = parse_output(text);
    EXPECT_EQ(out.content, "Let me check.\n");  // like the reference: "\n\n" before the block belongs to it
    ASSERT_EQ(out.tool_calls.size(), 1u);
    EXPECT_EQ(out.tool_calls[0].arguments, "{}");
}

TEST(OutputParser, SeveralCallsAndJsonTyping) {
    const std::string calls = invoke("a", param("s", "x \"quoted\"\nline") + param("n", "-1.5e3", false)) + "\n" +
                              invoke("b", param("o", R"({"k": [1, true, null]})", false) + param("u", "北京")) + "\n" +
                              invoke("c", "");
    OutputParserOptions options;
    options.tool_call_id_prefix = "req7-";
    const ParsedOutput out = parse_output(block(calls) + kEos, options);
    ASSERT_EQ(out.tool_calls.size(), 3u);
    EXPECT_EQ(out.tool_calls[0].id, "req7-0");
    EXPECT_EQ(out.tool_calls[2].id, "req7-2");
    EXPECT_EQ(out.tool_calls[0].arguments, R"({"s": "x \"quoted\"\nline", "n": -1.5e3})");
    EXPECT_EQ(out.tool_calls[1].arguments, R"({"o": {"k": [1, true, null]}, "u": "北京"})");
    EXPECT_EQ(out.tool_calls[2].arguments, "{}");
    for (const auto& call : out.tool_calls) {
        EXPECT_TRUE(nlohmann::json::accept(call.arguments)) << call.arguments;
        EXPECT_TRUE(call.complete);
    }
    EXPECT_EQ(out.content, "");
}

TEST(OutputParser, ArgumentsStreamWhileTheValueIsGenerated) {
    StreamingOutputParser parser;
    auto deltas = parser.push("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"write\">\n");
    ASSERT_EQ(deltas.size(), 1u);
    EXPECT_EQ(deltas[0].kind, OutputDeltaKind::kToolCallStart);
    EXPECT_EQ(deltas[0].tool_name, "write");
    EXPECT_EQ(deltas[0].tool_call_id, "call_0");

    deltas = parser.push("<｜DSML｜parameter name=\"text\" string=\"true\">Once upon");
    ASSERT_EQ(deltas.size(), 1u);
    EXPECT_EQ(deltas[0].kind, OutputDeltaKind::kToolCallArguments);
    EXPECT_EQ(deltas[0].text, "{\"text\": \"Once upon");

    deltas = parser.push(" a \"time\"</｜DSML｜para");
    ASSERT_EQ(deltas.size(), 1u);
    EXPECT_EQ(deltas[0].text, " a \\\"time\\\"");

    deltas = parser.push("meter>\n<｜DSML｜parameter name=\"n\" string=\"false\">[1,");
    ASSERT_EQ(deltas.size(), 1u);
    EXPECT_EQ(deltas[0].text, "\", \"n\": [1,");

    deltas = parser.push(" 2]</｜DSML｜parameter>\n</｜DSML｜invoke>");
    ASSERT_EQ(deltas.size(), 2u);
    EXPECT_EQ(deltas[0].text, " 2]}");
    EXPECT_EQ(deltas[1].kind, OutputDeltaKind::kToolCallEnd);
    EXPECT_TRUE(deltas[1].complete);
}

TEST(OutputParser, HoldsBackOnlyPossibleMarkers) {
    StreamingOutputParser parser;
    auto content_of = [](const std::vector<OutputDelta>& deltas) {
        std::string text;
        for (const auto& delta : deltas) {
            if (delta.kind == OutputDeltaKind::kContent) text += delta.text;
        }
        return text;
    };
    EXPECT_EQ(content_of(parser.push("a < b and <")), "a < b and ");
    EXPECT_EQ(content_of(parser.push("b> x <｜DS")), "<b> x ");
    EXPECT_EQ(content_of(parser.push("X")), "");                  // could still be a special token <｜DSX…｜>
    EXPECT_EQ(content_of(parser.push(" line\n")), "<|DSX line");  // not markup after all; the bar is rewritten
    EXPECT_EQ(content_of(parser.push("next")), "\nnext");
    EXPECT_EQ(content_of(parser.push("\n\n")), "");
    EXPECT_EQ(content_of(parser.finish()), "\n\n");
}

TEST(OutputParser, MissingWrapperBareInvokes) {
    const std::string text = "Sure.\n\n" + invoke("f", param("a", "x")) + "\n" + invoke("g", "") + kEos;
    const ParsedOutput out = parse_output(text);
    EXPECT_EQ(out.content, "Sure.");
    ASSERT_EQ(out.tool_calls.size(), 2u);
    EXPECT_EQ(out.tool_calls[0].arguments, R"({"a": "x"})");
    EXPECT_EQ(out.tool_calls[1].name, "g");
}

TEST(OutputParser, OrphanInvokeAfterTheBlock) {
    const std::string text = block(invoke("f", "")) + "\n" + invoke("g", param("k", "v")) + kEos;
    const ParsedOutput out = parse_output(text);
    ASSERT_EQ(out.tool_calls.size(), 2u);
    EXPECT_EQ(out.tool_calls[1].name, "g");
    EXPECT_EQ(out.tool_calls[1].arguments, R"({"k": "v"})");
    EXPECT_EQ(out.content, "");
}

TEST(OutputParser, UnterminatedReasoningStaysReasoning) {
    const ParsedOutput out = parse_output("I am still thinking about\n\n", thinking_options());
    EXPECT_EQ(out.reasoning, "I am still thinking about\n\n");
    EXPECT_EQ(out.content, "");
}

TEST(OutputParser, ToolBlockInsideReasoningEndsReasoning) {
    const std::string text = "I will call f." + block(invoke("f", param("q", "x"))) + kEos;
    const ParsedOutput out = parse_output(text, thinking_options());
    EXPECT_EQ(out.reasoning, "I will call f.");
    ASSERT_EQ(out.tool_calls.size(), 1u);
    EXPECT_EQ(out.tool_calls[0].arguments, R"({"q": "x"})");

    const ParsedOutput bare = parse_output("Calling.\n" + invoke("g", "") + "</think>Done." + kEos, thinking_options());
    EXPECT_EQ(bare.reasoning, "Calling.");
    ASSERT_EQ(bare.tool_calls.size(), 1u);
    EXPECT_EQ(bare.content, "Done.");
}

TEST(OutputParser, MissingCloseTagsAreImplied) {
    const std::string text =
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
        "<｜DSML｜parameter name=\"a\" string=\"true\">1\n"
        "<｜DSML｜parameter name=\"b\" string=\"false\">2\n"
        "<｜DSML｜invoke name=\"g\">\n</｜DSML｜tool_calls>" +
        kEos;
    const ParsedOutput out = parse_output(text);
    ASSERT_EQ(out.tool_calls.size(), 2u);
    EXPECT_EQ(out.tool_calls[0].arguments, "{\"a\": \"1\\n\", \"b\": 2\n}");
    EXPECT_TRUE(out.tool_calls[0].complete);
    EXPECT_EQ(out.tool_calls[1].arguments, "{}");
}

TEST(OutputParser, CutOffInsideAValue) {
    const ParsedOutput out = parse_output(R"(<｜DSML｜tool_calls>
<｜DSML｜invoke name="f">
<｜DSML｜parameter name="city" string="true">Bei)");
    ASSERT_EQ(out.tool_calls.size(), 1u);
    EXPECT_EQ(out.tool_calls[0].arguments, R"({"city": "Bei"})");
    EXPECT_FALSE(out.tool_calls[0].complete);

    const ParsedOutput json = parse_output(R"(<｜DSML｜invoke name="f">
<｜DSML｜parameter name="list" string="false">[{"a": "x)");
    ASSERT_EQ(json.tool_calls.size(), 1u);
    EXPECT_EQ(json.tool_calls[0].arguments, R"({"list": [{"a": "x"}]})");
    EXPECT_TRUE(json.tool_calls[0].arguments_repaired);
}

TEST(OutputParser, CutOffInsideATagDropsTheTag) {
    const ParsedOutput out = parse_output("Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_wea");
    EXPECT_EQ(out.content, "Checking.");
    EXPECT_TRUE(out.tool_calls.empty());
    const ParsedOutput partial = parse_output("Checking.\n\n<｜DSML｜tool_ca");
    EXPECT_EQ(partial.content, "Checking.");
}

TEST(OutputParser, InvalidJsonValuesAreRepaired) {
    struct Case {
        std::string value;
        std::string expected;
    };
    const Case cases[] = {
        {"abc", R"("abc")"},  // cannot start JSON: sent as a string
        {" ", R"(" ")"},      // empty value
        {"", R"("")"},        //
        {"[1, 2", "[1, 2]"},  // unfinished container
        {R"({"k": tru)", R"({"k": true})"},
        {"12x", "12"},  // rest after the valid prefix is dropped
        {"1.", "1.0"},
        {"-", "-0"},
        {R"({"k")", R"({"k": null})"},
        {R"(["a\)", R"(["a\\"])"},
    };
    for (const Case& c : cases) {
        const ParsedOutput out = parse_output(block(invoke("f", param("v", c.value, false))));
        ASSERT_EQ(out.tool_calls.size(), 1u) << c.value;
        EXPECT_EQ(out.tool_calls[0].arguments, "{\"v\": " + c.expected + "}") << c.value;
        EXPECT_TRUE(out.tool_calls[0].arguments_repaired) << c.value;
        EXPECT_TRUE(nlohmann::json::accept(out.tool_calls[0].arguments)) << c.value;
    }
}

TEST(OutputParser, ValidJsonValuesAreCopiedRaw) {
    for (std::string value : {"0", "-0.5E+2", "true", "null", "\"s\"", " [ ] ", "\n{\"a\" : {}}\n", "\"\\u00e9\""}) {
        const ParsedOutput out = parse_output(block(invoke("f", param("v", value, false))));
        ASSERT_EQ(out.tool_calls.size(), 1u);
        EXPECT_EQ(out.tool_calls[0].arguments, "{\"v\": " + value + "}");
        EXPECT_FALSE(out.tool_calls[0].arguments_repaired) << value;
    }
}

TEST(OutputParser, SpecialTokensAndThinkTagsNeverReachContent) {
    EXPECT_EQ(parse_output("Hi<｜User｜> there" + kEos + "!").content, "Hi there!");
    EXPECT_EQ(parse_output("a<think>b</think>c").content, "abc");
    EXPECT_EQ(parse_output("x ｜DSML｜ y </｜DSML｜parameter> z").content, "x  y  z");
    EXPECT_EQ(parse_output("odd <｜ bar").content, "odd <| bar");
    // Removing a token must not assemble markup from its neighbours.
    const ParsedOutput joined = parse_output("｜DS<｜end▁of▁sentence｜>ML｜ <<｜User｜>｜x <thi" + kEos + "nk>");
    test::expect_no_leak(joined, "joined");
    EXPECT_EQ(joined.content, "|DSML｜ <|x ＜think>");
}

TEST(OutputParser, MarkupInsideValues) {
    const ParsedOutput out =
        parse_output(block(invoke("f", param("a", "x<｜User｜>y<think>z</think>") + param("b", "<｜DSML｜foo>w"))));
    ASSERT_EQ(out.tool_calls.size(), 1u);
    EXPECT_EQ(out.tool_calls[0].arguments, R"({"a": "xy<think>z</think>", "b": "w"})");
}

TEST(OutputParser, StrayTextInsideToolBlockBecomesContent) {
    const std::string text = "<｜DSML｜tool_calls>\n" + invoke("f", "") + "\nOops, prose.\n" + invoke("g", "") +
                             "</｜DSML｜tool_calls>\n" + kEos;
    const ParsedOutput out = parse_output(text);
    EXPECT_EQ(out.content, "Oops, prose.");
    EXPECT_EQ(out.tool_calls.size(), 2u);
}

TEST(OutputParser, JsonInsteadOfParametersGoesToContent) {
    const ParsedOutput out = parse_output(block(invoke("f", "{\"a\": 1}\n")));
    ASSERT_EQ(out.tool_calls.size(), 1u);
    EXPECT_EQ(out.tool_calls[0].arguments, "{}");
    EXPECT_EQ(out.content, "{\"a\": 1}\n");
}

TEST(OutputParser, V32WrapperNameIsAccepted) {
    const ParsedOutput out =
        parse_output("\n\n<｜DSML｜function_calls>\n" + invoke("f", "") + "\n</｜DSML｜function_calls>" + kEos);
    EXPECT_EQ(out.tool_calls.size(), 1u);
    EXPECT_EQ(out.content, "");
}

TEST(OutputParser, NamesAreSanitized) {
    const ParsedOutput out = parse_output(block(invoke("a<｜b", param("k｜DSML｜", "v"))));
    ASSERT_EQ(out.tool_calls.size(), 1u);
    EXPECT_EQ(out.tool_calls[0].name, "a<|b");
    EXPECT_EQ(out.tool_calls[0].arguments, R"({"k|DSML｜": "v"})");
}

TEST(OutputParser, MalformedTagLosesOnlyItsMarkup) {
    const ParsedOutput out = parse_output("see <｜DSML｜invoke name=oops> here");
    EXPECT_EQ(out.content, "see invoke name=oops> here");
    EXPECT_TRUE(out.tool_calls.empty());
}

TEST(OutputParser, UsageErrors) {
    StreamingOutputParser parser;
    parser.finish();
    EXPECT_TRUE(parser.finished());
    EXPECT_THROW(parser.push("x"), Error);
    EXPECT_THROW(parser.finish(), Error);
}

}  // namespace
}  // namespace dsv4
