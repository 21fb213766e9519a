#include "structured/regex.h"

#include <optional>
#include <vector>

#include "structured/char_classes.h"
#include "structured/hex_digits.h"
#include "tokenizer/unicode.h"

namespace dsv4::structured {
namespace {

constexpr int kMaxRegexDepth = 200;

struct RegexNode {
    enum class Kind { kChars, kSeq, kAlt, kRepeat, kStart, kEnd };
    Kind kind = Kind::kSeq;
    CodepointSet chars;
    std::vector<RegexNode> children;
    int min = 0;
    int max = -1;
};

CodepointSet digits() {
    return CodepointSet::range('0', '9');
}
CodepointSet word_chars() {
    CodepointSet set = CodepointSet::range('a', 'z');
    set.add('A', 'Z');
    set.add('0', '9');
    set.add('_', '_');
    return set;
}
CodepointSet space_chars() {  // ECMAScript WhiteSpace and LineTerminator
    CodepointSet set = CodepointSet::range(0x09, 0x0D);
    set.add(0x20, 0x20);
    set.add(0xA0, 0xA0);
    set.add(0x1680, 0x1680);
    set.add(0x2000, 0x200A);
    set.add(0x2028, 0x2029);
    set.add(0x202F, 0x202F);
    set.add(0x205F, 0x205F);
    set.add(0x3000, 0x3000);
    set.add(0xFEFF, 0xFEFF);
    return set;
}
CodepointSet dot_chars() {
    CodepointSet excluded = CodepointSet::single('\n');
    excluded.add('\r', '\r');
    excluded.add(0x2028, 0x2029);
    return excluded.complement();
}

class RegexParser {
  public:
    explicit RegexParser(std::string_view pattern) : p_(pattern) {}

    RegexNode parse() {
        RegexNode node = parse_alt(0);
        if (pos_ < p_.size()) error("unmatched ')'");
        return node;
    }

  private:
    [[noreturn]] void error(std::string_view what) const {
        grammar_fail("regular expression '{}': {} at offset {}", p_.substr(0, 200), what, pos_);
    }
    bool at_end() const { return pos_ >= p_.size(); }
    char peek() const { return at_end() ? '\0' : p_[pos_]; }
    bool eat(char ch) {
        if (peek() != ch || at_end()) return false;
        ++pos_;
        return true;
    }

    RegexNode parse_alt(int depth) {
        if (depth > kMaxRegexDepth) error("groups nested too deeply");
        RegexNode alt;
        alt.kind = RegexNode::Kind::kAlt;
        alt.children.push_back(parse_seq(depth));
        while (eat('|')) alt.children.push_back(parse_seq(depth));
        if (alt.children.size() == 1) return std::move(alt.children[0]);
        return alt;
    }

    RegexNode parse_seq(int depth) {
        RegexNode seq;
        seq.kind = RegexNode::Kind::kSeq;
        while (!at_end() && peek() != '|' && peek() != ')') seq.children.push_back(parse_quantified(depth));
        return seq;
    }

    RegexNode parse_quantified(int depth) {
        RegexNode atom = parse_atom(depth);
        while (!at_end()) {
            int min = 0;
            int max = -1;
            const size_t save = pos_;
            if (eat('*')) {
            } else if (eat('+')) {
                min = 1;
            } else if (eat('?')) {
                max = 1;
            } else if (!parse_braces(min, max)) {
                pos_ = save;
                break;
            }
            if (atom.kind == RegexNode::Kind::kStart || atom.kind == RegexNode::Kind::kEnd) error("quantified anchor");
            eat('?');  // lazy: the same language
            RegexNode repeat;
            repeat.kind = RegexNode::Kind::kRepeat;
            repeat.min = min;
            repeat.max = max;
            repeat.children.push_back(std::move(atom));
            atom = std::move(repeat);
        }
        return atom;
    }

    // {n} {n,} {n,m}; false (position unchanged by the caller) when the brace is a literal.
    bool parse_braces(int& min, int& max) {
        if (!eat('{')) return false;
        const std::optional<int> lo = parse_number();
        if (!lo) return false;
        min = *lo;
        max = *lo;
        if (eat(',')) {
            const std::optional<int> hi = parse_number();
            max = hi ? *hi : -1;
        }
        if (!eat('}')) return false;
        if (max >= 0 && max < min) error("quantifier {n,m} with m < n");
        return true;
    }

    std::optional<int> parse_number() {
        int value = 0;
        size_t digits_read = 0;
        while (peek() >= '0' && peek() <= '9' && !at_end()) {
            value = std::min(value * 10 + (p_[pos_++] - '0'), 1000000);
            ++digits_read;
        }
        if (digits_read == 0) return std::nullopt;
        return value;
    }

    RegexNode chars(CodepointSet set) {
        RegexNode node;
        node.kind = RegexNode::Kind::kChars;
        node.chars = std::move(set);
        return node;
    }

    RegexNode parse_atom(int depth) {
        const char ch = peek();
        if (ch == '(') return parse_group(depth);
        if (ch == '[') return chars(parse_class());
        if (ch == '*' || ch == '+' || ch == '?') error("nothing to repeat");
        ++pos_;
        if (ch == '.') return chars(dot_chars());
        if (ch == '^') return RegexNode{RegexNode::Kind::kStart, {}, {}, 0, 0};
        if (ch == '$') return RegexNode{RegexNode::Kind::kEnd, {}, {}, 0, 0};
        if (ch == '\\') return chars(parse_escape(false));
        --pos_;
        return chars(CodepointSet::single(next_codepoint()));
    }

    RegexNode parse_group(int depth) {
        ++pos_;  // (
        if (eat('?')) {
            if (eat(':')) {
            } else if (peek() == '=' || peek() == '!') {
                error("lookahead assertions are not supported");
            } else if (eat('<')) {
                if (peek() == '=' || peek() == '!') error("lookbehind assertions are not supported");
                while (!at_end() && peek() != '>') ++pos_;
                if (!eat('>')) error("unterminated group name");
            } else {
                error("unsupported group syntax (flags or extensions)");
            }
        }
        RegexNode inner = parse_alt(depth + 1);
        if (!eat(')')) error("missing ')'");
        return inner;
    }

    char32_t next_codepoint() {
        int length = 0;
        const char32_t cp = tokenizer::decode_utf8_at(p_, pos_, length);
        pos_ += static_cast<size_t>(length);
        return cp;
    }

    unsigned hex_value(size_t count) {
        const int64_t value = hex_digits_value(p_, pos_, count);
        if (value < 0) error("invalid hexadecimal escape");
        pos_ += count;
        return static_cast<unsigned>(value);
    }

    char32_t unicode_escape() {
        if (eat('{')) {
            char32_t value = 0;
            size_t n = 0;
            while (!eat('}')) {
                value = value * 16 + hex_value(1);
                if (++n > 6 || value > kMaxCodepoint) error("invalid \\u{...} escape");
            }
            return value;
        }
        char32_t value = hex_value(4);
        if (value >= 0xD800 && value <= 0xDBFF && p_.substr(pos_, 2) == "\\u") {
            const size_t save = pos_;
            pos_ += 2;
            const char32_t low = hex_value(4);
            if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00);
            pos_ = save;
        }
        if (value >= 0xD800 && value <= 0xDFFF) error("lone surrogate escape");
        return value;
    }

    // After a backslash. in_class: \b is a backspace there, not a word boundary.
    CodepointSet parse_escape(bool in_class) {
        if (at_end()) error("trailing backslash");
        const char ch = p_[pos_++];
        switch (ch) {
            case 'd':
                return digits();
            case 'D':
                return digits().complement();
            case 'w':
                return word_chars();
            case 'W':
                return word_chars().complement();
            case 's':
                return space_chars();
            case 'S':
                return space_chars().complement();
            case 't':
                return CodepointSet::single('\t');
            case 'n':
                return CodepointSet::single('\n');
            case 'r':
                return CodepointSet::single('\r');
            case 'v':
                return CodepointSet::single('\v');
            case 'f':
                return CodepointSet::single('\f');
            case 'x':
                return CodepointSet::single(hex_value(2));
            case 'u':
                return CodepointSet::single(unicode_escape());
            case 'c': {
                const char letter = peek();
                if (!((letter >= 'a' && letter <= 'z') || (letter >= 'A' && letter <= 'Z')))
                    error("invalid \\c escape");
                ++pos_;
                return CodepointSet::single(static_cast<char32_t>(letter) % 32);
            }
            case '0':
                if (peek() >= '0' && peek() <= '9') error("octal escapes are not supported");
                return CodepointSet::single(0);
            case 'b':
                if (in_class) return CodepointSet::single('\b');
                error("word boundary assertions (\\b) are not supported");
            case 'B':
                error("word boundary assertions (\\B) are not supported");
            case 'p':
            case 'P':
                error("Unicode property escapes (\\p{...}) are not supported");
            case 'k':
                error("backreferences are not supported");
            default:
                break;
        }
        if (ch >= '1' && ch <= '9') error("backreferences are not supported");
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) error("unknown escape");
        --pos_;
        return CodepointSet::single(next_codepoint());
    }

    // One class member: a character (nullopt set when it was a class escape such as \d, returned in `set`).
    std::optional<char32_t> class_atom(CodepointSet& set) {
        if (eat('\\')) {
            CodepointSet escaped = parse_escape(true);
            if (escaped.ranges().size() == 1 && escaped.ranges()[0].first == escaped.ranges()[0].second)
                return escaped.ranges()[0].first;
            set.add(escaped);
            return std::nullopt;
        }
        return next_codepoint();
    }

    CodepointSet parse_class() {
        ++pos_;  // [
        const bool negated = eat('^');
        CodepointSet set;
        while (!eat(']')) {
            if (at_end()) error("missing ']'");
            const std::optional<char32_t> lo = class_atom(set);
            if (lo && peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
                ++pos_;  // -
                const std::optional<char32_t> hi = class_atom(set);
                if (!hi) error("a class escape cannot end a range");
                if (*hi < *lo) error("range out of order in character class");
                set.add(*lo, *hi);
            } else if (lo) {
                set.add(*lo, *lo);
            }
        }
        return negated ? set.complement() : set;
    }

    std::string_view p_;
    size_t pos_ = 0;
};

class RegexEmitter {
  public:
    RegexEmitter(Grammar& grammar, RegexText text) : grammar_(grammar), text_(text) {}

    int32_t chars(const CodepointSet& set) {
        return text_ == RegexText::kRaw ? utf8_chars(grammar_, set) : json_string_chars(grammar_, set);
    }

    int32_t emit(const RegexNode& node) {
        switch (node.kind) {
            case RegexNode::Kind::kChars:
                return chars(node.chars);
            case RegexNode::Kind::kSeq: {
                std::vector<int32_t> parts;
                for (const RegexNode& child : node.children) parts.push_back(emit(child));
                return grammar_.seq(std::move(parts));
            }
            case RegexNode::Kind::kAlt: {
                std::vector<int32_t> parts;
                for (const RegexNode& child : node.children) parts.push_back(emit(child));
                return grammar_.alt(std::move(parts));
            }
            case RegexNode::Kind::kRepeat:
                return grammar_.repeat(emit(node.children[0]), node.min, node.max);
            case RegexNode::Kind::kStart:
            case RegexNode::Kind::kEnd:
                break;
        }
        grammar_fail("regular expression: '^' and '$' are only supported at the start and end of the pattern");
    }

    // One top-level alternative: leading ^ and trailing $ decide whether text may come before / after it.
    int32_t emit_branch(const RegexNode& branch, bool search) {
        std::vector<const RegexNode*> items;
        if (branch.kind == RegexNode::Kind::kSeq) {
            for (const RegexNode& child : branch.children) items.push_back(&child);
        } else {
            items.push_back(&branch);
        }
        bool start = false;
        bool end = false;
        while (!items.empty() && items.front()->kind == RegexNode::Kind::kStart) {
            start = true;
            items.erase(items.begin());
        }
        while (!items.empty() && items.back()->kind == RegexNode::Kind::kEnd) {
            end = true;
            items.pop_back();
        }
        std::vector<int32_t> parts;
        if (search && !start) parts.push_back(grammar_.star(chars(CodepointSet::any())));
        for (const RegexNode* item : items) parts.push_back(emit(*item));
        if (search && !end) parts.push_back(grammar_.star(chars(CodepointSet::any())));
        return grammar_.seq(std::move(parts));
    }

  private:
    Grammar& grammar_;
    RegexText text_;
};

}  // namespace

int32_t compile_regex(Grammar& grammar, std::string_view pattern, const RegexOptions& options) {
    if (pattern.size() > kMaxRegexBytes) {
        grammar_fail("regular expression is {} bytes; at most {} are supported", pattern.size(), kMaxRegexBytes);
    }
    if (const auto bad = tokenizer::find_invalid_utf8(pattern)) {
        grammar_fail("regular expression: invalid UTF-8 at byte {}", *bad);
    }
    const RegexNode root = RegexParser(pattern).parse();
    RegexEmitter emitter(grammar, options.text);
    if (root.kind != RegexNode::Kind::kAlt) return emitter.emit_branch(root, options.search);
    std::vector<int32_t> branches;
    for (const RegexNode& branch : root.children) branches.push_back(emitter.emit_branch(branch, options.search));
    return grammar.alt(std::move(branches));
}

}  // namespace dsv4::structured
