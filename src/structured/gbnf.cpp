#include "structured/gbnf.h"

#include <map>
#include <string>
#include <vector>

#include "structured/char_classes.h"
#include "structured/hex_digits.h"
#include "tokenizer/unicode.h"

namespace dsv4::structured {
namespace {

constexpr int kMaxGroupDepth = 200;

class GbnfParser {
  public:
    explicit GbnfParser(std::string_view text) : t_(text) {}

    Grammar parse() {
        while (true) {
            skip(true);
            if (at_end()) break;
            parse_rule();
        }
        for (const auto& [name, rule] : rules_) {
            if (!defined_[static_cast<size_t>(rule)]) grammar_fail("GBNF: rule '{}' is used but never defined", name);
        }
        auto root = rules_.find("root");
        if (root == rules_.end()) grammar_fail("GBNF: the grammar has no 'root' rule");
        g_.set_root(root->second);
        return std::move(g_);
    }

  private:
    [[noreturn]] void error(std::string_view what) const {
        size_t line = 1;
        size_t column = 1;
        for (size_t i = 0; i < pos_ && i < t_.size(); ++i) {
            if (t_[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        grammar_fail("GBNF: {} at line {}, column {}", what, line, column);
    }
    bool at_end() const { return pos_ >= t_.size(); }
    char peek(size_t ahead = 0) const { return pos_ + ahead < t_.size() ? t_[pos_ + ahead] : '\0'; }

    // Skips spaces, tabs and comments; newlines too when `newlines` (inside groups, after '|', between rules).
    void skip(bool newlines) {
        while (!at_end()) {
            const char c = peek();
            if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
                ++pos_;
            } else if (c == '#') {
                while (!at_end() && peek() != '\n') ++pos_;
            } else {
                break;
            }
        }
    }

    static bool is_name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    }

    std::string parse_name() {
        const size_t start = pos_;
        while (!at_end() && is_name_char(peek())) ++pos_;
        if (pos_ == start) error("expected a rule name");
        return std::string(t_.substr(start, pos_ - start));
    }

    int32_t rule_id(const std::string& name) {
        auto [it, inserted] = rules_.emplace(name, -1);
        if (inserted) {
            it->second = g_.add_rule(name);
            defined_.push_back(false);
        }
        return it->second;
    }

    void parse_rule() {
        const std::string name = parse_name();
        skip(false);
        if (t_.substr(pos_, 3) != "::=") error("expected '::='");
        pos_ += 3;
        skip(true);
        const int32_t rule = rule_id(name);
        if (defined_[static_cast<size_t>(rule)]) error(fmt::format("rule '{}' is defined twice", name));
        defined_[static_cast<size_t>(rule)] = true;
        g_.define(rule, parse_alternatives(false, 0));
        skip(false);
        if (!at_end() && peek() != '\n' && peek() != '\r') error("expected the end of the rule");
    }

    int32_t parse_alternatives(bool nested, int depth) {
        if (depth > kMaxGroupDepth) error("groups nested too deeply");
        std::vector<int32_t> alternatives{parse_sequence(nested, depth)};
        while (peek() == '|' && !at_end()) {
            ++pos_;
            skip(true);
            alternatives.push_back(parse_sequence(nested, depth));
        }
        return g_.alt(std::move(alternatives));
    }

    int32_t parse_sequence(bool nested, int depth) {
        std::vector<int32_t> items;
        while (true) {
            skip(nested);
            const char c = peek();
            if (at_end() || c == '|' || c == ')' || c == '\n' || c == '\r') break;
            items.push_back(parse_repetition(parse_item(depth)));
        }
        return g_.seq(std::move(items));
    }

    int32_t parse_item(int depth) {
        const char c = peek();
        if (c == '"') return parse_literal();
        if (c == '[') return parse_class();
        if (c == '.') {
            ++pos_;
            return utf8_chars(g_, CodepointSet::any());
        }
        if (c == '(') {
            ++pos_;
            skip(true);
            const int32_t inner = parse_alternatives(true, depth + 1);
            skip(true);
            if (peek() != ')') error("expected ')'");
            ++pos_;
            return inner;
        }
        if (c == '<') error("token references (<...>) are not supported");
        if (is_name_char(c)) return g_.ref(rule_id(parse_name()));
        error(fmt::format("unexpected character '{}'", c));
    }

    int32_t parse_repetition(int32_t item) {
        const char c = peek();
        if (c == '*' || c == '+' || c == '?') {
            ++pos_;
            return c == '*' ? g_.star(item) : c == '+' ? g_.plus(item) : g_.optional(item);
        }
        if (c != '{') return item;
        ++pos_;
        skip(false);
        const int32_t min = parse_count();
        int32_t max = min;
        skip(false);
        if (peek() == ',') {
            ++pos_;
            skip(false);
            max = peek() == '}' ? -1 : parse_count();
            skip(false);
        }
        if (peek() != '}') error("expected '}'");
        ++pos_;
        if (max >= 0 && max < min) error("repetition {m,n} with n < m");
        return g_.repeat(item, min, max);
    }

    int32_t parse_count() {
        int64_t value = 0;
        const size_t start = pos_;
        while (peek() >= '0' && peek() <= '9' && !at_end()) {
            value = value * 10 + (t_[pos_++] - '0');
            if (value > g_.limits().max_repeat) error("repetition count over the limit");
        }
        if (pos_ == start) error("expected a number");
        return static_cast<int32_t>(value);
    }

    unsigned hex(size_t count) {
        const int64_t value = hex_digits_value(t_, pos_, count);
        if (value < 0) error("invalid hexadecimal escape");
        pos_ += count;
        return static_cast<unsigned>(value);
    }

    // One character of a literal or class (escapes decoded).
    char32_t parse_char() {
        if (at_end()) error("unexpected end of the grammar");
        if (peek() != '\\') {
            int length = 0;
            const char32_t c = tokenizer::decode_utf8_at(t_, pos_, length);
            pos_ += static_cast<size_t>(length);
            return c;
        }
        ++pos_;
        const char e = peek();
        ++pos_;
        switch (e) {
            case 'n':
                return '\n';
            case 'r':
                return '\r';
            case 't':
                return '\t';
            case '\\':
            case '"':
            case '[':
            case ']':
            case '-':
                return static_cast<char32_t>(e);
            case 'x':
                return hex(2);
            case 'u':
                return hex(4);
            case 'U': {
                const char32_t c = hex(8);
                if (c > kMaxCodepoint) error("escape beyond U+10FFFF");
                return c;
            }
            default:
                break;
        }
        --pos_;
        error("unknown escape");
    }

    int32_t parse_literal() {
        ++pos_;  // "
        std::string bytes;
        while (peek() != '"' || at_end()) {
            if (at_end() || peek() == '\n') error("unterminated literal");
            const char32_t c = parse_char();
            if (c >= 0xD800 && c <= 0xDFFF) error("surrogate code point in a literal");
            tokenizer::append_utf8(bytes, c);
        }
        ++pos_;
        return g_.literal(bytes);
    }

    int32_t parse_class() {
        ++pos_;  // [
        const bool negated = peek() == '^';
        if (negated) ++pos_;
        CodepointSet set;
        while (peek() != ']' || at_end()) {
            if (at_end()) error("unterminated character class");
            const char32_t lo = parse_char();
            char32_t hi = lo;
            if (peek() == '-' && peek(1) != ']' && pos_ + 1 < t_.size()) {
                ++pos_;
                hi = parse_char();
                if (hi < lo) error("character range out of order");
            }
            set.add(lo, hi);
        }
        ++pos_;
        return utf8_chars(g_, negated ? set.complement() : set);
    }

    std::string_view t_;
    size_t pos_ = 0;
    Grammar g_;
    std::map<std::string, int32_t> rules_;
    std::vector<bool> defined_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) {
    if (text.size() > kMaxGbnfBytes)
        grammar_fail("GBNF: the grammar is {} bytes; at most {} are supported", text.size(), kMaxGbnfBytes);
    if (const auto bad = tokenizer::find_invalid_utf8(text)) grammar_fail("GBNF: invalid UTF-8 at byte {}", *bad);
    return GbnfParser(text).parse();
}

}  // namespace dsv4::structured
