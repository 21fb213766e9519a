// JSON Schema front end beyond the official suite: generation (strict) semantics, number ranges against exact
// integer arithmetic on random bounds and values, formats, pattern escapes, and pathological schemas that must be
// refused or bounded (never hang).
#include "structured/json_schema.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "structured_test_util.h"

namespace dsv4::structured {
namespace {

std::shared_ptr<const CompiledGrammar> schema(std::string_view text, bool strict = true) {
    JsonSchemaOptions options;
    options.strict = strict;
    return testing::compile(compile_json_schema(text, options));
}

TEST(JsonSchema, StrictModeWritesOnlyWhatTheSchemaLists) {
    const auto g = schema(R"({"type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array",
        "items":{"type":"string"},"maxItems":2}},"required":["id"]})");
    EXPECT_TRUE(testing::accepts(*g, R"({"id":5})"));
    EXPECT_TRUE(testing::accepts(*g, "{ \"id\" : -12 ,\n  \"tags\": [\"a\", \"b\\n\\u00e9\"] }"));
    EXPECT_FALSE(testing::accepts(*g, R"({"tags":[],"id":5})"));  // schema order
    EXPECT_FALSE(testing::accepts(*g, R"({"id":5,"extra":1})"));  // no unlisted properties
    EXPECT_FALSE(testing::accepts(*g, R"({"id":5.0})"));          // integers without a fraction
    EXPECT_FALSE(testing::accepts(*g, R"({"id":5,"tags":["a","b","c"]})"));
    EXPECT_FALSE(testing::accepts(*g, R"({"id":01})"));
    const auto loose = schema(R"({"properties":{"id":{"type":"integer"}}})", false);
    EXPECT_TRUE(testing::accepts(*loose, R"({"id":5.0,"extra":[1,{"x":null}]})"));
    EXPECT_TRUE(testing::accepts(*loose, R"("not an object")"));
    EXPECT_FALSE(testing::accepts(*loose, R"({"id":5,"id":6})"));  // a listed name is never "additional"
}

TEST(JsonSchema, JsonModeWhitespaceIsBounded) {
    JsonSchemaOptions options;
    options.max_whitespace = 4;
    const auto g = testing::compile(compile_json_schema("{}", options));
    EXPECT_TRUE(testing::accepts(*g, "{\n   \"a\": [1, 2.5e-3, true, null, {}]\n}"));
    EXPECT_FALSE(testing::accepts(*g, "{     \"a\": 1}"));       // five spaces
    EXPECT_FALSE(testing::accepts(*g, "{\"a\": \"\\ud800\"}"));  // a lone surrogate escape
    EXPECT_TRUE(testing::accepts(*g, "{\"a\": \"\\ud83d\\ude00\"}"));
}

// Random decimals with at most 4 integer and 3 fraction digits: exact as integers scaled by 1000.
struct RandomDecimal {
    std::string text;
    int64_t milli = 0;
};

RandomDecimal random_decimal(std::mt19937& rng, bool integral) {
    std::uniform_int_distribution<int> digits(0, 4), frac_digits(integral ? 0 : 1, 3), digit(0, 9), coin(0, 1);
    int64_t int_part = 0;
    std::string int_text;
    const int n = digits(rng);
    for (int i = 0; i < n; ++i) int_part = int_part * 10 + digit(rng);
    int_text = std::to_string(int_part);
    std::string frac;
    int64_t frac_milli = 0;
    const int f = integral ? 0 : frac_digits(rng);
    for (int i = 0; i < f; ++i) frac += static_cast<char>('0' + digit(rng));
    for (int i = 0; i < 3; ++i) frac_milli = frac_milli * 10 + (i < f ? frac[static_cast<size_t>(i)] - '0' : 0);
    const bool negative = coin(rng) != 0;
    RandomDecimal d;
    d.text = (negative ? "-" : "") + int_text + (f > 0 ? "." + frac : "");
    d.milli = (negative ? -1 : 1) * (int_part * 1000 + frac_milli);
    return d;
}

TEST(JsonSchema, NumberRangesAgreeWithExactArithmetic) {
    std::mt19937 rng(20240521);
    for (int round = 0; round < 12; ++round) {
        const bool integer = round % 3 == 0;
        const RandomDecimal lo = random_decimal(rng, false);
        const RandomDecimal hi = random_decimal(rng, false);
        const bool lo_excl = round % 2 == 0;
        const bool hi_excl = round % 4 == 1;
        const std::string text = fmt::format(R"({{"type":"{}","{}":{},"{}":{}}})", integer ? "integer" : "number",
                                             lo_excl ? "exclusiveMinimum" : "minimum", lo.text,
                                             hi_excl ? "exclusiveMaximum" : "maximum", hi.text);
        std::shared_ptr<const CompiledGrammar> g;
        try {
            g = schema(text);
        } catch (const GrammarError& e) {  // an empty range
            EXPECT_NE(std::string(e.what()).find("matches nothing"), std::string::npos) << text << ": " << e.what();
            continue;
        }
        for (int i = 0; i < 150; ++i) {
            const RandomDecimal x = random_decimal(rng, integer);
            const bool in_range = (lo_excl ? x.milli > lo.milli : x.milli >= lo.milli) &&
                                  (hi_excl ? x.milli < hi.milli : x.milli <= hi.milli);
            EXPECT_EQ(testing::accepts(*g, x.text), in_range) << text << " value " << x.text;
        }
    }
}

TEST(JsonSchema, FormatsAndPatterns) {
    const auto date = schema(R"({"type":"string","format":"date"})");
    for (const char* ok : {"\"2024-02-29\"", "\"2000-02-29\"", "\"1999-12-31\""})
        EXPECT_TRUE(testing::accepts(*date, ok)) << ok;
    for (const char* bad : {"\"1900-02-29\"", "\"2023-02-29\"", "\"2023-04-31\"", "\"2023-13-01\""})
        EXPECT_FALSE(testing::accepts(*date, bad)) << bad;
    const auto uuid = schema(R"({"type":"string","format":"uuid"})");
    EXPECT_TRUE(testing::accepts(*uuid, "\"123e4567-e89b-12d3-a456-426614174000\""));
    EXPECT_FALSE(testing::accepts(*uuid, "\"123e4567e89b12d3a456426614174000\""));
    // A pattern constrains the decoded string: a quote in the class is written \" in JSON.
    const auto quoted = schema(R"({"type":"string","pattern":"^[a\"/]{2,3}$","maxLength":2})");
    EXPECT_TRUE(testing::accepts(*quoted, R"("a\"")"));
    EXPECT_TRUE(testing::accepts(*quoted, R"("\/a")"));
    EXPECT_FALSE(testing::accepts(*quoted, R"("a"")"));
    EXPECT_FALSE(testing::accepts(*quoted, R"("aaa")"));  // maxLength
    EXPECT_THROW(schema(R"({"type":"string","pattern":"(?=a)b"})"), GrammarError);
    EXPECT_THROW(schema(R"({"type":"string","pattern":"(a)\\1"})"), GrammarError);
    EXPECT_THROW(schema(R"({"type":"string","format":"ipv6"})"), GrammarError);
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
    for (const char* keyword : {"not", "uniqueItems", "patternProperties", "multipleOf", "if"}) {
        const std::string text = fmt::format(R"({{"type":"object","{}":{}}})", keyword,
                                             std::string(keyword) == "uniqueItems" ? "true" : "{}");
        try {
            schema(text);
            ADD_FAILURE() << keyword << " was accepted";
        } catch (const GrammarError& e) {
            EXPECT_NE(std::string(e.what()).find(fmt::format("'{}'", keyword)), std::string::npos) << e.what();
        }
    }
    EXPECT_NO_THROW(schema(R"({"type":"object","x-vendor-extension":1,"title":"t","uniqueItems":false})"));
}

template <typename F>
double seconds(F&& f) {
    const auto begin = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

TEST(JsonSchema, PathologicalSchemasAreRefusedOrBounded) {
    std::string deep = "{\"type\":\"integer\"}";
    for (int i = 0; i < 100; ++i) deep = fmt::format(R"({{"type":"array","items":{}}})", deep);
    EXPECT_THROW(schema(deep), GrammarError);  // deeper than max_depth
    std::string big_enum = "{\"enum\":[";
    for (int i = 0; i < 20000; ++i) big_enum += fmt::format("{}\"v{}\"", i > 0 ? "," : "", i);
    EXPECT_THROW(schema(big_enum + "]}"), GrammarError);
    std::string enum_2000 = "{\"enum\":[";
    for (int i = 0; i < 2000; ++i) enum_2000 += fmt::format("{}\"value-{}\"", i > 0 ? "," : "", i);
    EXPECT_LT(seconds([&] { EXPECT_TRUE(testing::accepts(*schema(enum_2000 + "]}"), "\"value-1999\"")); }), 20.0);
    // Exponential determinization is refused; nested stars are fine.
    EXPECT_LT(
        seconds([&] { EXPECT_THROW(schema(R"({"type":"string","pattern":"^(a|b)*a(a|b){24}$"})"), GrammarError); }),
        20.0);
    EXPECT_LT(
        seconds([&] {
            EXPECT_TRUE(testing::accepts(*schema(R"({"type":"string","pattern":"^(a+)+(b|bb)*c$"})"), "\"aaabbc\""));
        }),
        20.0);
    // Recursive schemas compile; the matcher bounds the nesting.
    const auto tree =
        schema(R"({"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},
                                 "$ref":"#/$defs/n"})");
    EXPECT_TRUE(testing::accepts(*tree, R"({"c":[{"c":[{}]},{}]})"));
}

}  // namespace
}  // namespace dsv4::structured
