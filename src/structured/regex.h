// Regular expressions (ECMAScript syntax, the subset a grammar can express) -> grammar expressions. Used for JSON
// Schema "pattern" (matched anywhere in the string unless anchored with ^ / $, as JSON Schema says, and written as
// JSON string text), for the date / time / uuid formats, and for vLLM's guided_regex (the whole output matches).
// Supported: literals, ., classes [...] / [^...] with ranges, \d \D \w \W \s \S, escapes (\t \n \r \v \f \0 \xHH
// \uHHHH \u{H..} \cX and escaped punctuation), groups ( ) (?: ) (?<name> ), alternation, the quantifiers * + ? {n}
// {n,} {n,m} (lazy forms too: the language is the same), ^ and $ at the start / end of a top-level alternative.
// Refused with a GrammarError naming the construct: lookahead / lookbehind, backreferences, \b \B, \p{..}, flags.
#pragma once

#include <cstdint>
#include <string_view>

#include "structured/grammar.h"

namespace dsv4::structured {

enum class RegexText {
    kRaw,         // the characters as UTF-8 (guided_regex, GBNF-free text)
    kJsonString,  // the characters as they appear inside a JSON string (escapes where JSON needs them)
};

struct RegexOptions {
    RegexText text = RegexText::kRaw;
    bool search = false;  // true: matches anywhere (JSON Schema pattern); false: the whole text matches
};

inline constexpr size_t kMaxRegexBytes = 16384;

// An expression of `grammar` matching what the regex describes. Throws GrammarError for syntax errors and
// unsupported constructs, naming the problem and its position.
int32_t compile_regex(Grammar& grammar, std::string_view pattern, const RegexOptions& options);

}  // namespace dsv4::structured
