// Helpers shared by the output parser tests.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/output_parser.h"

namespace dsv4::test {

inline OutputParserOptions thinking_options() {
    OutputParserOptions options;
    options.thinking = true;
    return options;
}

// Feeds text in the given chunk sizes (the last chunk takes the rest).
inline ParsedOutput parse_in_chunks(std::string_view text, const OutputParserOptions& options,
                                    const std::vector<std::size_t>& sizes) {
    StreamingOutputParser parser(options);
    ParsedOutput output;
    std::size_t pos = 0;
    for (std::size_t size : sizes) {
        if (pos >= text.size()) break;
        accumulate_deltas(output, parser.push(text.substr(pos, size)));
        pos += size;
    }
    if (pos < text.size()) accumulate_deltas(output, parser.push(text.substr(pos)));
    accumulate_deltas(output, parser.finish());
    return output;
}

inline ParsedOutput parse_byte_by_byte(std::string_view text, const OutputParserOptions& options) {
    return parse_in_chunks(text, options, std::vector<std::size_t>(text.size(), 1));
}

inline std::vector<std::size_t> random_chunks(std::size_t length, std::mt19937& rng) {
    std::vector<std::size_t> sizes;
    std::uniform_int_distribution<std::size_t> size_of(1, 12);
    for (std::size_t total = 0; total < length;) {
        sizes.push_back(size_of(rng));
        total += sizes.back();
    }
    return sizes;
}

inline void expect_same_output(const ParsedOutput& actual, const ParsedOutput& expected, const std::string& context) {
    EXPECT_EQ(actual.reasoning, expected.reasoning) << context;
    EXPECT_EQ(actual.content, expected.content) << context;
    ASSERT_EQ(actual.tool_calls.size(), expected.tool_calls.size()) << context;
    for (std::size_t i = 0; i < actual.tool_calls.size(); ++i) {
        EXPECT_EQ(actual.tool_calls[i].id, expected.tool_calls[i].id) << context;
        EXPECT_EQ(actual.tool_calls[i].name, expected.tool_calls[i].name) << context;
        EXPECT_EQ(actual.tool_calls[i].arguments, expected.tool_calls[i].arguments) << context;
        EXPECT_EQ(actual.tool_calls[i].complete, expected.tool_calls[i].complete) << context;
        EXPECT_EQ(actual.tool_calls[i].arguments_repaired, expected.tool_calls[i].arguments_repaired) << context;
    }
}

// RFC 8259 syntax; nlohmann additionally rejects numbers beyond double range (1e9999), which is still valid JSON.
inline bool is_json_object(const std::string& text) {
    try {
        return nlohmann::json::parse(text).is_object();
    } catch (const nlohmann::json::out_of_range& error) {
        return error.id == 406;
    } catch (const nlohmann::json::exception&) {
        return false;
    }
}

inline bool contains(std::string_view text, std::string_view part) {
    return text.find(part) != std::string::npos;
}

// The no-leak property: what reaches the client never reads as DSV4 markup.
inline void expect_no_leak(const ParsedOutput& output, const std::string& context) {
    for (std::string_view forbidden : {"｜DSML｜", "<｜", "<think>", "</think>"}) {
        EXPECT_FALSE(contains(output.content, forbidden)) << context << " content: " << output.content;
        EXPECT_FALSE(contains(output.reasoning, forbidden)) << context << " reasoning: " << output.reasoning;
    }
    for (const auto& call : output.tool_calls) {
        for (std::string_view forbidden : {"｜DSML｜", "<｜"}) {
            EXPECT_FALSE(contains(call.arguments, forbidden)) << context << " arguments: " << call.arguments;
            EXPECT_FALSE(contains(call.name, forbidden)) << context << " name: " << call.name;
        }
    }
}

}  // namespace dsv4::test
