// Added-token matching: leftmost-longest, the two passes (normalized or not) and the lstrip / rstrip /
// single_word / special flags, following the behaviour of HF tokenizers' AddedVocabulary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer_added_tokens.h"

namespace dsv4::tokenizer {
namespace {

using Spans = std::vector<std::pair<std::string, int32_t>>;

AddedToken token(int32_t id, std::string content, bool special, bool normalized) {
    AddedToken t;
    t.id = id;
    t.content = std::move(content);
    t.special = special;
    t.normalized = normalized;
    return t;
}

Spans split(const AddedTokenMatcher& matcher, std::string_view text, bool match_special = true) {
    std::vector<TextSpan> spans;
    matcher.split(text, match_special, spans);
    Spans out;
    size_t expected_begin = 0;
    for (const TextSpan& s : spans) {
        EXPECT_EQ(s.begin, expected_begin) << "spans must cover the text in order";
        expected_begin = s.end;
        out.emplace_back(std::string(text.substr(s.begin, s.end - s.begin)), s.id);
    }
    EXPECT_EQ(expected_begin, text.size());
    return out;
}

TEST(AddedTokens, LeftmostLongestWithoutOverlap) {
    const AddedTokenMatcher matcher(
        {token(1, "<a>", true, false), token(2, "<a><b>", true, false), token(3, "b>c", true, false)});
    EXPECT_EQ(split(matcher, "x<a><b>c<a>"), (Spans{{"x", -1}, {"<a><b>", 2}, {"c", -1}, {"<a>", 1}}));
    EXPECT_EQ(split(matcher, "<a>b>c"), (Spans{{"<a>", 1}, {"b>c", 3}}));
    EXPECT_EQ(split(matcher, ""), Spans{});
    EXPECT_EQ(split(matcher, "plain"), (Spans{{"plain", -1}}));
}

TEST(AddedTokens, StripAndSingleWordOptions) {
    AddedToken my = token(0, "my", false, true);
    my.lstrip = my.rstrip = true;
    AddedToken ony = token(2, "ony", false, true);
    ony.single_word = true;
    const AddedTokenMatcher matcher(
        {my, token(1, "name", false, true), ony, token(3, "[CLS]", true, false), token(4, "[SEP]", true, false)});
    EXPECT_EQ(split(matcher, "[CLS] my name is anthony [SEP]"),
              (Spans{{"[CLS]", 3}, {" my ", 0}, {"name", 1}, {" is anthony ", -1}, {"[SEP]", 4}}));
}

TEST(AddedTokens, SingleWordNeedsNonWordNeighbours) {
    AddedToken mask = token(0, "<mask>", false, true);
    mask.single_word = true;
    const AddedTokenMatcher matcher({mask});
    EXPECT_EQ(split(matcher, "<mask> my name <mask> a<mask> <mask>ony <mask>"),
              (Spans{{"<mask>", 0}, {" my name ", -1}, {"<mask>", 0}, {" a<mask> <mask>ony ", -1}, {"<mask>", 0}}));
    // Punctuation is not a word character, a combining mark is.
    EXPECT_EQ(split(matcher, "<mask>, <mask>- \u25CC\u0330<mask>"),
              (Spans{{"<mask>", 0}, {", ", -1}, {"<mask>", 0}, {"- \u25CC\u0330<mask>", -1}}));
}

TEST(AddedTokens, StripAbsorbsUnicodeWhitespaceWithoutOverlap) {
    AddedToken mask = token(0, "<mask>", false, true);
    mask.lstrip = mask.rstrip = mask.single_word = true;
    const AddedTokenMatcher matcher({mask});
    EXPECT_EQ(split(matcher, "hi <mask> there\t<mask>\t<mask>\u2000"),
              (Spans{{"hi", -1}, {" <mask> ", 0}, {"there", -1}, {"\t<mask>\t", 0}, {"<mask>\u2000", 0}}));
}

TEST(AddedTokens, SpecialTokensCanBeLeftAsText) {
    AddedToken mask = token(0, "<mask>", true, false);
    mask.lstrip = mask.rstrip = mask.single_word = true;
    const AddedTokenMatcher matcher({mask, token(1, "ask>", false, true), token(2, "<pad>", true, false)});
    const std::string text = "hi <mask> there\t<mask>\t<mask>\u2000 <pad> <mask><pad><pad>";
    // Special tokens skipped: the normalized pass still finds "ask>" inside the skipped "<mask>".
    EXPECT_EQ(split(matcher, text, false), (Spans{{"hi <m", -1},
                                                  {"ask>", 1},
                                                  {" there\t<m", -1},
                                                  {"ask>", 1},
                                                  {"\t<m", -1},
                                                  {"ask>", 1},
                                                  {"\u2000 <pad> <m", -1},
                                                  {"ask>", 1},
                                                  {"<pad><pad>", -1}}));
    EXPECT_EQ(split(matcher, text, true), (Spans{{"hi", -1},
                                                 {" <mask> ", 0},
                                                 {"there", -1},
                                                 {"\t<mask>\t", 0},
                                                 {"<mask>\u2000 ", 0},
                                                 {"<pad>", 2},
                                                 {" <mask>", 0},
                                                 {"<pad>", 2},
                                                 {"<pad>", 2}}));
}

TEST(AddedTokens, ParseRejectsMalformedEntries) {
    using nlohmann::json;
    EXPECT_THROW(parse_added_tokens(json::array({{{"id", 1}}})), Error);
    EXPECT_THROW(parse_added_tokens(json::array({{{"id", 1}, {"content", ""}}})), Error);
    EXPECT_THROW(parse_added_tokens(json::array({{{"id", -3}, {"content", "x"}}})), Error);
    EXPECT_THROW(parse_added_tokens(json::array({{{"id", 2000000000}, {"content", "x"}}})), Error);
    EXPECT_THROW(parse_added_tokens(json::array({{{"id", 1}, {"content", "x"}}, {{"id", 1}, {"content", "y"}}})),
                 Error);
    EXPECT_THROW(parse_added_tokens(json::array({{{"id", 1}, {"content", "x"}, {"special", "yes"}}})), Error);
    const auto tokens = parse_added_tokens(json::array({{{"id", 5}, {"content", "<s>"}, {"special", true}}}));
    ASSERT_EQ(tokens.size(), 1u);
    EXPECT_TRUE(tokens[0].special);
    EXPECT_FALSE(tokens[0].normalized);  // HF default: normalized = !special
}

}  // namespace
}  // namespace dsv4::tokenizer
