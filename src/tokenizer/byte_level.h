// The GPT-2 byte <-> character alphabet used by ByteLevel pre-tokenizers and decoders: every byte value is
// represented by one printable code point (printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100..U+0143 in byte order). Vocabulary strings of a byte-level BPE are written in this alphabet.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsv4::tokenizer {

// The code point that represents `byte`.
char32_t byte_to_char(uint8_t byte);

// The byte a code point represents, or nullopt when it is not in the alphabet.
std::optional<uint8_t> char_to_byte(char32_t code_point);

// Maps raw bytes to their alphabet characters (UTF-8 encoded).
std::string byte_level_encode(std::string_view bytes);

// Decodes one token string as HF's ByteLevel decoder does: when every character is in the alphabet the token
// becomes those bytes; otherwise (e.g. an added token such as "<｜User｜>") its own UTF-8 bytes are kept.
// `token` must be valid UTF-8.
std::string byte_level_decode(std::string_view token);

}  // namespace dsv4::tokenizer
