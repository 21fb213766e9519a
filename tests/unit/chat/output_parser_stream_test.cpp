// Chunk independence, no-leak property and agreement with DeepSeek's reference decoding of well-formed output.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "output_parser_test_util.h"
#include "tokenizer/chat_encoding.h"
#include "tokenizer/chat_json.h"
#include "tokenizer/output_parser.h"

namespace dsv4 {
namespace {

using test::expect_no_leak;
using test::expect_same_output;
using test::parse_byte_by_byte;
using test::parse_in_chunks;

const std::string kEos = "<｜end▁of▁sentence｜>";

// Realistic outputs and the failure modes of anchors 2.1 item 3, each parsed in both modes.
const std::vector<std::string>& corpus() {
    static const std::vector<std::string> texts = {
        "Let me think about 2+2.</think>The answer is **4**." + kEos,
        "The user wants weather.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
        "<｜DSML｜parameter name=\"location\" string=\"true\">北京 \"city\"</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
        "<｜DSML｜invoke name=\"search\">\n<｜DSML｜parameter name=\"q\" string=\"true\">a < b && c > d\n"
        "line two</｜DSML｜parameter>\n<｜DSML｜parameter name=\"opts\" string=\"false\">{\"n\": [1, 2.5, true], "
        "\"s\": \"x\\\"y\"}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" +
            kEos,
        "Checking.\n\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" "
        "string=\"true\">x</｜DSML｜parameter>\n"
        "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"g\">\n</｜DSML｜invoke>" +
            kEos,
        "Thinking with a tool inside\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
        "<｜DSML｜parameter name=\"v\" string=\"false\">[1, 2</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
        "</｜DSML｜tool_calls></think>after" +
            kEos,
        "unterminated reasoning <b>bold</b> and a trailing <",
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">1\n"
        "<｜DSML｜parameter name=\"b\" string=\"false\">bad json\n<｜DSML｜invoke name=\"g\">\n"
        "<｜DSML｜parameter name=\"c\" string=\"true\">cut off here",
        "a<think>b</think>c<｜User｜>d｜DSML｜e <｜ f ｜DS<｜end▁of▁sentence｜>ML｜ g <<｜User｜>｜h "
        "\n\n<｜DSML｜tool_ca",
        "</think>\n\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"x\"/>\n</｜DSML｜function_calls>\nprose after" +
            kEos,
        "x\n\n<｜DSML｜invoke name=\"v\">\n<｜DSML｜parameter name=\"t\" string=\"true\"><think>no</think>"
        "<｜DSML｜foo bar=\"1\">\n</｜DSML｜parameter>\n{\"json\": 1}\n</｜DSML｜invoke>",
        "emoji 💡 and fullwidth ，。｜ bars ｜｜ and <｜DSML｜invoke name=oops> end",
    };
    return texts;
}

std::string describe(const std::string& text, bool thinking) {
    return std::string(thinking ? "[thinking] " : "[chat] ") + text;
}

OutputParserOptions options_for(bool thinking) {
    OutputParserOptions options;
    options.thinking = thinking;
    return options;
}

TEST(OutputParserStream, ByteByByteEqualsWhole) {
    for (bool thinking : {false, true}) {
        for (const std::string& text : corpus()) {
            const auto options = options_for(thinking);
            const ParsedOutput whole = parse_output(text, options);
            expect_same_output(parse_byte_by_byte(text, options), whole, describe(text, thinking));
            expect_no_leak(whole, describe(text, thinking));
        }
    }
}

TEST(OutputParserStream, EverySplitPointEqualsWhole) {
    for (bool thinking : {false, true}) {
        for (const std::string& text : corpus()) {
            const auto options = options_for(thinking);
            const ParsedOutput whole = parse_output(text, options);
            for (std::size_t split = 1; split < text.size(); ++split) {
                expect_same_output(parse_in_chunks(text, options, {split}), whole,
                                   describe(text, thinking) + " split " + std::to_string(split));
            }
        }
    }
}

// Two split points both near a marker byte, so markers are cut into three pieces at every pair of offsets.
TEST(OutputParserStream, DoubleSplitsAroundMarkers) {
    for (bool thinking : {false, true}) {
        for (const std::string& text : corpus()) {
            const auto options = options_for(thinking);
            const ParsedOutput whole = parse_output(text, options);
            for (std::size_t start = 0; start < text.size(); ++start) {
                if (text[start] != '<' && text[start] != '\n' && text[start] != '\xEF') continue;
                for (std::size_t a = start + 1; a < std::min(text.size(), start + 24); ++a) {
                    for (std::size_t b = a + 1; b < std::min(text.size(), start + 26); b += 3) {
                        expect_same_output(
                            parse_in_chunks(text, options, {a, b - a}), whole,
                            describe(text, thinking) + " splits " + std::to_string(a) + "," + std::to_string(b));
                    }
                }
            }
        }
    }
}

TEST(OutputParserStream, RandomChunkingsEqualWhole) {
    std::mt19937 rng(1234);
    for (bool thinking : {false, true}) {
        for (const std::string& text : corpus()) {
            const auto options = options_for(thinking);
            const ParsedOutput whole = parse_output(text, options);
            for (int round = 0; round < 100; ++round) {
                expect_same_output(parse_in_chunks(text, options, test::random_chunks(text.size(), rng)), whole,
                                   describe(text, thinking) + " round " + std::to_string(round));
            }
        }
    }
}

bool is_valid_utf8(std::string_view text) {
    // RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF (what nlohmann::json accepts).
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    for (std::size_t i = 0; i < text.size();) {
        const unsigned lead = byte(i);
        std::size_t length = 0;
        unsigned low = 0x80, high = 0xBF;  // range of the second byte
        if (lead < 0x80) {
            length = 1;
        } else if (lead >= 0xC2 && lead <= 0xDF) {
            length = 2;
        } else if (lead >= 0xE0 && lead <= 0xEF) {
            length = 3;
            if (lead == 0xE0) low = 0xA0;
            if (lead == 0xED) high = 0x9F;
        } else if (lead >= 0xF0 && lead <= 0xF4) {
            length = 4;
            if (lead == 0xF0) low = 0x90;
            if (lead == 0xF4) high = 0x8F;
        } else {
            return false;
        }
        if (i + length > text.size()) return false;
        for (std::size_t k = 1; k < length; ++k) {
            const unsigned b = byte(i + k);
            if (k == 1 ? (b < low || b > high) : (b < 0x80 || b > 0xBF)) return false;
        }
        i += length;
    }
    return true;
}

// Random soup of markup pieces: whatever the model emits, no leak, valid JSON arguments, any chunking.
TEST(OutputParserStream, RandomMarkupSoupProperty) {
    const std::vector<std::string> pieces = {"<",
                                             ">",
                                             "/",
                                             "｜",
                                             "DSML",
                                             "｜DSML｜",
                                             "<｜DSML｜",
                                             "</｜DSML｜",
                                             "tool_calls",
                                             "invoke",
                                             "parameter",
                                             " name=\"",
                                             "f",
                                             "\"",
                                             " string=\"",
                                             "true",
                                             "false",
                                             "\">",
                                             "\n",
                                             "\n\n",
                                             "<think>",
                                             "</think>",
                                             kEos,
                                             "<｜User｜>",
                                             "<｜",
                                             "｜>",
                                             "abc",
                                             " ",
                                             "{",
                                             "}",
                                             "[",
                                             "]",
                                             "1",
                                             ":",
                                             ",",
                                             "é",
                                             "北",
                                             "\\",
                                             "\\u12",
                                             "<｜DSML｜tool_calls>",
                                             "</｜DSML｜tool_calls>",
                                             "<｜DSML｜invoke name=\"f\">",
                                             "</｜DSML｜invoke>",
                                             "<｜DSML｜parameter name=\"k\" string=\"false\">",
                                             "<｜DSML｜parameter name=\"s\" string=\"true\">",
                                             "</｜DSML｜parameter>",
                                             "\xEF",
                                             "\xBD",
                                             "\x9C",
                                             "think",
                                             "\t",
                                             "null",
                                             "-",
                                             ".",
                                             "e"};
    std::mt19937 rng(99);
    std::uniform_int_distribution<std::size_t> piece_of(0, pieces.size() - 1);
    std::uniform_int_distribution<int> length_of(1, 40);
    for (int round = 0; round < 1500; ++round) {
        std::string text;
        for (int n = length_of(rng); n > 0; --n) text += pieces[piece_of(rng)];
        const bool thinking = round % 2 == 1;
        const auto options = options_for(thinking);
        const std::string context = describe(text, thinking);
        const ParsedOutput whole = parse_output(text, options);
        expect_no_leak(whole, context);
        if (is_valid_utf8(text)) {
            for (const auto& call : whole.tool_calls) {
                EXPECT_TRUE(test::is_json_object(call.arguments)) << context << "\n" << call.arguments;
            }
        }
        expect_same_output(parse_byte_by_byte(text, options), whole, context);
        expect_same_output(parse_in_chunks(text, options, test::random_chunks(text.size(), rng)), whole, context);
        if (HasFailure()) return;  // one readable failure is enough
    }
}

// ---- agreement with the reference decoding (encoding_dsv4.py parse_message_from_completion_text) -------------

struct ReferenceCall {
    std::string name;
    std::string arguments;
};
struct ReferenceOutput {
    std::string reasoning;
    std::string content;
    std::vector<ReferenceCall> calls;
};

// A strict decoder for well-formed output written from the reference's rules: "{" + ", ".join(json(key) + ": " +
// (json(value) if string="true" else value)) + "}". Returns false on anything not well-formed.
bool reference_decode(std::string_view text, bool thinking, ReferenceOutput& out) {
    const std::string_view block_start = "\n\n<｜DSML｜tool_calls>\n";
    std::size_t pos = 0;
    if (thinking) {
        const std::size_t end = text.find("</think>");
        if (end == std::string::npos || text.substr(0, end).find(block_start) != std::string::npos) return false;
        out.reasoning = std::string(text.substr(0, end));
        pos = end + 8;
    }
    const std::size_t eos = text.find(kEos, pos);
    const std::size_t tools = text.find(block_start, pos);
    if (eos == std::string::npos || eos + kEos.size() != text.size()) return false;
    out.content = std::string(text.substr(pos, std::min(eos, tools) - pos));
    if (tools == std::string::npos || tools > eos) return true;
    pos = tools + block_start.size();
    auto take = [&](std::string_view literal) {
        if (text.substr(pos, literal.size()) != literal) return false;
        pos += literal.size();
        return true;
    };
    auto until = [&](std::string_view stop, std::string& value) {
        const std::size_t end = text.find(stop, pos);
        if (end == std::string::npos) return false;
        value = std::string(text.substr(pos, end - pos));
        pos = end + stop.size();
        return true;
    };
    while (take("<｜DSML｜invoke name=\"")) {
        ReferenceCall call;
        if (!until("\">\n", call.name)) return false;
        std::vector<std::string> members;
        while (take("<｜DSML｜parameter name=\"")) {
            std::string key, kind, value;
            if (!until("\" string=\"", key) || !until("\">", kind) || !until("</｜DSML｜parameter>\n", value))
                return false;
            std::string member;
            append_python_json_string(member, key);
            member += ": ";
            if (kind == "true") {
                append_python_json_string(member, value);
            } else {
                member += value;
            }
            members.push_back(member);
        }
        if (members.empty() && !take("\n")) return false;
        if (!take("</｜DSML｜invoke>\n")) return false;
        call.arguments = "{";
        for (std::size_t i = 0; i < members.size(); ++i) call.arguments += (i ? ", " : "") + members[i];
        call.arguments += "}";
        out.calls.push_back(call);
    }
    return take("</｜DSML｜tool_calls>") && pos == eos;
}

nlohmann::ordered_json random_value(std::mt19937& rng, int depth) {
    static const std::vector<std::string> strings = {"plain",
                                                     "",
                                                     "with \"quotes\" and \\ backslash",
                                                     "line1\nline2\ttab",
                                                     "北京 💡 ñ",
                                                     "a < b > c </d>",
                                                     "<think>not a tag</think>",
                                                     " leading and trailing ",
                                                     "{\"looks\": \"like json\"}",
                                                     "50%"};
    std::uniform_int_distribution<int> kind_of(0, depth > 2 ? 5 : 7);
    switch (kind_of(rng)) {
        case 0:
        case 1:
            return strings[std::uniform_int_distribution<std::size_t>(0, strings.size() - 1)(rng)];
        case 2:
            return std::uniform_int_distribution<int>(-1000000, 1000000)(rng);
        case 3:
            return std::uniform_real_distribution<double>(-1e6, 1e6)(rng);
        case 4:
            return std::uniform_int_distribution<int>(0, 1)(rng) == 1;
        case 5:
            return nullptr;
        case 6: {
            auto array = nlohmann::ordered_json::array();
            for (int n = std::uniform_int_distribution<int>(0, 3)(rng); n > 0; --n)
                array.push_back(random_value(rng, depth + 1));
            return array;
        }
        default: {
            auto object = nlohmann::ordered_json::object();
            for (int n = std::uniform_int_distribution<int>(0, 3)(rng); n > 0; --n) {
                object["k" + std::to_string(n)] = random_value(rng, depth + 1);
            }
            return object;
        }
    }
}

// Tool calls rendered by our encoder (the same DSML DeepSeek's encoder writes) parse back to the same calls, and the
// parser agrees with the reference decoding, whole and streamed.
TEST(OutputParserStream, EncodedCallsRoundTripAndMatchReference) {
    std::mt19937 rng(7);
    for (int round = 0; round < 300; ++round) {
        std::vector<ChatToolCall> calls;
        for (int n = std::uniform_int_distribution<int>(1, 3)(rng); n > 0; --n) {
            auto arguments = nlohmann::ordered_json::object();
            for (int p = std::uniform_int_distribution<int>(0, 4)(rng); p > 0; --p) {
                arguments["param_" + std::to_string(p)] = random_value(rng, 0);
            }
            calls.push_back({"", "tool_" + std::to_string(n), to_python_json(arguments)});
        }
        const bool thinking = round % 2 == 0;
        const std::string content = round % 3 == 0 ? "" : "Calling tools now.";
        const std::string text =
            (thinking ? "Reasoning first.</think>" : "") + content + render_dsml_tool_calls(calls) + kEos;

        ReferenceOutput reference;
        ASSERT_TRUE(reference_decode(text, thinking, reference)) << text;
        const auto options = options_for(thinking);
        const ParsedOutput parsed = parse_output(text, options);
        EXPECT_EQ(parsed.reasoning, reference.reasoning);
        EXPECT_EQ(parsed.content, reference.content);
        ASSERT_EQ(parsed.tool_calls.size(), calls.size()) << text;
        for (std::size_t i = 0; i < calls.size(); ++i) {
            EXPECT_EQ(parsed.tool_calls[i].name, calls[i].name);
            EXPECT_EQ(parsed.tool_calls[i].arguments, reference.calls[i].arguments) << text;
            EXPECT_EQ(nlohmann::ordered_json::parse(parsed.tool_calls[i].arguments),
                      nlohmann::ordered_json::parse(calls[i].arguments))
                << text;
            EXPECT_TRUE(parsed.tool_calls[i].complete);
            EXPECT_FALSE(parsed.tool_calls[i].arguments_repaired);
        }
        expect_same_output(parse_in_chunks(text, options, test::random_chunks(text.size(), rng)), parsed, text);
        if (HasFailure()) return;
    }
}

// Re-encoding the parsed calls gives back the model's DSML exactly.
TEST(OutputParserStream, ParseThenReencodeIsIdentity) {
    const std::string dsml =
        "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
        "<｜DSML｜parameter name=\"location\" string=\"true\">Beijing</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"unit\" string=\"true\">celsius</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"days\" string=\"false\">[1, 2.5]</｜DSML｜parameter>\n"
        "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
    const ParsedOutput parsed = parse_output(dsml + kEos);
    std::vector<ChatToolCall> calls;
    for (const auto& call : parsed.tool_calls) calls.push_back({call.id, call.name, call.arguments});
    EXPECT_EQ(render_dsml_tool_calls(calls), dsml);
}

}  // namespace
}  // namespace dsv4
