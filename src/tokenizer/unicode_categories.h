// Unicode character classes as Oniguruma defines them (so hand-written matchers agree with the regex engine,
// including its Unicode version): general categories L, M, N, P, S, plus \s (White_Space) and \w (word).
#pragma once

#include <cstdint>

namespace dsv4::tokenizer {

enum CharClass : uint8_t {
    kClassLetter = 1 << 0,       // \p{L}
    kClassMark = 1 << 1,         // \p{M}
    kClassNumber = 1 << 2,       // \p{N}
    kClassPunctuation = 1 << 3,  // \p{P}
    kClassSymbol = 1 << 4,       // \p{S}
    kClassSpace = 1 << 5,        // \s: Unicode White_Space (includes U+0085, excludes U+180E and U+FEFF)
    kClassWord = 1 << 6,         // \w
};

// The CharClass bits of every code point below U+110000, built once (thread-safely) on first use.
const uint8_t* char_class_table();

// The CharClass bits of a code point (0 above U+10FFFF).
inline uint8_t char_classes(char32_t code_point) {
    static const uint8_t* const table = char_class_table();
    return code_point < 0x110000 ? table[code_point] : 0;
}

}  // namespace dsv4::tokenizer
