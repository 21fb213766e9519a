#include "server/http/request_framing.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "server/http/api_error.h"

namespace dsv4::server {
namespace {

std::string trimmed(std::string_view text) {
    const size_t begin = text.find_first_not_of(" \t");
    if (begin == std::string_view::npos) return {};
    const size_t end = text.find_last_not_of(" \t");
    return std::string(text.substr(begin, end - begin + 1));
}

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

// Every comma-separated element of every header named `name`, trimmed.
std::vector<std::string> header_elements(const httplib::Headers& headers, const std::string& name) {
    std::vector<std::string> elements;
    const auto [begin, end] = headers.equal_range(name);
    for (auto it = begin; it != end; ++it) {
        size_t start = 0;
        const std::string& value = it->second;
        while (start <= value.size()) {
            const size_t comma = std::min(value.find(',', start), value.size());
            elements.push_back(trimmed(std::string_view(value).substr(start, comma - start)));
            start = comma + 1;
        }
    }
    return elements;
}

ApiError framing_error(int status, std::string message) {
    return ApiError(status, "invalid_request_error", std::move(message), {}, "invalid_http_framing");
}

// The one length all Content-Length values agree on (digits only), as text.
std::string content_length_text(const std::vector<std::string>& values) {
    for (const std::string& value : values) {
        const bool digits = !value.empty() && std::all_of(value.begin(), value.end(),
                                                          [](unsigned char c) { return std::isdigit(c) != 0; });
        if (!digits) {
            throw framing_error(400, "Content-Length '" + value + "' is not a non-negative decimal number");
        }
    }
    // Compare as numbers: "007" and "7" agree.
    auto significant = [](const std::string& v) {
        const size_t first = v.find_first_not_of('0');
        return first == std::string::npos ? std::string("0") : v.substr(first);
    };
    const std::string first = significant(values.front());
    for (const std::string& value : values) {
        if (significant(value) != first) {
            throw framing_error(400, "conflicting Content-Length values '" + values.front() + "' and '" + value +
                                         "': the request's end is ambiguous");
        }
    }
    return first;
}

}  // namespace

BodyFraming check_body_framing(const httplib::Headers& headers, size_t max_body_bytes) {
    const std::vector<std::string> lengths = header_elements(headers, "Content-Length");
    const std::vector<std::string> codings = header_elements(headers, "Transfer-Encoding");
    BodyFraming framing;
    if (!codings.empty()) {
        if (!lengths.empty()) {
            throw framing_error(400, "the request has both Content-Length and Transfer-Encoding: send one of them");
        }
        if (codings.size() != 1 || lower(codings.front()) != "chunked") {
            std::string joined;
            for (const std::string& c : codings) joined += (joined.empty() ? "" : ", ") + c;
            throw ApiError(501, "invalid_request_error",
                           "Transfer-Encoding '" + joined + "' is not supported (only 'chunked')", {},
                           "unsupported_transfer_encoding");
        }
        framing.kind = BodyFraming::Kind::kChunked;
        return framing;
    }
    if (lengths.empty()) return framing;
    const std::string text = content_length_text(lengths);
    // More than 19 significant digits cannot fit in 64 bits and is above any limit anyway.
    if (text.size() > 19 || std::stoull(text) > max_body_bytes) {
        throw declared_body_too_large_error(text, max_body_bytes);
    }
    framing.kind = BodyFraming::Kind::kLength;
    framing.length = std::stoull(text);
    return framing;
}

void check_body_encoding(const httplib::Headers& headers) {
    const auto type = headers.find("Content-Type");
    if (type != headers.end() && lower(type->second).rfind("multipart/form-data", 0) == 0) {
        throw ApiError(415, "invalid_request_error",
                       "multipart/form-data bodies are not accepted: send the request as JSON "
                       "(Content-Type: application/json)",
                       {}, "unsupported_media_type");
    }
    const std::vector<std::string> codings = header_elements(headers, "Content-Encoding");
    if (codings.size() > 1) {
        throw ApiError(415, "invalid_request_error", "only one Content-Encoding is supported per request", {},
                       "unsupported_media_type");
    }
    for (const std::string& coding : codings) {
        const std::string c = lower(coding);
        if (c != "identity" && c != "gzip" && c != "deflate" && c != "br") {
            throw ApiError(415, "invalid_request_error",
                           "Content-Encoding '" + coding + "' is not supported (identity, gzip, deflate or br)", {},
                           "unsupported_media_type");
        }
    }
}

}  // namespace dsv4::server
