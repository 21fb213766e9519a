// Pre-tokenization: Split behaviours and invert, ByteLevel's GPT-2 regex and prefix space, rejection of
// unsupported configurations, and the hand-written DeepSeek matchers against Oniguruma.
#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "tokenizer/pretokenizer_deepseek.h"
#include "tokenizer/unicode.h"

namespace dsv4::tokenizer {
namespace {

using nlohmann::json;
using Pieces = std::vector<std::string>;

const json kByteLevelPlain = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};

json split_step(json pattern, const char* behavior, bool invert = false) {
    return {{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", invert}};
}

Pieces pre_tokenize(const json& config, std::string_view text, bool fast = true) {
    const PreTokenizer pre = PreTokenizer::from_json(config, fast);
    std::vector<std::string_view> pieces;
    std::deque<std::string> storage;
    pre.split(text, pieces, storage);
    return Pieces(pieces.begin(), pieces.end());
}

Pieces with_split(const json& step, std::string_view text) {
    return pre_tokenize({{"type", "Sequence"}, {"pretokenizers", {step, kByteLevelPlain}}}, text);
}

TEST(PreTokenizer, SplitBehaviours) {
    const json dash = {{"String", "-"}};
    const std::string text = "The-final--countdown";
    EXPECT_EQ(with_split(split_step(dash, "Removed"), text), (Pieces{"The", "final", "countdown"}));
    EXPECT_EQ(with_split(split_step(dash, "Isolated"), text), (Pieces{"The", "-", "final", "-", "-", "countdown"}));
    EXPECT_EQ(with_split(split_step(dash, "MergedWithPrevious"), text), (Pieces{"The-", "final-", "-", "countdown"}));
    EXPECT_EQ(with_split(split_step(dash, "MergedWithNext"), text), (Pieces{"The", "-final", "-", "-countdown"}));
    EXPECT_EQ(with_split(split_step(dash, "Contiguous"), text), (Pieces{"The", "-", "final", "--", "countdown"}));
    // invert flips which segments count as matches: Removed then drops what the pattern did not match.
    EXPECT_EQ(with_split(split_step({{"Regex", "[a-z]+"}}, "Removed", true), "ab12cd3"), (Pieces{"ab", "cd"}));
    EXPECT_EQ(with_split(split_step({{"Regex", "[a-z]+"}}, "Removed", false), "ab12cd3"), (Pieces{"12", "3"}));
    // A literal with regex metacharacters is matched literally.
    EXPECT_EQ(with_split(split_step({{"String", ".*"}}, "Isolated"), "a.*b.c"), (Pieces{"a", ".*", "b.c"}));
}

TEST(PreTokenizer, ByteLevelRegexAndPrefixSpace) {
    const json gpt2 = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
    EXPECT_EQ(pre_tokenize(gpt2, "Hello my friend, how is your day going?"),
              (Pieces{"Hello", " my", " friend", ",", " how", " is", " your", " day", " going", "?"}));
    EXPECT_EQ(pre_tokenize(gpt2, "Hello there       dear"), (Pieces{"Hello", " there", "      ", " dear"}));
    EXPECT_EQ(pre_tokenize(gpt2, "I'm 12 years"), (Pieces{"I", "'m", " 12", " years"}));
    const json prefixed = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
    EXPECT_EQ(pre_tokenize(prefixed, "Hello world"), (Pieces{" Hello", " world"}));
    EXPECT_EQ(pre_tokenize(prefixed, " Hello"), (Pieces{" Hello"}));
    EXPECT_EQ(pre_tokenize(kByteLevelPlain, "no split at all"), (Pieces{"no split at all"}));
    EXPECT_EQ(pre_tokenize(kByteLevelPlain, ""), Pieces{});
}

TEST(PreTokenizer, RejectsUnsupportedConfigurations) {
    auto rejects = [](const json& config) { EXPECT_THROW(PreTokenizer::from_json(config), Error) << config.dump(); };
    rejects(nullptr);
    rejects({{"type", "Whitespace"}});
    rejects({{"type", "Sequence"}, {"pretokenizers", {split_step({{"Regex", "a"}}, "Isolated")}}});  // no ByteLevel
    rejects({{"type", "Sequence"}, {"pretokenizers", {kByteLevelPlain, split_step({{"Regex", "a"}}, "Isolated")}}});
    rejects({{"type", "Sequence"}, {"pretokenizers", {split_step({{"Regex", "a"}}, "Sideways"), kByteLevelPlain}}});
    rejects(
        {{"type", "Sequence"}, {"pretokenizers", {split_step({{"Regex", "(unclosed"}}, "Isolated"), kByteLevelPlain}}});
    rejects({{"type", "Sequence"}, {"pretokenizers", {split_step({{"Glob", "*"}}, "Isolated"), kByteLevelPlain}}});
}

// The three Split patterns of DeepSeek's tokenizer.json, as written there (CR and LF are raw characters).
const char* const kDeepSeekPatterns[] = {R"(\p{N}{1,3})", "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
                                         R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^)"
                                         "\r\n"
                                         R"(\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[)"
                                         "\r\n"
                                         R"(]*|\s*[)"
                                         "\r\n"
                                         R"(]+|\s+(?!\S)|\s+)"};

std::vector<Segment> segments_of(const SegmentFinder& finder, std::string_view text) {
    std::vector<Segment> out;
    finder.find_segments(text, out);
    return out;
}

void expect_same_segments(const SegmentFinder& fast, const SegmentFinder& regex, const std::string& text) {
    const auto a = segments_of(fast, text);
    const auto b = segments_of(regex, text);
    ASSERT_EQ(a.size(), b.size()) << "text: " << nlohmann::json(text).dump();
    for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_TRUE(a[i].begin == b[i].begin && a[i].end == b[i].end && a[i].is_match == b[i].is_match)
            << "segment " << i << " differs for " << nlohmann::json(text).dump() << ": fast [" << a[i].begin << ","
            << a[i].end << ") vs oniguruma [" << b[i].begin << "," << b[i].end << ")";
    }
}

TEST(DeepSeekFastPath, RecognisesExactlyTheDeepSeekPatterns) {
    for (const char* pattern : kDeepSeekPatterns) EXPECT_NE(make_deepseek_fast_finder(pattern), nullptr) << pattern;
    EXPECT_EQ(make_deepseek_fast_finder(R"(\p{N}{1,4})"), nullptr);
    EXPECT_EQ(make_deepseek_fast_finder(""), nullptr);
}

TEST(DeepSeekFastPath, MatchesOnigurumaOnRandomText) {
    // Characters chosen to exercise every alternative and class boundary, including the ones the JS reference
    // cannot check (U+0085, U+FEFF, U+180E).
    const std::vector<char32_t> pool = {
        U'a',   U'Z',    U'q',    U'\'',  U'.',   U'-',    U'_',    U'(',    U'"',    U'#',   U'~',     U'$',   U'+',
        U'<',   U'0',    U'7',    U' ',   U' ',   U'\t',   U'\n',   U'\r',   U'\v',   U'\f',  0x85,     0xA0,   0x1680,
        0x2000, 0x200A,  0x2028,  0x2029, 0x202F, 0x205F,  0x3000,  0x180E,  0x200B,  0xFEFF, 0x00,     0x01,   0x7F,
        0x9F,   0xE9,    0xDF,    0x301,  0x0308, 0x20DD,  0x0663,  0x06F5,  0xFF11,  0x00B2, 0x00BD,   0x2167, 0x4DFF,
        0x4E00, 0x6587,  0x9FA5,  0x9FA6, 0x303F, 0x3040,  0x3042,  0x309F,  0x30A0,  0x30A2, 0x30FF,   0x3100, 0xAC00,
        0x0627, 0x064E,  0x05D0,  0x0915, 0x093F, 0x0E01,  0x0E31,  0x00AB,  0x2014,  0x2026, 0x3001,   0x20AC, 0x00A9,
        0x2211, 0x1F642, 0x1F3FD, 0x200D, 0xFE0F, 0x1F1FA, 0x20000, 0x1D400, 0x1D7CE, 0xE000, 0x10FFFD, 0xE0041};
    std::mt19937 rng(2026);
    for (const char* pattern : kDeepSeekPatterns) {
        const auto fast = make_deepseek_fast_finder(pattern);
        const auto regex = make_regex_finder(pattern);
        for (int round = 0; round < 4000; ++round) {
            std::string text;
            for (int n = std::uniform_int_distribution<int>(1, 30)(rng); n > 0; --n)
                append_utf8(text, pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)]);
            expect_same_segments(*fast, *regex, text);
            if (::testing::Test::HasFatalFailure()) return;
        }
    }
}

TEST(DeepSeekFastPath, MatchesOnigurumaOnEveryCodePoint) {
    // Every scalar value, in contexts that reach each alternative: after a letter, a space, punctuation, a
    // newline, doubled, and before letters.
    for (const char* pattern : kDeepSeekPatterns) {
        const auto fast = make_deepseek_fast_finder(pattern);
        const auto regex = make_regex_finder(pattern);
        for (char32_t block = 0; block < 0x110000; block += 2048) {
            std::string text;
            for (char32_t c = block; c < block + 2048; ++c) {
                if (c >= 0xD800 && c <= 0xDFFF) continue;
                text += "a";
                append_utf8(text, c);
                text += " ";
                append_utf8(text, c);
                append_utf8(text, c);
                text += "\n.";
                append_utf8(text, c);
                text += "x ";
            }
            expect_same_segments(*fast, *regex, text);
            if (::testing::Test::HasFatalFailure()) return;
        }
    }
}

}  // namespace
}  // namespace dsv4::tokenizer
