#include "tokenizer/pretokenizer_deepseek.h"

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_categories.h"

namespace dsv4::tokenizer {
namespace {

// The patterns exactly as DeepSeek's tokenizer.json spells them (CR and LF appear as raw characters).
constexpr std::string_view kDigitsPattern = R"(\p{N}{1,3})";
constexpr std::string_view kCjkPattern = "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+";
constexpr std::string_view kMainPattern = R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^)"
                                          "\r\n"
                                          R"(\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[)"
                                          "\r\n"
                                          R"(]*|\s*[)"
                                          "\r\n"
                                          R"(]+|\s+(?!\S)|\s+)";

// A decoded character of the piece being scanned.
struct Char {
    char32_t code;
    size_t length;
    uint8_t classes;
};

// `table` is char_class_table(): every code point below U+110000 has an entry.
inline Char char_at(const uint8_t* table, std::string_view text, size_t pos) {
    const auto byte = static_cast<uint8_t>(text[pos]);
    if (byte < 0x80) return {byte, 1, table[byte]};
    int length = 0;
    const char32_t code = decode_utf8_at(text, pos, length);
    return {code, static_cast<size_t>(length), table[code]};
}

// Byte length of the UTF-8 sequence a (valid) lead byte starts.
inline size_t sequence_length(uint8_t lead) {
    return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// Shared scan loop: `match_at(text, pos)` returns the byte length of the match that starts at pos (0: none);
// matches are searched leftmost-first like a regex find_iter, and gaps become non-matching segments.
template <typename MatchAt>
void scan(const uint8_t* table, std::string_view text, std::vector<Segment>& out, MatchAt match_at) {
    size_t pos = 0;
    size_t gap_start = 0;
    while (pos < text.size()) {
        const size_t length = match_at(table, text, pos);
        if (length == 0) {
            pos += sequence_length(static_cast<uint8_t>(text[pos]));
            continue;
        }
        if (gap_start < pos) out.push_back({gap_start, pos, false});
        out.push_back({pos, pos + length, true});
        pos += length;
        gap_start = pos;
    }
    if (gap_start < text.size()) out.push_back({gap_start, text.size(), false});
}

// End of the run of characters starting at `pos` whose classes intersect `mask`.
size_t run_end(const uint8_t* table, std::string_view text, size_t pos, uint8_t mask) {
    while (pos < text.size()) {
        const Char c = char_at(table, text, pos);
        if ((c.classes & mask) == 0) break;
        pos += c.length;
    }
    return pos;
}

bool is_newline(char32_t c) {
    return c == '\r' || c == '\n';
}
bool is_ascii_letter(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
bool is_ascii_punct(char32_t c) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

// \p{N}{1,3}
size_t match_digits(const uint8_t* table, std::string_view text, size_t pos) {
    const auto lead = static_cast<uint8_t>(text[pos]);
    if (lead < 0x80 && (lead < '0' || lead > '9')) return 0;  // the only ASCII numbers are the digits
    size_t end = pos;
    for (int count = 0; count < 3 && end < text.size(); ++count) {
        const Char c = char_at(table, text, end);
        if ((c.classes & kClassNumber) == 0) break;
        end += c.length;
    }
    return end - pos;
}

bool is_cjk_or_kana(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x309F) || (c >= 0x30A0 && c <= 0x30FF);
}

// [一-龥぀-ゟ゠-ヿ]+
size_t match_cjk(const uint8_t* table, std::string_view text, size_t pos) {
    size_t end = pos;
    while (end < text.size()) {
        const auto byte = static_cast<uint8_t>(text[end]);
        if (byte < 0xE3 || byte > 0xE9) break;  // every code point of the class is 3 bytes, E3..E9 lead
        const Char c = char_at(table, text, end);
        if (!is_cjk_or_kana(c.code)) break;
        end += c.length;
    }
    return end - pos;
}

// The whitespace alternatives \s*[\r\n]+ | \s+(?!\S) | \s+, at a position holding whitespace.
size_t match_whitespace(const uint8_t* table, std::string_view text, size_t pos) {
    size_t end = pos;
    size_t last_newline_end = 0;  // end of the last CR/LF in the run (0: none)
    size_t last_char_start = pos;
    int count = 0;
    while (end < text.size()) {
        const Char c = char_at(table, text, end);
        if ((c.classes & kClassSpace) == 0) break;
        last_char_start = end;
        end += c.length;
        ++count;
        if (is_newline(c.code)) last_newline_end = end;
    }
    if (last_newline_end != 0) return last_newline_end - pos;  // \s*[\r\n]+ backtracks to the last newline
    if (end == text.size()) return end - pos;                  // \s+(?!\S) at the end of the piece
    if (count >= 2) return last_char_start - pos;              // \s+(?!\S) gives one character back
    return end - pos;                                          // \s+
}

// The main DeepSeek alternation, tried in order at `pos` (leftmost-first, like Oniguruma).
size_t match_main(const uint8_t* table, std::string_view text, size_t pos) {
    const Char c0 = char_at(table, text, pos);
    const size_t next = pos + c0.length;
    // [ASCII punctuation][A-Za-z]+
    if (is_ascii_punct(c0.code) && next < text.size() && is_ascii_letter(text[next])) {
        size_t end = next + 1;
        while (end < text.size() && is_ascii_letter(text[end])) ++end;
        return end - pos;
    }
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    constexpr uint8_t kLetterOrMark = kClassLetter | kClassMark;
    const bool optional_ok =
        !is_newline(c0.code) && (c0.classes & (kClassLetter | kClassPunctuation | kClassSymbol)) == 0;
    if (optional_ok) {
        const size_t end = run_end(table, text, next, kLetterOrMark);
        if (end > next) return end - pos;
    }
    if (c0.classes & kLetterOrMark) return run_end(table, text, pos, kLetterOrMark) - pos;
    // ' '?[\p{P}\p{S}]+[\r\n]*
    constexpr uint8_t kPunctOrSymbol = kClassPunctuation | kClassSymbol;
    const size_t symbols_from = c0.code == ' ' ? next : pos;
    const size_t symbols_end = run_end(table, text, symbols_from, kPunctOrSymbol);
    if (symbols_end > symbols_from) {
        size_t end = symbols_end;
        while (end < text.size() && is_newline(static_cast<unsigned char>(text[end]))) ++end;
        return end - pos;
    }
    if (c0.classes & kClassSpace) return match_whitespace(table, text, pos);
    return 0;
}

template <size_t (*kMatchAt)(const uint8_t*, std::string_view, size_t)>
class FastFinder final : public SegmentFinder {
  public:
    void find_segments(std::string_view piece, std::vector<Segment>& out) const override {
        scan(table_, piece, out, kMatchAt);
    }

  private:
    const uint8_t* table_ = char_class_table();
};

}  // namespace

std::unique_ptr<SegmentFinder> make_deepseek_fast_finder(std::string_view pattern) {
    if (pattern == kDigitsPattern) return std::make_unique<FastFinder<match_digits>>();
    if (pattern == kCjkPattern) return std::make_unique<FastFinder<match_cjk>>();
    if (pattern == kMainPattern) return std::make_unique<FastFinder<match_main>>();
    return nullptr;
}

}  // namespace dsv4::tokenizer
