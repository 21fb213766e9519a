// Characters as grammars see them. A CodepointSet is a set of Unicode scalar values (surrogates never included);
// utf8_chars() turns it into the byte sequences of their UTF-8 encodings (a few alternatives of byte-range
// sequences), and json_string_chars() into the text a JSON string uses for them: raw UTF-8 where JSON allows it,
// \" \\ \/ and the short escapes, and \u00XX for control characters. Regexes (pattern, guided_regex) and GBNF
// character classes are built from these.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "structured/grammar.h"

namespace dsv4::structured {

inline constexpr char32_t kMaxCodepoint = 0x10FFFF;

class CodepointSet {
  public:
    CodepointSet() = default;
    static CodepointSet range(char32_t lo, char32_t hi);
    static CodepointSet single(char32_t c) { return range(c, c); }
    static CodepointSet any() { return range(0, kMaxCodepoint); }

    void add(char32_t lo, char32_t hi);  // surrogates dropped
    void add(const CodepointSet& other);
    CodepointSet complement() const;
    CodepointSet intersect(const CodepointSet& other) const;
    bool contains(char32_t c) const;
    bool empty() const { return ranges_.empty(); }
    const std::vector<std::pair<char32_t, char32_t>>& ranges() const { return ranges_; }

  private:
    void normalize();
    std::vector<std::pair<char32_t, char32_t>> ranges_;  // sorted, disjoint, non-adjacent
};

// One character of `set`, as raw UTF-8 bytes. An empty set matches nothing.
int32_t utf8_chars(Grammar& grammar, const CodepointSet& set);
// One character of `set`, as it may be written inside a JSON string (escaped where JSON requires it).
int32_t json_string_chars(Grammar& grammar, const CodepointSet& set);
// Any one character of a JSON string body: every form JSON allows, including \uXXXX escapes of any character and
// surrogate pairs (a lone surrogate escape is not allowed). Characters in `raw_excluded` may only appear escaped.
int32_t json_string_any_char(Grammar& grammar, const CodepointSet& raw_excluded = {});

}  // namespace dsv4::structured
