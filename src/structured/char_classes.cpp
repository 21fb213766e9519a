#include "structured/char_classes.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace dsv4::structured {
namespace {

constexpr char32_t kSurrogateLo = 0xD800;
constexpr char32_t kSurrogateHi = 0xDFFF;

using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

std::string encode(char32_t c) {
    std::string out;
    tokenizer::append_utf8(out, c);
    return out;
}

// Splits [lo, hi] (same encoded length, no surrogates) until every byte position spans a plain range.
void utf8_sequences(char32_t lo, char32_t hi, std::vector<ByteRanges>& out) {
    if (lo > hi) return;
    for (char32_t limit : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}}) {
        if (lo <= limit && hi > limit) {
            utf8_sequences(lo, limit, out);
            utf8_sequences(limit + 1, hi, out);
            return;
        }
    }
    const std::string a = encode(lo);
    for (size_t i = 1; i < a.size(); ++i) {
        const char32_t m = (char32_t{1} << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_sequences(lo, lo | m, out);
                utf8_sequences((lo | m) + 1, hi, out);
                return;
            }
            if ((hi & m) != m) {
                utf8_sequences(lo, (hi & ~m) - 1, out);
                utf8_sequences(hi & ~m, hi, out);
                return;
            }
        }
    }
    const std::string b = encode(hi);
    ByteRanges ranges;
    for (size_t i = 0; i < a.size(); ++i) ranges.emplace_back(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]));
    out.push_back(std::move(ranges));
}

int32_t hex_digit_of(Grammar& grammar, unsigned value) {
    const char* digits = "0123456789abcdef";
    ByteSet set = ByteSet::single(static_cast<uint8_t>(digits[value]));
    if (value >= 10) set.insert(static_cast<uint8_t>(digits[value] - 'a' + 'A'));
    return grammar.bytes(set);
}

ByteSet hex_set(std::string_view lower) {
    ByteSet set;
    for (char ch : lower) {
        set.insert(static_cast<uint8_t>(ch));
        if (ch >= 'a' && ch <= 'f') set.insert(static_cast<uint8_t>(ch - 'a' + 'A'));
    }
    return set;
}

}  // namespace

CodepointSet CodepointSet::range(char32_t lo, char32_t hi) {
    CodepointSet set;
    set.add(lo, hi);
    return set;
}

void CodepointSet::add(char32_t lo, char32_t hi) {
    hi = std::min(hi, kMaxCodepoint);
    if (lo > hi) return;
    if (lo < kSurrogateLo && hi >= kSurrogateLo) {
        ranges_.emplace_back(lo, kSurrogateLo - 1);
        if (hi > kSurrogateHi) ranges_.emplace_back(kSurrogateHi + 1, hi);
    } else if (lo >= kSurrogateLo && lo <= kSurrogateHi) {
        if (hi > kSurrogateHi) ranges_.emplace_back(kSurrogateHi + 1, hi);
    } else {
        ranges_.emplace_back(lo, hi);
    }
    normalize();
}

void CodepointSet::add(const CodepointSet& other) {
    ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
    normalize();
}

void CodepointSet::normalize() {
    std::sort(ranges_.begin(), ranges_.end());
    std::vector<std::pair<char32_t, char32_t>> merged;
    for (const auto& r : ranges_) {
        if (!merged.empty() && r.first <= merged.back().second + 1) {
            merged.back().second = std::max(merged.back().second, r.second);
        } else {
            merged.push_back(r);
        }
    }
    ranges_ = std::move(merged);
}

CodepointSet CodepointSet::complement() const {
    CodepointSet out;
    char32_t next = 0;
    for (const auto& [lo, hi] : ranges_) {
        if (lo > next) out.add(next, lo - 1);
        next = hi + 1;
    }
    if (next <= kMaxCodepoint) out.add(next, kMaxCodepoint);
    return out;
}

CodepointSet CodepointSet::intersect(const CodepointSet& other) const {
    CodepointSet out;
    size_t i = 0;
    size_t j = 0;
    while (i < ranges_.size() && j < other.ranges_.size()) {
        const char32_t lo = std::max(ranges_[i].first, other.ranges_[j].first);
        const char32_t hi = std::min(ranges_[i].second, other.ranges_[j].second);
        if (lo <= hi) out.ranges_.emplace_back(lo, hi);
        if (ranges_[i].second < other.ranges_[j].second) {
            ++i;
        } else {
            ++j;
        }
    }
    return out;
}

bool CodepointSet::contains(char32_t c) const {
    auto it =
        std::upper_bound(ranges_.begin(), ranges_.end(), std::make_pair(c, static_cast<char32_t>(kMaxCodepoint + 1)));
    if (it == ranges_.begin()) return false;
    --it;
    return c >= it->first && c <= it->second;
}

int32_t utf8_chars(Grammar& grammar, const CodepointSet& set) {
    std::vector<ByteRanges> sequences;
    for (const auto& [lo, hi] : set.ranges()) utf8_sequences(lo, hi, sequences);
    if (sequences.empty()) return grammar.bytes(ByteSet{});
    std::vector<int32_t> alternatives;
    for (const ByteRanges& sequence : sequences) {
        std::vector<int32_t> parts;
        for (const auto& [lo, hi] : sequence) parts.push_back(grammar.bytes(ByteSet::range(lo, hi)));
        alternatives.push_back(grammar.seq(std::move(parts)));
    }
    return grammar.alt(std::move(alternatives));
}

int32_t json_string_chars(Grammar& grammar, const CodepointSet& set) {
    CodepointSet raw = set.intersect(CodepointSet::range(0x20, kMaxCodepoint));
    CodepointSet specials;
    specials.add(U'"', U'"');
    specials.add(U'\\', U'\\');
    raw = raw.intersect(specials.complement());
    std::vector<int32_t> alternatives;
    if (!raw.empty()) alternatives.push_back(utf8_chars(grammar, raw));
    if (set.contains(U'"')) alternatives.push_back(grammar.literal("\\\""));
    if (set.contains(U'\\')) alternatives.push_back(grammar.literal("\\\\"));
    if (set.contains(U'/')) alternatives.push_back(grammar.literal("\\/"));
    const std::pair<char32_t, const char*> short_escapes[] = {
        {0x08, "\\b"}, {0x09, "\\t"}, {0x0A, "\\n"}, {0x0C, "\\f"}, {0x0D, "\\r"}};
    for (const auto& [c, text] : short_escapes) {
        if (set.contains(c)) alternatives.push_back(grammar.literal(text));
    }
    for (char32_t c = 0; c < 0x20; ++c) {
        if (!set.contains(c)) continue;
        alternatives.push_back(
            grammar.seq({grammar.literal("\\u00"), hex_digit_of(grammar, c >> 4), hex_digit_of(grammar, c & 0xF)}));
    }
    if (alternatives.empty()) return grammar.bytes(ByteSet{});
    return grammar.alt(std::move(alternatives));
}

int32_t json_string_any_char(Grammar& grammar, const CodepointSet& raw_excluded) {
    CodepointSet raw = CodepointSet::range(0x20, kMaxCodepoint);
    CodepointSet specials = raw_excluded;
    specials.add(U'"', U'"');
    specials.add(U'\\', U'\\');
    raw = raw.intersect(specials.complement());
    const int32_t hex = grammar.bytes(hex_set("0123456789abcdef"));
    // \uXXXX of a non-surrogate, or a high surrogate escape followed by a low one.
    const int32_t non_surrogate =
        grammar.alt({grammar.seq({grammar.bytes(hex_set("0123456789abcef")), hex, hex, hex}),
                     grammar.seq({grammar.bytes(hex_set("d")), grammar.bytes(hex_set("01234567")), hex, hex})});
    const int32_t pair =
        grammar.seq({grammar.bytes(hex_set("d")), grammar.bytes(hex_set("89ab")), hex, hex, grammar.literal("\\u"),
                     grammar.bytes(hex_set("d")), grammar.bytes(hex_set("cdef")), hex, hex});
    ByteSet simple_escapes;
    for (char ch : std::string_view("\"\\/bfnrt")) simple_escapes.insert(static_cast<uint8_t>(ch));
    const int32_t escape = grammar.seq(
        {grammar.byte('\\'), grammar.alt({grammar.bytes(simple_escapes),
                                          grammar.seq({grammar.byte('u'), grammar.alt({non_surrogate, pair})})})});
    return grammar.alt({utf8_chars(grammar, raw), escape});
}

}  // namespace dsv4::structured
