// JSON Schema objects and arrays. Objects list their properties in schema order, each optional one skippable, then
// the additional properties; every suffix of the property list is a rule, so the grammar stays linear in the
// number of properties (the calls at the end of a rule are tail calls and push no frame).
#include <algorithm>
#include <array>
#include <functional>

#include "structured/json_schema_compiler.h"

namespace dsv4::structured::schema {
namespace {

const Json kTrueSchema = true;

struct Property {
    std::string name;
    const Json* schema = nullptr;
    bool required = false;
};

int32_t bound(const Json& schema, const char* key, const std::string& path, int32_t fallback, int32_t limit) {
    if (!schema.contains(key)) return fallback;
    const Json& v = schema.at(key);
    if (!v.is_number_integer() &&
        !(v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))))
        schema_fail(path, fmt::format("'{}' must be a non-negative integer", key));
    const double d = v.get<double>();
    if (d < 0) schema_fail(path, fmt::format("'{}' must be a non-negative integer", key));
    if (d > limit) schema_fail(path, fmt::format("'{}' above {} is not supported", key, limit));
    return static_cast<int32_t>(d);
}

std::vector<Property> collect_properties(const Json& schema, const std::string& path, bool& impossible,
                                         std::vector<std::string>& all_names) {
    std::vector<std::string> required;
    if (schema.contains("required")) {
        const Json& list = schema.at("required");
        if (!list.is_array()) schema_fail(path, "'required' must be an array of strings");
        for (const Json& name : list) {
            if (!name.is_string()) schema_fail(path, "'required' must be an array of strings");
            if (std::find(required.begin(), required.end(), name.get<std::string>()) == required.end())
                required.push_back(name.get<std::string>());
        }
    }
    std::vector<Property> out;
    if (schema.contains("properties")) {
        const Json& properties = schema.at("properties");
        if (!properties.is_object()) schema_fail(path, "'properties' must be an object");
        for (const auto& [name, sub] : properties.items()) {
            all_names.push_back(name);
            const bool is_required = std::find(required.begin(), required.end(), name) != required.end();
            if (sub.is_boolean() && !sub.get<bool>()) {
                impossible = impossible || is_required;  // a required property that no value satisfies
                continue;
            }
            out.push_back({name, &sub, is_required});
        }
    }
    for (const std::string& name : required) {
        const bool listed = schema.contains("properties") && schema.at("properties").contains(name);
        if (!listed) out.push_back({name, &kTrueSchema, true});
    }
    return out;
}

}  // namespace

int32_t SchemaCompiler::object_value(const Json& schema, const std::string& path, int depth) {
    bool impossible = false;
    std::vector<std::string> listed;  // every name in "properties": never an additional property
    const std::vector<Property> properties = collect_properties(schema, path, impossible, listed);
    if (impossible) return nothing();
    // Strict (generation) mode writes only the listed properties; an object schema that lists none is free-form.
    const bool lists = schema.contains("properties") || schema.contains("required");
    const Json* additional = options_.strict && lists ? nullptr : &kTrueSchema;
    if (schema.contains("additionalProperties")) {
        const Json& a = schema.at("additionalProperties");
        additional = a.is_boolean() && !a.get<bool>() ? nullptr : &a;
    }
    const auto n = properties.size();
    // suffix[i][first]: the members from property i on; `first`: nothing has been written yet (no comma).
    std::vector<std::array<int32_t, 2>> suffix(n + 1);
    for (size_t i = 0; i <= n; ++i) {
        for (int first = 0; first < 2; ++first)
            suffix[i][static_cast<size_t>(first)] =
                g_.add_rule(fmt::format("{} members {}{}", path, i, first ? "" : ","));
    }
    for (int first = 0; first < 2; ++first) {
        int32_t extras = g_.empty();
        if (additional != nullptr) {
            std::vector<int32_t> names;
            for (const Property& p : properties) listed.push_back(p.name);
            for (const std::string& name : listed) names.push_back(g_.literal(Json(name).dump()));
            int32_t key = g_.seq({g_.literal("\""), g_.star(any_string_char()), g_.literal("\"")});
            if (!names.empty()) key = g_.difference(key, g_.alt(std::move(names)));
            const int32_t member = g_.seq(
                {key, ws(), g_.literal(":"), ws(), value(*additional, path + "/additionalProperties", depth + 1)});
            extras = first ? g_.optional(g_.seq({member, g_.star(g_.seq({separator(), member}))}))
                           : g_.star(g_.seq({separator(), member}));
        }
        g_.define(suffix[n][static_cast<size_t>(first)], extras);
    }
    for (size_t i = n; i-- > 0;) {
        const Property& p = properties[i];
        const int32_t member = g_.seq({g_.literal(Json(p.name).dump()), ws(), g_.literal(":"), ws(),
                                       value(*p.schema, path + "/properties/" + p.name, depth + 1)});
        for (int first = 0; first < 2; ++first) {
            const int32_t with = g_.seq({first ? g_.empty() : separator(), member, g_.ref(suffix[i + 1][0])});
            const int32_t body = p.required ? with : g_.alt({with, g_.ref(suffix[i + 1][static_cast<size_t>(first)])});
            g_.define(suffix[i][static_cast<size_t>(first)], body);
        }
    }
    const int32_t rule = g_.add_rule(path + " object");
    g_.define(rule, g_.seq({g_.literal("{"), ws(), g_.ref(suffix[0][1]), ws(), g_.literal("}")}));
    return g_.ref(rule);
}

int32_t SchemaCompiler::array_value(const Json& schema, const std::string& path, int depth) {
    std::vector<const Json*> tuple;
    const Json* rest = nullptr;
    bool rest_given = false;
    auto tuple_of = [&](const Json& list) {
        for (const Json& item : list) tuple.push_back(&item);
    };
    if (schema.contains("prefixItems")) {
        if (!schema.at("prefixItems").is_array()) schema_fail(path, "'prefixItems' must be an array");
        tuple_of(schema.at("prefixItems"));
        if (schema.contains("items")) {
            rest = &schema.at("items");
            rest_given = true;
        }
    } else if (schema.contains("items") && schema.at("items").is_array()) {
        tuple_of(schema.at("items"));
        if (schema.contains("additionalItems")) {
            rest = &schema.at("additionalItems");
            rest_given = true;
        }
    } else if (schema.contains("items")) {
        rest = &schema.at("items");
        rest_given = true;
    }
    if (!rest_given) rest = tuple.empty() || !options_.strict ? &kTrueSchema : nullptr;
    if (rest != nullptr && rest->is_boolean() && !rest->get<bool>()) rest = nullptr;
    const int32_t limit = g_.limits().max_repeat;
    const int32_t min = bound(schema, "minItems", path, 0, limit);
    int32_t max = bound(schema, "maxItems", path, -1, limit);
    for (size_t j = 0; j < tuple.size(); ++j) {
        if (tuple[j]->is_boolean() && !tuple[j]->get<bool>()) {  // no value fits: the array ends before it
            max = max < 0 ? static_cast<int32_t>(j) : std::min(max, static_cast<int32_t>(j));
            tuple.resize(j);
            rest = nullptr;
            break;
        }
    }
    if (rest == nullptr)
        max = max < 0 ? static_cast<int32_t>(tuple.size()) : std::min(max, static_cast<int32_t>(tuple.size()));
    if (max >= 0 && max < min) return nothing();
    int32_t rest_value = -1;
    if (rest != nullptr && (max < 0 || max > static_cast<int32_t>(tuple.size()))) {
        rest_value = value(*rest, path + "/items", depth + 1);
        if (max > static_cast<int32_t>(tuple.size()) + 16) {  // repeated many times: one call instead of copies
            const int32_t item_rule = g_.add_rule(path + " item");
            g_.define(item_rule, rest_value);
            rest_value = g_.ref(item_rule);
        }
    }
    // Elements j.. (1-based) after j - 1 were written.
    std::function<int32_t(int32_t)> tail = [&](int32_t j) -> int32_t {
        if (max >= 0 && j > max) return g_.empty();
        const auto k = static_cast<int32_t>(tuple.size());
        if (j <= k) {
            const int32_t element =
                value(*tuple[static_cast<size_t>(j - 1)], fmt::format("{}/items/{}", path, j - 1), depth + 1);
            const int32_t part = g_.seq({j > 1 ? separator() : g_.empty(), element, tail(j + 1)});
            return j <= min ? part : g_.optional(part);
        }
        if (rest_value < 0) return g_.empty();
        const int32_t remaining_min = std::max(0, min - (j - 1));
        const int32_t remaining_max = max < 0 ? -1 : max - (j - 1);
        const int32_t more = g_.seq({separator(), rest_value});
        if (j > 1) return g_.repeat(more, remaining_min, remaining_max);
        const int32_t items = g_.seq(
            {rest_value, g_.repeat(more, std::max(0, remaining_min - 1), remaining_max < 0 ? -1 : remaining_max - 1)});
        return remaining_min >= 1 ? items : g_.optional(items);
    };
    const int32_t rule = g_.add_rule(path + " array");
    g_.define(rule, g_.seq({g_.literal("["), ws(), tail(1), ws(), g_.literal("]")}));
    return g_.ref(rule);
}

}  // namespace dsv4::structured::schema
