// UTF-8 validation, lossy conversion (Rust from_utf8_lossy semantics) and its streaming form.
#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode_categories.h"

namespace dsv4::tokenizer {
namespace {

const std::string kFffd(kReplacementCharacter);

TEST(Utf8, FindsFirstInvalidByte) {
    EXPECT_EQ(find_invalid_utf8("plain ascii"), std::nullopt);
    EXPECT_EQ(find_invalid_utf8("h\xC3\xA9llo \xF0\x9F\x99\x82"), std::nullopt);  // héllo 🙂
    EXPECT_EQ(find_invalid_utf8("ab\xC3"), 2u);                                   // truncated
    EXPECT_EQ(find_invalid_utf8("a\xC0\x80"), 1u);                                // overlong lead
    EXPECT_EQ(find_invalid_utf8("\xED\xA0\x80"), 0u);                             // surrogate
    EXPECT_EQ(find_invalid_utf8("x\xF4\x90\x80\x80"), 1u);                        // above U+10FFFF
    EXPECT_EQ(find_invalid_utf8("\x80"), 0u);                                     // lone continuation
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
    EXPECT_EQ(utf8_lossy("ok"), "ok");
    // A truncated 4-byte sequence is one maximal subpart: one U+FFFD.
    EXPECT_EQ(utf8_lossy("a\xF0\x9F\x99"), "a" + kFffd);
    // E0 80: 80 is not allowed after E0, so E0 and 80 are replaced separately.
    EXPECT_EQ(utf8_lossy("\xE0\x80"), kFffd + kFffd);
    // A valid prefix broken by an ASCII byte: the prefix becomes one U+FFFD and the ASCII survives.
    EXPECT_EQ(utf8_lossy("\xE2\x82(x"), kFffd + "(x");
    EXPECT_EQ(utf8_lossy("\xFF\xFE"), kFffd + kFffd);
    EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogates: each byte
}

TEST(Utf8, StreamingEqualsOneShotForEverySplit) {
    std::mt19937 rng(7);
    const std::string pieces[] = {"a",    "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x99\x82", "\x80",
                                  "\xFF", "\xE0\x80", "\xF0\x9F",     "\xED\xA0\x80",     "\xC3",
                                  "\n"};
    for (int round = 0; round < 2000; ++round) {
        std::string bytes;
        for (int i = std::uniform_int_distribution<int>(0, 12)(rng); i > 0; --i)
            bytes += pieces[std::uniform_int_distribution<size_t>(0, std::size(pieces) - 1)(rng)];
        // Split into random chunks.
        Utf8Sanitizer sanitizer;
        std::string streamed;
        size_t pos = 0;
        while (pos < bytes.size()) {
            const size_t take = std::uniform_int_distribution<size_t>(0, bytes.size() - pos)(rng);
            std::string chunk_out;
            sanitizer.push(std::string_view(bytes).substr(pos, take), chunk_out);
            EXPECT_EQ(find_invalid_utf8(chunk_out), std::nullopt) << "partial UTF-8 emitted";
            streamed += chunk_out;
            pos += take;
        }
        sanitizer.finish(streamed);
        ASSERT_EQ(streamed, utf8_lossy(bytes)) << "round " << round;
    }
}

TEST(Utf8, EncodesAndDecodesCodePoints) {
    for (char32_t c : {char32_t{0x24}, char32_t{0xE9}, char32_t{0x4E2D}, char32_t{0x1F642}, char32_t{0x10FFFF}}) {
        std::string s;
        append_utf8(s, c);
        int length = 0;
        EXPECT_EQ(decode_utf8_at(s, 0, length), c);
        EXPECT_EQ(static_cast<size_t>(length), s.size());
        EXPECT_EQ(find_invalid_utf8(s), std::nullopt);
    }
}

TEST(ByteLevel, AlphabetIsABijectionWithKnownPoints) {
    std::set<char32_t> seen;
    for (int b = 0; b < 256; ++b) {
        const char32_t c = byte_to_char(static_cast<uint8_t>(b));
        EXPECT_TRUE(seen.insert(c).second);
        EXPECT_EQ(char_to_byte(c), static_cast<uint8_t>(b));
    }
    EXPECT_EQ(byte_to_char(' '), U'\u0120');   // Ġ
    EXPECT_EQ(byte_to_char('\n'), U'\u010A');  // Ċ
    EXPECT_EQ(byte_to_char('a'), U'a');
    EXPECT_EQ(byte_to_char(0xAD), U'\u0143');  // the last remapped byte
    EXPECT_EQ(char_to_byte(U'\uFF5C'), std::nullopt);
}

TEST(ByteLevel, DecodeFallsBackToRawContentOutsideTheAlphabet) {
    EXPECT_EQ(byte_level_decode("\xC4\xA0world"), " world");  // "Ġworld"
    EXPECT_EQ(byte_level_encode(" world\n"), "\xC4\xA0world\xC4\x8A");
    // "<｜User｜>" contains U+FF5C, which is not in the alphabet: the token decodes to its own bytes.
    EXPECT_EQ(byte_level_decode("<\xEF\xBD\x9CUser\xEF\xBD\x9C>"), "<\xEF\xBD\x9CUser\xEF\xBD\x9C>");
}

TEST(UnicodeCategories, MatchOniguruma) {
    EXPECT_EQ(char_classes(U'a'), kClassLetter | kClassWord);
    EXPECT_TRUE(char_classes(U'\u4E2D') & kClassLetter);
    EXPECT_TRUE(char_classes(U'7') & kClassNumber);
    EXPECT_TRUE(char_classes(U'\u0663') & kClassNumber);  // Arabic-Indic three
    EXPECT_TRUE(char_classes(U'\u00BD') & kClassNumber);  // ½ is No
    EXPECT_TRUE(char_classes(U'\u0301') & kClassMark);
    EXPECT_TRUE(char_classes(U',') & kClassPunctuation);
    EXPECT_TRUE(char_classes(U'$') & kClassSymbol);
    EXPECT_TRUE(char_classes(U'\U0001F642') & kClassSymbol);
    for (char32_t c : {U'\t', U'\n', U'\v', U'\f', U'\r', U' ', U'\u0085', U'\u00A0', U'\u1680', U'\u2000', U'\u200A',
                       U'\u2028', U'\u2029', U'\u202F', U'\u205F', U'\u3000'})
        EXPECT_TRUE(char_classes(c) & kClassSpace) << static_cast<uint32_t>(c);
    for (char32_t c : {U'\u180E', U'\u200B', U'\uFEFF', U'x'})
        EXPECT_FALSE(char_classes(c) & kClassSpace) << static_cast<uint32_t>(c);
    EXPECT_EQ(char_classes(0x110000), 0);
}

}  // namespace
}  // namespace dsv4::tokenizer
