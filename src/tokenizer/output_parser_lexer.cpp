#include "tokenizer/output_parser_lexer.h"

#include <array>

#include "tokenizer/chat_tokens.h"

namespace dsv4::output_parser_detail {
namespace {

namespace ct = chat_tokens;

constexpr std::string_view kDsmlOpenPrefix = "<｜DSML｜";
constexpr std::string_view kDsmlClosePrefix = "</｜DSML｜";
constexpr std::string_view kSpecialClose = "｜>";

enum class Prefix : std::uint8_t { kNo, kPartial, kFull };

// Whether text starts with literal (kFull) or is a proper prefix of it (kPartial).
Prefix prefix_state(std::string_view text, std::string_view literal) {
    if (text.size() >= literal.size()) return text.starts_with(literal) ? Prefix::kFull : Prefix::kNo;
    return literal.starts_with(text) ? Prefix::kPartial : Prefix::kNo;
}

MatchResult text_result() {
    return {MatchStatus::kText, {}};
}
MatchResult need_more_or_text(bool at_end) {
    return {at_end ? MatchStatus::kText : MatchStatus::kNeedMore, {}};
}

MatchResult marker_result(MarkerKind kind, std::size_t length) {
    MatchResult result{MatchStatus::kMarker, {}};
    result.marker.kind = kind;
    result.marker.length = length;
    return result;
}

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
}
bool is_tag_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

DsmlTagName tag_name_of(std::string_view name) {
    // function_calls is DeepSeek-V3.2's name of the wrapper; accept it as well.
    if (name == "tool_calls" || name == "function_calls") return DsmlTagName::kToolCalls;
    if (name == "invoke") return DsmlTagName::kInvoke;
    if (name == "parameter") return DsmlTagName::kParameter;
    return DsmlTagName::kUnknown;
}

void set_attribute(DsmlTag& tag, std::string_view key, std::string_view value) {
    if (key == "name") tag.name_attribute = std::string(value);
    if (key == "string") tag.string_value = value != "false";
}

// Parses the tag after its prefix (kDsmlOpenPrefix or kDsmlClosePrefix, prefix_length bytes).
MatchResult match_dsml_tag(std::string_view text, std::size_t prefix_length, bool closing, bool at_end) {
    const auto incomplete = [&] {
        return at_end ? marker_result(MarkerKind::kTruncatedDsml, text.size())
                      : MatchResult{MatchStatus::kNeedMore, {}};
    };
    const auto malformed = [&] { return marker_result(MarkerKind::kMalformedDsml, prefix_length); };
    const std::size_t limit = std::min(text.size(), kMaxDsmlTagBytes);

    std::size_t pos = prefix_length;
    while (pos < limit && is_name_char(text[pos])) ++pos;
    if (pos == text.size()) return incomplete();
    if (pos == limit || pos == prefix_length) return malformed();

    MatchResult result = marker_result(MarkerKind::kDsmlTag, 0);
    result.marker.tag.closing = closing;
    result.marker.tag.name = tag_name_of(text.substr(prefix_length, pos - prefix_length));
    while (true) {
        if (pos == text.size()) return incomplete();
        if (pos >= limit) return malformed();
        const char c = text[pos];
        if (c == '>') {
            result.marker.length = pos + 1;
            return result;
        }
        if (is_tag_space(c)) {
            ++pos;
            continue;
        }
        if (c == '/') {
            if (pos + 1 == text.size()) return incomplete();
            if (text[pos + 1] != '>') return malformed();
            result.marker.length = pos + 2;
            return result;
        }
        // attribute: name="value"
        const std::size_t key_start = pos;
        while (pos < limit && is_name_char(text[pos])) ++pos;
        if (pos == text.size()) return incomplete();
        if (pos == key_start || pos == limit || text[pos] != '=') return malformed();
        const std::string_view key = text.substr(key_start, pos - key_start);
        if (++pos == text.size()) return incomplete();
        if (text[pos] != '"') return malformed();
        const std::size_t value_start = ++pos;
        while (pos < limit && text[pos] != '"') ++pos;
        if (pos == text.size()) return incomplete();
        if (pos == limit) return malformed();
        set_attribute(result.marker.tag, key, text.substr(value_start, pos - value_start));
        ++pos;
    }
}

// <｜NAME｜> with a short NAME free of spaces, quotes, angle brackets and bars.
MatchResult match_special_token(std::string_view text, bool at_end) {
    const std::size_t start = ct::kSpecialOpen.size();
    for (std::size_t pos = start; pos < text.size(); ++pos) {
        if (pos - start > kMaxSpecialTokenNameBytes) return text_result();
        const Prefix close = prefix_state(text.substr(pos), kSpecialClose);
        if (close == Prefix::kFull) {
            return pos == start ? text_result() : marker_result(MarkerKind::kSpecialToken, pos + kSpecialClose.size());
        }
        if (close == Prefix::kPartial) return need_more_or_text(at_end);
        const char c = text[pos];
        if (c == '<' || c == '>' || c == '"' || is_tag_space(c)) return text_result();
        if (text.substr(pos).starts_with(ct::kFullwidthBar)) return text_result();
    }
    return need_more_or_text(at_end);
}

MatchResult match_at_angle(std::string_view text, bool at_end) {
    bool partial = false;
    for (auto [literal, kind] :
         {std::pair{ct::kThinkOpen, MarkerKind::kThinkOpen}, std::pair{ct::kThinkClose, MarkerKind::kThinkClose}}) {
        const Prefix state = prefix_state(text, literal);
        if (state == Prefix::kFull) return marker_result(kind, literal.size());
        partial = partial || state == Prefix::kPartial;
    }
    for (auto [prefix, closing] : {std::pair{kDsmlOpenPrefix, false}, std::pair{kDsmlClosePrefix, true}}) {
        const Prefix state = prefix_state(text, prefix);
        if (state == Prefix::kFull) return match_dsml_tag(text, prefix.size(), closing, at_end);
        partial = partial || state == Prefix::kPartial;
    }
    const Prefix special = prefix_state(text, ct::kSpecialOpen);
    if (special == Prefix::kFull) return match_special_token(text, at_end);
    partial = partial || special == Prefix::kPartial;
    return partial ? need_more_or_text(at_end) : text_result();
}

// "\n" or "\n\n" directly before <｜DSML｜tool_calls> / <｜DSML｜invoke …> belongs to the tool-call block.
MatchResult match_at_newline(std::string_view text, bool at_end) {
    if (text.size() < 2) return need_more_or_text(at_end);
    const std::size_t newlines = text[1] == '\n' ? 2 : 1;
    const std::string_view rest = text.substr(newlines);
    if (rest.empty()) return need_more_or_text(at_end);
    if (rest[0] != '<') return text_result();
    const MatchResult tag = match_at_angle(rest, at_end);
    if (tag.status == MatchStatus::kNeedMore) return tag;
    if (tag.status != MatchStatus::kMarker) return text_result();
    const Marker& marker = tag.marker;
    const bool opens_tool_calls =
        marker.kind == MarkerKind::kDsmlTag && !marker.tag.closing &&
        (marker.tag.name == DsmlTagName::kToolCalls || marker.tag.name == DsmlTagName::kInvoke);
    if (!opens_tool_calls && marker.kind != MarkerKind::kTruncatedDsml) return text_result();
    MatchResult result = tag;
    result.marker.newlines = newlines;
    result.marker.length += newlines;
    return result;
}

}  // namespace

MatchResult match_marker(std::string_view text, bool at_end) {
    if (text.empty()) return need_more_or_text(at_end);
    switch (text[0]) {
        case '<':
            return match_at_angle(text, at_end);
        case '\n':
            return match_at_newline(text, at_end);
        case '\xEF': {
            const Prefix state = prefix_state(text, ct::kDsml);
            if (state == Prefix::kFull) return marker_result(MarkerKind::kBareDsml, ct::kDsml.size());
            return state == Prefix::kPartial ? need_more_or_text(at_end) : text_result();
        }
        default:
            return text_result();
    }
}

void LeakGuard::push(std::string_view text, std::string& out) {
    held_ += text;
    process(out, /*at_end=*/false);
}

void LeakGuard::flush(std::string& out) {
    process(out, /*at_end=*/true);
}

void LeakGuard::process(std::string& out, bool at_end) {
    static constexpr std::string_view kFullwidthLess = "＜";  // U+FF1C
    const std::string_view text = held_;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::string_view rest = text.substr(pos);
        const char c = rest[0];
        if (c != '<' && c != '\xEF') {
            out += c;
            ++pos;
            continue;
        }
        bool partial = false;
        auto check = [&](std::string_view pattern) {
            const Prefix state = prefix_state(rest, pattern);
            partial = partial || state == Prefix::kPartial;
            return state == Prefix::kFull;
        };
        if (check(ct::kSpecialOpen)) {
            out += "<|";
            pos += ct::kSpecialOpen.size();
        } else if (check(ct::kDsml)) {
            out += '|';
            pos += ct::kFullwidthBar.size();
        } else if (guard_think_tags_ && (check(ct::kThinkOpen) || check(ct::kThinkClose))) {
            out += kFullwidthLess;
            ++pos;
        } else if (partial && !at_end) {
            break;
        } else {
            out += c;
            ++pos;
        }
    }
    held_.erase(0, pos);
}

std::string sanitize_attribute(std::string_view text) {
    std::string out;
    LeakGuard guard(/*guard_think_tags=*/true);
    guard.push(text, out);
    guard.flush(out);
    return out;
}

}  // namespace dsv4::output_parser_detail
