// UTF-8 helpers for the tokenizer: validation, code-point iteration and the lossy (U+FFFD) conversion that
// HF tokenizers' ByteLevel decoder applies (Rust's String::from_utf8_lossy).
//
// Lossy conversion follows the Unicode "substitution of maximal subparts" practice that Rust implements: every
// maximal prefix of a well-formed sequence that cannot be completed becomes one U+FFFD, and the byte that broke
// it is examined again as the start of a new sequence. Because that rule only ever looks forward, a streaming
// converter (Utf8Sanitizer) that holds back an incomplete tail produces exactly the one-shot result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsv4::tokenizer {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Byte offset of the first byte that is not part of well-formed UTF-8, or nullopt when `text` is valid.
std::optional<size_t> find_invalid_utf8(std::string_view text);

// Decodes the code point that starts at text[pos] (text must be valid UTF-8); sets `length` to its byte count.
char32_t decode_utf8_at(std::string_view text, size_t pos, int& length);

// Appends the UTF-8 encoding of `code_point` (must be a Unicode scalar value).
void append_utf8(std::string& out, char32_t code_point);

// Streaming lossy UTF-8: push() appends complete, valid text to `out` (invalid parts as U+FFFD) and keeps an
// incomplete trailing sequence (at most 3 bytes) for the next push; finish() flushes that tail as one U+FFFD.
class Utf8Sanitizer {
  public:
    void push(std::string_view bytes, std::string& out);
    void finish(std::string& out);
    bool has_pending() const { return pending_size_ > 0; }

  private:
    // Consumes `bytes` starting after the pending tail; returns how many bytes of `bytes` were used.
    size_t complete_pending(std::string_view bytes, std::string& out);

    char pending_[4] = {};
    int pending_size_ = 0;
};

// One-shot lossy conversion; equal to Utf8Sanitizer push + finish.
std::string utf8_lossy(std::string_view bytes);

}  // namespace dsv4::tokenizer
