#include "tokenizer/pretokenizer_deepseek.h"

namespace dsv4::tokenizer {

std::unique_ptr<SegmentFinder> make_deepseek_fast_finder(std::string_view) { return nullptr; }

}  // namespace dsv4::tokenizer
