#include "tokenizer/chat_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace dsv4 {
namespace {

void append_python_json(std::string& out, const nlohmann::ordered_json& value) {
    using Type = nlohmann::ordered_json::value_t;
    switch (value.type()) {
        case Type::null:
        case Type::discarded:
            out += "null";
            return;
        case Type::boolean:
            out += value.get<bool>() ? "true" : "false";
            return;
        case Type::number_integer:
            out += std::to_string(value.get<std::int64_t>());
            return;
        case Type::number_unsigned:
            out += std::to_string(value.get<std::uint64_t>());
            return;
        case Type::number_float:
            out += python_float_repr(value.get<double>());
            return;
        case Type::string:
            append_python_json_string(out, value.get_ref<const std::string&>());
            return;
        case Type::array: {
            out += '[';
            bool first = true;
            for (const auto& item : value) {
                if (!first) out += ", ";
                first = false;
                append_python_json(out, item);
            }
            out += ']';
            return;
        }
        case Type::object: {
            out += '{';
            bool first = true;
            for (const auto& [key, item] : value.items()) {
                if (!first) out += ", ";
                first = false;
                append_python_json_string(out, key);
                out += ": ";
                append_python_json(out, item);
            }
            out += '}';
            return;
        }
        case Type::binary:
            fail("a binary value cannot be written as JSON text");
    }
    fail("unknown JSON value type");
}

}  // namespace

std::string to_python_json(const nlohmann::ordered_json& value) {
    std::string out;
    append_python_json(out, value);
    return out;
}

void append_json_escaped(std::string& out, std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    for (char c : text) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default: {
                const auto byte = static_cast<unsigned char>(c);
                if (byte < 0x20) {
                    out += "\\u00";
                    out += kHex[byte >> 4];
                    out += kHex[byte & 0xF];
                } else {
                    out += c;
                }
            }
        }
    }
}

void append_python_json_string(std::string& out, std::string_view text) {
    out += '"';
    append_json_escaped(out, text);
    out += '"';
}

std::string python_float_repr(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";

    // Shortest round-trip digits in scientific form, e.g. "-1.2345e+02".
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
    std::string_view text(buffer, static_cast<std::size_t>(result.ptr - buffer));
    std::string sign;
    if (!text.empty() && text.front() == '-') {
        sign = "-";
        text.remove_prefix(1);
    }
    const std::size_t e_pos = text.find('e');
    std::string digits;
    for (char c : text.substr(0, e_pos)) {
        if (c != '.') digits += c;
    }
    const int exponent = std::atoi(std::string(text.substr(e_pos + 1)).c_str());
    const int decimal_point = exponent + 1;  // value = 0.DIGITS * 10^decimal_point
    const int n_digits = static_cast<int>(digits.size());

    std::string out = sign;
    if (decimal_point > -4 && decimal_point <= 16) {
        if (decimal_point <= 0) {
            out += "0." + std::string(static_cast<std::size_t>(-decimal_point), '0') + digits;
        } else if (decimal_point >= n_digits) {
            out += digits + std::string(static_cast<std::size_t>(decimal_point - n_digits), '0') + ".0";
        } else {
            out += digits.substr(0, static_cast<std::size_t>(decimal_point)) + "." +
                   digits.substr(static_cast<std::size_t>(decimal_point));
        }
        return out;
    }
    out += digits.substr(0, 1);
    if (n_digits > 1) out += "." + digits.substr(1);
    const int shown_exponent = decimal_point - 1;
    out += shown_exponent < 0 ? "e-" : "e+";
    const int magnitude = std::abs(shown_exponent);
    if (magnitude < 10) out += '0';
    out += std::to_string(magnitude);
    return out;
}

}  // namespace dsv4
