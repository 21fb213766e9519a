// Strict JSON parsing for loader inputs (safetensors headers, the shard index): duplicate keys and absurd nesting
// are errors, because nlohmann would silently keep the last of two equal keys.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace dsv4 {

// Parses text; on failure throws dsv4::Error "<source>: <what> is not valid JSON: ..." (ill-formed UTF-8 inside
// strings is a parse error too). max_depth bounds the nesting of objects and arrays.
nlohmann::json parse_json_strict(std::string_view text, std::string_view source, std::string_view what,
                                 int max_depth = 8);

}  // namespace dsv4
