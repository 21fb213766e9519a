#include "server/openai/json_fields.h"

#include <cmath>

#include "server/http/api_error.h"

namespace dsv4::server {
namespace {

const Json* find_field(const Json& object, std::string_view key) {
    if (!object.contains(key)) return nullptr;
    const Json& value = object.at(std::string(key));
    return value.is_null() ? nullptr : &value;
}

}  // namespace

int json_nesting_depth(std::string_view text) {
    int depth = 0;
    int max_depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (char c : text) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            max_depth = std::max(max_depth, ++depth);
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return max_depth;
}

Json parse_request_json(std::string_view body) {
    if (json_nesting_depth(body) > kMaxJsonDepth) {
        fail_request("", "The request body nests JSON deeper than {} levels", kMaxJsonDepth);
    }
    Json value = Json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) {
        // Re-parse for the position and reason; the first pass never throws.
        try {
            [[maybe_unused]] const Json again = Json::parse(body);
        } catch (const nlohmann::json::exception& e) {
            fail_request("", "The request body is not valid JSON: {}", e.what());
        }
        fail_request("", "The request body is not valid JSON");
    }
    if (!value.is_object()) fail_request("", "The request body must be a JSON object, not {}", json_type_name(value));
    return value;
}

std::string field_path(std::string_view parent, std::string_view key) {
    if (parent.empty()) return std::string(key);
    return fmt::format("{}.{}", parent, key);
}

std::string index_path(std::string_view parent, size_t index) {
    return fmt::format("{}[{}]", parent, index);
}

std::string_view json_type_name(const Json& value) {
    switch (value.type()) {
        case Json::value_t::null:
            return "null";
        case Json::value_t::object:
            return "an object";
        case Json::value_t::array:
            return "an array";
        case Json::value_t::string:
            return "a string";
        case Json::value_t::boolean:
            return "a boolean";
        case Json::value_t::number_integer:
        case Json::value_t::number_unsigned:
        case Json::value_t::number_float:
            return "a number";
        default:
            return "an unsupported value";
    }
}

int64_t to_int(const Json& value, std::string_view path, int64_t min_value, int64_t max_value) {
    if (value.is_number_unsigned()) {
        const uint64_t v = value.get<uint64_t>();
        if (v > static_cast<uint64_t>(max_value)) {
            fail_request(std::string(path), "'{}' must be an integer in [{}, {}] (got {})", path, min_value, max_value,
                         v);
        }
        const auto as_signed = static_cast<int64_t>(v);
        if (as_signed < min_value) {
            fail_request(std::string(path), "'{}' must be an integer in [{}, {}] (got {})", path, min_value, max_value,
                         v);
        }
        return as_signed;
    }
    if (value.is_number_integer()) {
        const int64_t v = value.get<int64_t>();
        if (v < min_value || v > max_value) {
            fail_request(std::string(path), "'{}' must be an integer in [{}, {}] (got {})", path, min_value, max_value,
                         v);
        }
        return v;
    }
    if (value.is_number_float()) {
        const double v = value.get<double>();
        // Written so that NaN and infinities fail; the bounds are exact for every int64 range used here (< 2^53).
        if (!(std::isfinite(v) && v == std::floor(v))) {
            fail_request(std::string(path), "'{}' must be an integer (got {})", path, v);
        }
        if (!(v >= static_cast<double>(min_value) && v <= static_cast<double>(max_value))) {
            fail_request(std::string(path), "'{}' must be an integer in [{}, {}] (got {})", path, min_value, max_value,
                         v);
        }
        return static_cast<int64_t>(v);
    }
    fail_request(std::string(path), "'{}' must be an integer, not {}", path, json_type_name(value));
}

std::optional<double> get_number(const Json& object, std::string_view key, std::string_view path) {
    const Json* value = find_field(object, key);
    if (value == nullptr) return std::nullopt;
    const std::string full = field_path(path, key);
    if (!value->is_number()) fail_request(full, "'{}' must be a number, not {}", full, json_type_name(*value));
    const double v = value->get<double>();
    if (!std::isfinite(v)) fail_request(full, "'{}' must be a finite number (got {})", full, v);
    return v;
}

std::optional<int64_t> get_int(const Json& object, std::string_view key, std::string_view path, int64_t min_value,
                               int64_t max_value) {
    const Json* value = find_field(object, key);
    if (value == nullptr) return std::nullopt;
    return to_int(*value, field_path(path, key), min_value, max_value);
}

std::optional<bool> get_bool(const Json& object, std::string_view key, std::string_view path) {
    const Json* value = find_field(object, key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_boolean()) {
        const std::string full = field_path(path, key);
        fail_request(full, "'{}' must be a boolean, not {}", full, json_type_name(*value));
    }
    return value->get<bool>();
}

std::optional<std::string> get_string(const Json& object, std::string_view key, std::string_view path) {
    const Json* value = find_field(object, key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_string()) {
        const std::string full = field_path(path, key);
        fail_request(full, "'{}' must be a string, not {}", full, json_type_name(*value));
    }
    return value->get<std::string>();
}

const Json* get_object(const Json& object, std::string_view key, std::string_view path) {
    const Json* value = find_field(object, key);
    if (value != nullptr && !value->is_object()) {
        const std::string full = field_path(path, key);
        fail_request(full, "'{}' must be an object, not {}", full, json_type_name(*value));
    }
    return value;
}

const Json* get_array(const Json& object, std::string_view key, std::string_view path) {
    const Json* value = find_field(object, key);
    if (value != nullptr && !value->is_array()) {
        const std::string full = field_path(path, key);
        fail_request(full, "'{}' must be an array, not {}", full, json_type_name(*value));
    }
    return value;
}

}  // namespace dsv4::server
