// Server-sent events framing and the small JSON-text helpers the streaming writers use. Chunks are built as text
// (not through a JSON DOM): this is the per-token hot path.
#pragma once

#include <string>
#include <string_view>

namespace dsv4::server {

// Where streamed bytes go (an HTTP chunked response, or a string in tests). write() returns false once the client
// is gone; later writes keep returning false.
class ByteSink {
  public:
    virtual ~ByteSink() = default;
    virtual bool write(std::string_view bytes) = 0;
};

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// "data: <json>\n\n"
std::string sse_event(std::string_view json);

// Appends a JSON string literal (quotes included). The text must be valid UTF-8 (the detokenizer guarantees it).
void append_json_string(std::string& out, std::string_view text);
// Appends a float as a JSON number; non-finite values (which JSON cannot carry) become -9999.0, as vLLM does.
void append_json_float(std::string& out, float value);
// Appends the raw bytes as a JSON array of integers ([104, 105]).
void append_json_byte_array(std::string& out, std::string_view bytes);

}  // namespace dsv4::server
