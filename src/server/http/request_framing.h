// How a request's body is delimited (RFC 9112 section 6), checked from the headers before any of it is read, so that
// a request the server will refuse never costs reading its body:
//   - Content-Length must be one non-negative decimal number; several values (repeated headers or a list) must all
//     be the same: conflicting ones are a request smuggling vector and get 400;
//   - Content-Length together with Transfer-Encoding gets 400 (a proxy and this server could disagree on the end);
//   - Transfer-Encoding other than exactly "chunked" gets 501;
//   - a declared length above the limit gets 413 at once, naming both numbers.
// And the body must be plain bytes: multipart/form-data and unknown Content-Encodings get 415.
#pragma once

#include <httplib.h>

#include <cstdint>

namespace dsv4::server {

struct BodyFraming {
    enum class Kind { kNone, kLength, kChunked };
    Kind kind = Kind::kNone;
    uint64_t length = 0;  // kLength

    bool has_body() const { return kind == Kind::kChunked || (kind == Kind::kLength && length > 0); }
};

// The framing of `headers`, or throws the ApiError (400, 413, 501) described above.
BodyFraming check_body_framing(const httplib::Headers& headers, size_t max_body_bytes);

// Throws a 415 ApiError for a multipart/form-data body or a Content-Encoding other than identity, gzip, deflate, br.
void check_body_encoding(const httplib::Headers& headers);

}  // namespace dsv4::server
