#include "loader/text_util.h"

#include <fmt/format.h>

namespace dsv4 {
namespace {

void append_escaped(std::string& out, char c) {
    switch (c) {
        case '\n':
            out += "\\n";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\r':
            out += "\\r";
            break;
        default:
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
                out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
            } else {
                out += c;
            }
    }
}

}  // namespace

std::string truncated(std::string_view text, size_t max_chars) {
    std::string out;
    size_t n = std::min(text.size(), max_chars);
    out.reserve(n + 3);
    for (size_t i = 0; i < n; ++i) append_escaped(out, text[i]);
    if (text.size() > max_chars) out += "...";
    return out;
}

std::string quote_name(std::string_view name, size_t max_chars) {
    // Appends, not an operator+ chain: GCC 12 at -O3 reports a bogus -Wrestrict on those.
    std::string out = "'";
    out += truncated(name, max_chars);
    out += '\'';
    return out;
}

std::string format_shape(std::span<const int64_t> shape) {
    return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace dsv4
