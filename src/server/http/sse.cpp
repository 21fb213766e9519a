#include "server/http/sse.h"

#include <fmt/format.h>

#include <cmath>

#include "tokenizer/chat_json.h"

namespace dsv4::server {

std::string sse_event(std::string_view json) {
    std::string event;
    event.reserve(json.size() + 8);
    event += "data: ";
    event += json;
    event += "\n\n";
    return event;
}

void append_json_string(std::string& out, std::string_view text) {
    out += '"';
    append_json_escaped(out, text);
    out += '"';
}

void append_json_float(std::string& out, float value) {
    if (!std::isfinite(value)) {
        out += "-9999.0";
        return;
    }
    fmt::format_to(std::back_inserter(out), "{}", value);
}

void append_json_byte_array(std::string& out, std::string_view bytes) {
    out += '[';
    for (size_t i = 0; i < bytes.size(); ++i) {
        if (i > 0) out += ',';
        fmt::format_to(std::back_inserter(out), "{}", static_cast<unsigned>(static_cast<unsigned char>(bytes[i])));
    }
    out += ']';
}

}  // namespace dsv4::server
