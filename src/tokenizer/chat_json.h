// JSON text in the exact style of Python's json.dumps(value, ensure_ascii=False), which DeepSeek's chat encoder uses
// for tool schemas, tool-call argument values and response formats: separators ", " and ": ", object keys in their
// original order (pass nlohmann::ordered_json), non-ASCII characters written as-is, floats written like Python's
// repr(float). nlohmann's own dump() differs (no spaces; keys sorted unless ordered_json).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace dsv4 {

// json.dumps(value, ensure_ascii=False). Throws dsv4::Error for binary values (not representable in JSON text).
std::string to_python_json(const nlohmann::ordered_json& value);

// Appends json.dumps(text, ensure_ascii=False) for a string: quotes included.
void append_python_json_string(std::string& out, std::string_view text);

// Appends the escaped body of a JSON string (no quotes): \" \\ \b \f \n \r \t, other bytes < 0x20 as \u00xx;
// bytes >= 0x20 (including non-ASCII UTF-8) unchanged. Escaping is per byte, so it can be applied to any split of a
// text and the pieces concatenate to the escape of the whole.
void append_json_escaped(std::string& out, std::string_view text);

// Python's repr() of a float: shortest round-trip digits; fixed notation when the decimal exponent is in [-4, 16),
// with ".0" for integral values; otherwise d.ddde+XX. Non-finite values give NaN, Infinity, -Infinity.
std::string python_float_repr(double value);

}  // namespace dsv4
