#include "tokenizer/detokenizer.h"

namespace dsv4::tokenizer {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(&tokenizer), skip_special_(skip_special) {}

std::string StreamingDetokenizer::push(int32_t id) {
    std::string out;
    if (skip_special_ && tokenizer_->is_special(id)) return out;
    sanitizer_.push(tokenizer_->token_bytes(id), out);
    return out;
}

std::string StreamingDetokenizer::flush() {
    std::string out;
    sanitizer_.finish(out);
    return out;
}

}  // namespace dsv4::tokenizer
