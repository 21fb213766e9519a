// Hand-written matchers for the three Split patterns of DeepSeek's tokenizer.json (V3 and V4 share them).
// They reproduce Oniguruma's leftmost-first backtracking result exactly (tests/unit/tokenizer compares them with
// Oniguruma on the reference corpus and on random text) and use Oniguruma's own Unicode tables, but avoid a
// regex search per piece, which dominates encode time otherwise.
#pragma once

#include <memory>
#include <string_view>

#include "tokenizer/pretokenizer.h"

namespace dsv4::tokenizer {

// A fast finder when `pattern` is byte-for-byte one of the DeepSeek patterns, else nullptr.
std::unique_ptr<SegmentFinder> make_deepseek_fast_finder(std::string_view pattern);

}  // namespace dsv4::tokenizer
