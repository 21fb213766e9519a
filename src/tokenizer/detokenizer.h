// StreamingDetokenizer: turns generated ids into text one id at a time for streaming responses.
//
// Guarantees: push() never returns a partial UTF-8 sequence (an incomplete trailing sequence, at most 3 bytes,
// is held until the bytes that complete it arrive); no byte is dropped; and the concatenation of every push()
// plus flush() equals Tokenizer::decode of all the ids with the same skip_special. Bytes that can never form
// valid UTF-8 become U+FFFD as soon as that is known, with HF's maximal-subpart rule; an incomplete sequence still
// pending at flush() becomes one U+FFFD. Unknown ids contribute nothing (as in decode). With skip_special,
// added tokens flagged special produce no text; otherwise their content is emitted like any other text.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace dsv4::tokenizer {

class StreamingDetokenizer {
  public:
    // `tokenizer` must outlive this object.
    StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special);

    // Text that became complete with `id` (possibly empty).
    std::string push(int32_t id);
    // The held-back tail (as U+FFFD when it is incomplete); the detokenizer can be reused afterwards.
    std::string flush();
    // True when bytes are held back waiting for the rest of a UTF-8 sequence.
    bool has_pending() const { return sanitizer_.has_pending(); }

  private:
    const Tokenizer* tokenizer_;
    bool skip_special_;
    Utf8Sanitizer sanitizer_;
};

}  // namespace dsv4::tokenizer
