#include "tokenizer/chat_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace dsv4 {
namespace {

using Json = nlohmann::ordered_json;

TEST(ChatJson, PythonSeparatorsAndKeyOrder) {
    const Json value = Json::parse(R"({"z": 1, "a": [true, false, null], "m": {"y": "s", "b": []}, "e": {}})");
    EXPECT_EQ(to_python_json(value), R"({"z": 1, "a": [true, false, null], "m": {"y": "s", "b": []}, "e": {}})");
}

TEST(ChatJson, NonAsciiIsKeptAndControlCharactersEscaped) {
    const Json value = Json::parse(R"({"city": "北京 °C 💡", "raw": "a\"b\\c\n\r\t\b\f\u0001\u001f\u007f"})");
    EXPECT_EQ(to_python_json(value),
              "{\"city\": \"北京 °C 💡\", \"raw\": \"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\"}");
}

TEST(ChatJson, EscapingIsPerByteSoSplitsConcatenate) {
    const std::string text = "x\"\\\n\x02é";
    std::string whole;
    append_json_escaped(whole, text);
    for (std::size_t split = 0; split <= text.size(); ++split) {
        std::string pieces;
        append_json_escaped(pieces, std::string_view(text).substr(0, split));
        append_json_escaped(pieces, std::string_view(text).substr(split));
        EXPECT_EQ(pieces, whole) << split;
    }
}

TEST(ChatJson, IntegersAsPython) {
    EXPECT_EQ(to_python_json(Json(-42)), "-42");
    EXPECT_EQ(to_python_json(Json(std::numeric_limits<std::uint64_t>::max())), "18446744073709551615");
    EXPECT_EQ(to_python_json(Json(std::numeric_limits<std::int64_t>::min())), "-9223372036854775808");
}

TEST(ChatJson, FloatsAsPythonRepr) {
    const std::pair<double, const char*> cases[] = {
        {1.0, "1.0"},
        {0.1, "0.1"},
        {-2.5, "-2.5"},
        {123.456, "123.456"},
        {12345678.9, "12345678.9"},
        {1e15, "1000000000000000.0"},
        {1e16, "1e+16"},
        {1.5e300, "1.5e+300"},
        {1e22, "1e+22"},
        {0.0001, "0.0001"},
        {1e-5, "1e-05"},
        {2.5e-7, "2.5e-07"},
        {0.0, "0.0"},
        {-0.0, "-0.0"},
        {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {100.0, "100.0"},
        {0.30000000000000004, "0.30000000000000004"},
    };
    for (const auto& [value, expected] : cases) EXPECT_EQ(python_float_repr(value), expected) << expected;
    EXPECT_EQ(python_float_repr(std::numeric_limits<double>::infinity()), "Infinity");
    EXPECT_EQ(python_float_repr(-std::numeric_limits<double>::infinity()), "-Infinity");
    EXPECT_EQ(python_float_repr(std::nan("")), "NaN");
}

TEST(ChatJson, ParsedFloatsKeepPythonForm) {
    EXPECT_EQ(to_python_json(Json::parse("[1.0, 2.50, 1E3, 3e-6]")), "[1.0, 2.5, 1000.0, 3e-06]");
}

}  // namespace
}  // namespace dsv4
