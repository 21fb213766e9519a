// GBNF (llama.cpp's grammar format) -> the grammar IR. Syntax: rules `name ::= alternatives` (names of letters,
// digits and '-'; the start rule is `root`), literals "..." , character classes [...] / [^...] with ranges, `.` (any
// character), groups ( ), alternation |, the repetitions ? * + {m} {m,} {m,n}, rule references and # comments.
// Escapes in literals and classes: \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH. A newline ends a rule except
// inside a group or after '|'. Terminals are Unicode characters, matched as their UTF-8 bytes.
// Errors (syntax, a rule defined twice, an undefined rule, no root, llama.cpp's token references <...>) are
// GrammarErrors with the line and column; left recursion is refused when the grammar is compiled.
#pragma once

#include <string_view>

#include "structured/grammar.h"

namespace dsv4::structured {

inline constexpr size_t kMaxGbnfBytes = 262144;

Grammar parse_gbnf(std::string_view text);

}  // namespace dsv4::structured
