// JSON Schema values: literals (const / enum), strings (length, pattern, format) and numbers (ranges).
#include <algorithm>
#include <cmath>

#include "structured/char_classes.h"
#include "structured/json_schema_compiler.h"
#include "structured/number_range.h"
#include "structured/regex.h"

namespace dsv4::structured::schema {
namespace {

// Full-match regexes of the supported formats (RFC 3339 date / time with leap years and leap seconds, RFC 4122
// uuid, dotted-quad IPv4, a practical e-mail address, RFC 1123 host names).
constexpr std::string_view kDate =
    R"((?:\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8])))"
    R"(|(?:\d{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29))";
constexpr std::string_view kTime =
    R"((?:[01]\d|2[0-3]):[0-5]\d:(?:[0-5]\d|60)(?:\.\d{1,9})?(?:[zZ]|[+-](?:[01]\d|2[0-3]):[0-5]\d))";
constexpr std::string_view kUuid = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
constexpr std::string_view kIpv4 = R"((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3})";
constexpr std::string_view kHostLabel = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
constexpr std::string_view kEmailLocal = R"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*)";

std::string format_regex(const std::string& format, const std::string& path) {
    const std::string label(kHostLabel);
    if (format == "date") return std::string(kDate);
    if (format == "time") return std::string(kTime);
    if (format == "date-time") return fmt::format("{}[tT]{}", kDate, kTime);
    if (format == "uuid") return std::string(kUuid);
    if (format == "ipv4") return std::string(kIpv4);
    if (format == "hostname") return fmt::format("{}(?:\\.{})*", label, label);
    if (format == "email") return fmt::format("{}@{}(?:\\.{})+", kEmailLocal, label, label);
    schema_fail(path, fmt::format("the format '{}' is not supported (supported: date, time, date-time, uuid, ipv4, "
                                  "hostname, email)",
                                  format));
}

int64_t non_negative(const Json& schema, const char* key, const std::string& path) {
    const Json& v = schema.at(key);
    const bool integral =
        v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    if (!v.is_number() || !integral || v.get<double>() < 0 || v.get<double>() > 1e9)
        schema_fail(path, fmt::format("'{}' must be a non-negative integer", key));
    return static_cast<int64_t>(v.get<double>());
}

std::string number_text(const Json& v) {
    if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    return fmt::format("{}", v.get<double>());
}

Decimal decimal_of(const Json& v, const char* key, const std::string& path) {
    if (!v.is_number()) schema_fail(path, fmt::format("'{}' must be a number", key));
    const std::optional<Decimal> d = parse_decimal(number_text(v));
    if (!d) schema_fail(path, fmt::format("'{}' is out of the supported range", key));
    return *d;
}

// a < b for decimals.
bool less(const Decimal& a, const Decimal& b) {
    if (a.negative != b.negative) return a.negative;
    auto magnitude_less = [](const Decimal& x, const Decimal& y) {
        if (x.integer.size() != y.integer.size()) return x.integer.size() < y.integer.size();
        if (x.integer != y.integer) return x.integer < y.integer;
        return x.fraction < y.fraction;  // no trailing zeros: lexicographic order is numeric order
    };
    return a.negative ? magnitude_less(b, a) : magnitude_less(a, b);
}

bool is_integral(const Json& v) {
    if (v.is_number_integer()) return true;
    const double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9007199254740992.0;
}

}  // namespace

int32_t SchemaCompiler::literal(const Json& value, int depth) {
    if (depth > options_.max_depth) schema_fail("", "a const / enum value nests too deeply");
    if (value.is_number()) {
        if (!is_integral(value)) return g_.literal(value.dump());
        const std::string text = value.is_number_integer() ? value.dump() : fmt::format("{:.0f}", value.get<double>());
        if (options_.strict) return g_.literal(text);
        return g_.seq({g_.literal(text), g_.optional(g_.seq({g_.literal("."), g_.plus(g_.literal("0"))}))});
    }
    if (value.is_array()) {
        std::vector<int32_t> parts{g_.literal("["), ws()};
        for (size_t i = 0; i < value.size(); ++i) {
            if (i > 0) parts.push_back(separator());
            parts.push_back(literal(value[i], depth + 1));
        }
        parts.push_back(ws());
        parts.push_back(g_.literal("]"));
        return g_.seq(std::move(parts));
    }
    if (value.is_object()) {
        std::vector<std::string> keys;
        for (const auto& [key, unused] : value.items()) keys.push_back(key);
        std::sort(keys.begin(), keys.end());  // a canonical order: the same object always gives the same text
        std::vector<int32_t> parts{g_.literal("{"), ws()};
        for (size_t i = 0; i < keys.size(); ++i) {
            if (i > 0) parts.push_back(separator());
            parts.push_back(g_.literal(Json(keys[i]).dump()));
            parts.push_back(g_.seq({ws(), g_.literal(":"), ws()}));
            parts.push_back(literal(value.at(keys[i]), depth + 1));
        }
        parts.push_back(ws());
        parts.push_back(g_.literal("}"));
        return g_.seq(std::move(parts));
    }
    return g_.literal(value.dump());  // null, booleans, strings (escaped as JSON writes them)
}

int32_t SchemaCompiler::enum_value(const Json& schema, const std::string& path, int depth) {
    for (const auto& [key, unused] : schema.items()) {
        if (key != "enum" && key != "const" && key != "type" && is_assertion(key))
            schema_fail(path, fmt::format("'enum' / 'const' combined with '{}' is not supported", key));
    }
    std::vector<Json> values;
    if (schema.contains("enum")) {
        const Json& list = schema.at("enum");
        if (!list.is_array()) schema_fail(path, "'enum' must be an array");
        if (static_cast<int>(list.size()) > options_.max_enum_values)
            schema_fail(path, fmt::format("'enum' has {} values; at most {} are supported", list.size(),
                                          options_.max_enum_values));
        values.assign(list.begin(), list.end());
    }
    if (schema.contains("const")) {
        const Json& c = schema.at("const");
        if (schema.contains("enum")) {
            const bool listed = std::find(values.begin(), values.end(), c) != values.end();
            values.clear();
            if (listed) values.push_back(c);
        } else {
            values.push_back(c);
        }
    }
    const uint8_t types = schema.contains("type") ? type_set(schema, path) : static_cast<uint8_t>(kAllTypes);
    std::vector<int32_t> alternatives;
    for (const Json& v : values) {
        if (types_of(Json::object({{"const", v}}), 0) & types) alternatives.push_back(literal(v, depth + 1));
    }
    if (alternatives.empty()) return nothing();
    return g_.alt(std::move(alternatives));
}

int32_t SchemaCompiler::string_value(const Json& schema, const std::string& path) {
    std::vector<int32_t> bodies;
    if (schema.contains("minLength") || schema.contains("maxLength")) {
        const int64_t min = schema.contains("minLength") ? non_negative(schema, "minLength", path) : 0;
        const int64_t max = schema.contains("maxLength") ? non_negative(schema, "maxLength", path) : -1;
        if (max >= 0 && max < min) return nothing();
        if (min > g_.limits().max_repeat || max > g_.limits().max_repeat)
            schema_fail(path, fmt::format("string lengths above {} are not supported", g_.limits().max_repeat));
        bodies.push_back(g_.repeat(any_string_char(), static_cast<int32_t>(min), static_cast<int32_t>(max)));
    }
    std::vector<std::string> patterns;
    if (schema.contains("pattern")) {
        if (!schema.at("pattern").is_string()) schema_fail(path, "'pattern' must be a string");
        patterns.push_back(schema.at("pattern").get<std::string>());
    }
    if (schema.contains("$dsv4_patterns")) {
        for (const Json& p : schema.at("$dsv4_patterns")) patterns.push_back(p.get<std::string>());
    }
    for (const std::string& p : patterns) bodies.push_back(compile_regex(g_, p, {RegexText::kJsonString, true}));
    if (schema.contains("format")) {
        if (!schema.at("format").is_string()) schema_fail(path, "'format' must be a string");
        const std::string regex = format_regex(schema.at("format").get<std::string>(), path);
        bodies.push_back(compile_regex(g_, regex, {RegexText::kJsonString, false}));
    }
    if (options_.exclude_markup_bar && !patterns.empty()) bodies.push_back(g_.star(any_string_char()));
    int32_t body = bodies.empty() ? g_.star(any_string_char()) : bodies[0];
    for (size_t i = 1; i < bodies.size(); ++i) body = g_.intersect(body, bodies[i]);
    return g_.seq({g_.literal("\""), body, g_.literal("\"")});
}

int32_t SchemaCompiler::raw_string_value(const Json& schema, const std::string& path) {
    const int32_t raw_char = utf8_chars(g_, CodepointSet::single(kMarkupBar).complement());
    if (schema.contains("enum") || schema.contains("const")) {
        std::vector<int32_t> alternatives;
        std::vector<Json> values;
        if (schema.contains("enum") && schema.at("enum").is_array())
            values.assign(schema.at("enum").begin(), schema.at("enum").end());
        if (schema.contains("const")) values.push_back(schema.at("const"));
        for (const Json& v : values) {
            if (v.is_string() && v.get<std::string>().find("\xEF\xBD\x9C") == std::string::npos)
                alternatives.push_back(g_.literal(v.get<std::string>()));
        }
        return alternatives.empty() ? nothing() : g_.alt(std::move(alternatives));
    }
    std::vector<int32_t> bodies{g_.star(raw_char)};
    if (schema.contains("minLength") || schema.contains("maxLength")) {
        const int64_t min = schema.contains("minLength") ? non_negative(schema, "minLength", path) : 0;
        const int64_t max = schema.contains("maxLength") ? non_negative(schema, "maxLength", path) : -1;
        if ((max >= 0 && max < min) || min > g_.limits().max_repeat || max > g_.limits().max_repeat) return nothing();
        bodies[0] = g_.repeat(raw_char, static_cast<int32_t>(min), static_cast<int32_t>(max));
    }
    if (schema.contains("pattern") && schema.at("pattern").is_string())
        bodies.push_back(compile_regex(g_, schema.at("pattern").get<std::string>(), {RegexText::kRaw, true}));
    if (schema.contains("format") && schema.at("format").is_string())
        bodies.push_back(
            compile_regex(g_, format_regex(schema.at("format").get<std::string>(), path), {RegexText::kRaw, false}));
    int32_t body = bodies[0];
    for (size_t i = 1; i < bodies.size(); ++i) body = g_.intersect(body, bodies[i]);
    return body;
}

int32_t SchemaCompiler::number_value(const Json& schema, const std::string& path, bool integer) {
    NumberRange range;
    auto lower = [&](const Decimal& d, bool exclusive) {
        if (!range.min || less(*range.min, d) || (!less(d, *range.min) && exclusive)) {
            range.min = d;
            range.min_exclusive = exclusive;
        }
    };
    auto upper = [&](const Decimal& d, bool exclusive) {
        if (!range.max || less(d, *range.max) || (!less(*range.max, d) && exclusive)) {
            range.max = d;
            range.max_exclusive = exclusive;
        }
    };
    // Draft 4 spells exclusive bounds as booleans next to minimum / maximum.
    const bool min_flag = schema.contains("exclusiveMinimum") && schema.at("exclusiveMinimum").is_boolean() &&
                          schema.at("exclusiveMinimum").get<bool>();
    const bool max_flag = schema.contains("exclusiveMaximum") && schema.at("exclusiveMaximum").is_boolean() &&
                          schema.at("exclusiveMaximum").get<bool>();
    if (schema.contains("minimum")) lower(decimal_of(schema.at("minimum"), "minimum", path), min_flag);
    if (schema.contains("maximum")) upper(decimal_of(schema.at("maximum"), "maximum", path), max_flag);
    if (schema.contains("exclusiveMinimum") && !schema.at("exclusiveMinimum").is_boolean())
        lower(decimal_of(schema.at("exclusiveMinimum"), "exclusiveMinimum", path), true);
    if (schema.contains("exclusiveMaximum") && !schema.at("exclusiveMaximum").is_boolean())
        upper(decimal_of(schema.at("exclusiveMaximum"), "exclusiveMaximum", path), true);
    NumberSyntax syntax;
    syntax.integer = integer;
    syntax.zero_fraction = !options_.strict;
    return number_expr(g_, syntax, range);
}

}  // namespace dsv4::structured::schema
