// Hexadecimal escapes (\xHH, \uHHHH, \UHHHHHHHH) as the GBNF and regex front ends read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dsv4::structured {

// The value of the `count` hexadecimal digits at text[pos], or -1 when fewer than `count` of them are there.
inline int64_t hex_digits_value(std::string_view text, size_t pos, size_t count) {
    int64_t value = 0;
    for (size_t i = 0; i < count; ++i) {
        if (pos + i >= text.size()) return -1;
        const char c = text[pos + i];
        int digit = -1;
        if (c >= '0' && c <= '9') digit = c - '0';
        if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
        if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
        if (digit < 0) return -1;
        value = value * 16 + digit;
    }
    return value;
}

}  // namespace dsv4::structured
