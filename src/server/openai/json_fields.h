// Typed reads of request JSON fields. Each getter returns nullopt when the field is absent or null (OpenAI clients send
// null for "not set") and throws a 400 ApiError naming the field when it has the wrong type or an impossible value.
// Integers may be written as integral floats (10.0), as pydantic accepts; anything outside the target range, and
// fractional values, are rejected before any conversion (no UB on huge or non-finite numbers).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace dsv4::server {

using Json = nlohmann::ordered_json;

// Parses a request body. Malformed JSON, a top level that is not an object, or nesting deeper than kMaxJsonDepth
// throw a 400 ApiError.
inline constexpr int kMaxJsonDepth = 64;
Json parse_request_json(std::string_view body);

// The nesting depth of JSON text ([ and { outside strings), computed without parsing.
int json_nesting_depth(std::string_view text);

// "messages[2].content" style paths for error messages.
std::string field_path(std::string_view parent, std::string_view key);
std::string index_path(std::string_view parent, size_t index);

std::optional<double> get_number(const Json& object, std::string_view key, std::string_view path);
std::optional<int64_t> get_int(const Json& object, std::string_view key, std::string_view path, int64_t min_value,
                               int64_t max_value);
std::optional<bool> get_bool(const Json& object, std::string_view key, std::string_view path);
std::optional<std::string> get_string(const Json& object, std::string_view key, std::string_view path);
// A field that must be an object / array when present.
const Json* get_object(const Json& object, std::string_view key, std::string_view path);
const Json* get_array(const Json& object, std::string_view key, std::string_view path);

// Converts a JSON value that must be an integer in [min_value, max_value].
int64_t to_int(const Json& value, std::string_view path, int64_t min_value, int64_t max_value);
// A JSON type name for error messages ("string", "array", ...).
std::string_view json_type_name(const Json& value);

}  // namespace dsv4::server
