#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode.h"

namespace dsv4::tokenizer {
namespace {

bool is_self_mapped(int byte) {
    return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

struct Alphabet {
    std::array<char32_t, 256> to_char{};
    // Alphabet characters all lie below U+0144; this table inverts them (-1: not in the alphabet).
    std::array<int16_t, 0x144> to_byte{};

    Alphabet() {
        to_byte.fill(-1);
        char32_t next_extra = 0x100;
        for (int byte = 0; byte < 256; ++byte) {
            const char32_t c = is_self_mapped(byte) ? static_cast<char32_t>(byte) : next_extra++;
            to_char[static_cast<size_t>(byte)] = c;
            to_byte[c] = static_cast<int16_t>(byte);
        }
    }
};

const Alphabet& alphabet() {
    static const Alphabet instance;
    return instance;
}

}  // namespace

char32_t byte_to_char(uint8_t byte) {
    return alphabet().to_char[byte];
}

std::optional<uint8_t> char_to_byte(char32_t code_point) {
    if (code_point >= alphabet().to_byte.size()) return std::nullopt;
    const int16_t byte = alphabet().to_byte[code_point];
    if (byte < 0) return std::nullopt;
    return static_cast<uint8_t>(byte);
}

std::string byte_level_encode(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char b : bytes) append_utf8(out, byte_to_char(static_cast<uint8_t>(b)));
    return out;
}

std::string byte_level_decode(std::string_view token) {
    std::string out;
    out.reserve(token.size());
    size_t pos = 0;
    while (pos < token.size()) {
        int length = 0;
        const char32_t c = decode_utf8_at(token, pos, length);
        const std::optional<uint8_t> byte = char_to_byte(c);
        if (!byte) return std::string(token);
        out.push_back(static_cast<char>(*byte));
        pos += static_cast<size_t>(length);
    }
    return out;
}

}  // namespace dsv4::tokenizer
