// StreamingDetokenizer: pushes concatenate to decode(all), no partial UTF-8 is ever emitted, special tokens are
// skipped or kept on request.
#include "tokenizer/detokenizer.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace dsv4::tokenizer {
namespace {

std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
    StreamingDetokenizer detok(tok, skip_special);
    std::string out;
    for (int32_t id : ids) {
        const std::string piece = detok.push(id);
        EXPECT_EQ(find_invalid_utf8(piece), std::nullopt) << "push emitted partial or invalid UTF-8";
        out += piece;
    }
    out += detok.flush();
    EXPECT_FALSE(detok.has_pending());
    return out;
}

TEST(StreamingDetokenizer, EqualsDecodeForRandomIds) {
    const Tokenizer* tok = testing::deepseek_v3();
    DSV4_REQUIRE_TOKENIZER(tok, DSV4_V3_TOKENIZER_JSON);
    // Byte tokens that split multibyte characters, plus random ids across the whole range (unknown ids too).
    std::vector<int32_t> byte_ids;
    for (int b = 0x80; b < 0x100; ++b)
        byte_ids.push_back(*tok->token_to_id(byte_level_encode(std::string(1, static_cast<char>(b)))));
    std::mt19937 rng(3);
    for (int round = 0; round < 600; ++round) {
        std::vector<int32_t> ids;
        for (int i = std::uniform_int_distribution<int>(0, 40)(rng); i > 0; --i) {
            const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
            if (kind == 0)
                ids.push_back(byte_ids[std::uniform_int_distribution<size_t>(0, byte_ids.size() - 1)(rng)]);
            else if (kind == 1)
                ids.push_back(std::uniform_int_distribution<int32_t>(0, 128000)(rng));
            else if (kind == 2)
                ids.push_back(std::uniform_int_distribution<int32_t>(127990, 129300)(rng));
            else
                ids.push_back(std::uniform_int_distribution<int32_t>(-2, 300)(rng));
        }
        for (bool skip : {false, true}) ASSERT_EQ(stream_all(*tok, ids, skip), tok->decode(ids, skip)) << round;
    }
}

TEST(StreamingDetokenizer, HoldsSplitCharactersUntilComplete) {
    const Tokenizer* tok = testing::deepseek_v3();
    DSV4_REQUIRE_TOKENIZER(tok, DSV4_V3_TOKENIZER_JSON);
    const std::string text = "a🙂b 中文 é";
    // Encode every byte as its own token, the worst case for a streaming decoder.
    std::vector<int32_t> ids;
    for (char c : text) {
        const std::optional<int32_t> id = tok->token_to_id(byte_level_encode(std::string(1, c)));
        ASSERT_TRUE(id.has_value()) << "no byte token for " << static_cast<int>(static_cast<unsigned char>(c));
        ids.push_back(*id);
    }
    StreamingDetokenizer detok(*tok, true);
    std::vector<std::string> outputs(ids.size());  // (sized up front: GCC 12 -O3 misreads push_back's growth)
    for (size_t i = 0; i < ids.size(); ++i) outputs[i] = detok.push(ids[i]);
    EXPECT_EQ(outputs[0], "a");
    EXPECT_EQ(outputs[1], "");  // first byte of 🙂
    EXPECT_EQ(outputs[3], "");
    EXPECT_EQ(outputs[4], "🙂");
    EXPECT_EQ(detok.flush(), "");
    std::string joined;
    for (const auto& s : outputs) joined += s;
    EXPECT_EQ(joined, text);
}

TEST(StreamingDetokenizer, InvalidBytesBecomeReplacementCharacters) {
    const Tokenizer* tok = testing::deepseek_v3();
    DSV4_REQUIRE_TOKENIZER(tok, DSV4_V3_TOKENIZER_JSON);
    auto byte_id = [&](uint8_t b) {
        return *tok->token_to_id(byte_level_encode(std::string(1, static_cast<char>(b))));
    };
    // F0 9F then 'x': the valid prefix F0 9F is one U+FFFD, emitted once 'x' shows it cannot complete.
    StreamingDetokenizer detok(*tok, false);
    EXPECT_EQ(detok.push(byte_id(0xF0)), "");
    EXPECT_EQ(detok.push(byte_id(0x9F)), "");
    EXPECT_EQ(detok.push(byte_id('x')), std::string(kReplacementCharacter) + "x");
    // A truncated tail at the end becomes one U+FFFD at flush.
    EXPECT_EQ(detok.push(byte_id(0xE4)), "");
    EXPECT_EQ(detok.flush(), std::string(kReplacementCharacter));
    EXPECT_EQ(tok->decode(std::vector<int32_t>{byte_id(0xE4)}, false), std::string(kReplacementCharacter));
}

TEST(StreamingDetokenizer, SpecialTokensSkippedOrKept) {
    const Tokenizer* tok = testing::deepseek_v3();
    DSV4_REQUIRE_TOKENIZER(tok, DSV4_V3_TOKENIZER_JSON);
    const std::vector<int32_t> ids = tok->encode("<｜begin▁of▁sentence｜>hi<｜User｜>there<｜end▁of▁sentence｜>");
    ASSERT_EQ(ids.front(), 0);
    ASSERT_EQ(ids.back(), 1);
    EXPECT_EQ(stream_all(*tok, ids, true), "hi<｜User｜>there");  // <｜User｜> is special=false in V3
    EXPECT_EQ(stream_all(*tok, ids, false), "<｜begin▁of▁sentence｜>hi<｜User｜>there<｜end▁of▁sentence｜>");
}

}  // namespace
}  // namespace dsv4::tokenizer
