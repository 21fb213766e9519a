// allOf as one merged schema, and the type analysis oneOf needs to prove its branches cannot overlap.
#include <algorithm>

#include "structured/json_schema_compiler.h"

namespace dsv4::structured::schema {
namespace {

bool is_lower_bound(std::string_view key) {
    return key == "minLength" || key == "minItems" || key == "minimum" || key == "exclusiveMinimum";
}
bool is_upper_bound(std::string_view key) {
    return key == "maxLength" || key == "maxItems" || key == "maximum" || key == "exclusiveMaximum";
}

Json all_of(const Json& a, const Json& b) {
    return Json::object({{"allOf", Json::array({a, b})}});
}

// Patterns of both sides, as the internal list "$dsv4_patterns" (a string must match every one).
void merge_patterns(Json& out, const Json& b) {
    Json patterns = Json::array();
    for (const Json* side : std::initializer_list<const Json*>{&out, &b}) {
        if (side->contains("pattern")) patterns.push_back(side->at("pattern"));
        if (side->contains("$dsv4_patterns")) {
            for (const Json& p : side->at("$dsv4_patterns")) patterns.push_back(p);
        }
    }
    out.erase("pattern");
    out["$dsv4_patterns"] = patterns;
}

// A side with additionalProperties other than true restricts the names the other side may add.
void check_additional(const Json& a, const Json& b, const std::string& path) {
    for (const auto& [x, y] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
        if (!x->contains("additionalProperties") || x->at("additionalProperties") == Json(true)) continue;
        if (!y->contains("properties")) continue;
        for (const auto& [name, unused] : y->at("properties").items()) {
            if (!x->contains("properties") || !x->at("properties").contains(name)) {
                schema_fail(path,
                            "'allOf' combining 'additionalProperties' with properties of another branch is not "
                            "supported");
            }
        }
    }
}

}  // namespace

const Json& SchemaCompiler::merge_all_of(const Json& schema, const std::string& path, int depth) {
    const Json& list = schema.at("allOf");
    if (!list.is_array() || list.empty()) schema_fail(path, "'allOf' must be a non-empty array");
    Json merged = schema;
    merged.erase("allOf");
    for (size_t i = 0; i < list.size(); ++i)
        merged = merge(merged, list[i], fmt::format("{}/allOf/{}", path, i), depth);
    return keep(std::move(merged));
}

Json SchemaCompiler::merge(const Json& a_in, const Json& b_in, const std::string& path, int depth) {
    if (depth > options_.max_depth) schema_fail(path, "'allOf' nests too deeply");
    if (a_in.is_boolean()) return a_in.get<bool>() ? b_in : Json(false);
    if (b_in.is_boolean()) return b_in.get<bool>() ? a_in : Json(false);
    if (!a_in.is_object() || !b_in.is_object()) schema_fail(path, "a schema must be an object or a boolean");
    // Resolve what sits on top of each side first: $ref and nested allOf.
    auto flatten = [&](const Json& s) -> Json {
        if (s.contains("$ref")) {
            Json rest = s;
            rest.erase("$ref");
            return merge(rest, resolve_ref(s, path), path, depth + 1);
        }
        if (s.contains("allOf")) return merge_all_of(s, path, depth + 1);
        return s;
    };
    Json out = flatten(a_in);
    const Json b = flatten(b_in);
    if (out.is_boolean() || b.is_boolean()) return merge(out, b, path, depth + 1);
    check_additional(out, b, path);
    for (const auto& [key, vb] : b.items()) {
        if (!out.contains(key)) {
            out[key] = vb;
            continue;
        }
        Json& va = out[key];
        if (va == vb || is_annotation(key) || key == "definitions" || key == "$defs") continue;
        if (key == "type") {
            const uint8_t both = type_set(out, path) & type_set(b, path);
            Json names = Json::array();
            for (const auto& [bit, name] : {std::pair{kNull, "null"},
                                            {kBoolean, "boolean"},
                                            {kString, "string"},
                                            {kArray, "array"},
                                            {kObject, "object"}}) {
                if (both & bit) names.push_back(name);
            }
            if ((both & kFraction) != 0)
                names.push_back("number");
            else if ((both & kInteger) != 0)
                names.push_back("integer");
            if (names.empty()) return Json(false);
            va = names;
        } else if (key == "required") {
            for (const Json& name : vb) {
                if (std::find(va.begin(), va.end(), name) == va.end()) va.push_back(name);
            }
        } else if (key == "properties") {
            for (const auto& [name, sub] : vb.items()) va[name] = va.contains(name) ? all_of(va[name], sub) : sub;
        } else if (key == "additionalProperties" || key == "items" || key == "additionalItems") {
            if (va.is_array() || vb.is_array())
                schema_fail(path, "'allOf' with tuple 'items' on both sides is not supported");
            va = merge(va, vb, path, depth + 1);
        } else if (is_lower_bound(key) || is_upper_bound(key)) {
            if (!va.is_number() || !vb.is_number()) schema_fail(path, fmt::format("'{}' must be a number", key));
            const bool take_b =
                is_lower_bound(key) ? vb.get<double>() > va.get<double>() : vb.get<double>() < va.get<double>();
            if (take_b) va = vb;
        } else if (key == "pattern" || key == "$dsv4_patterns") {
            merge_patterns(out, b);
        } else if (key == "enum") {
            Json kept = Json::array();
            for (const Json& v : va) {
                if (std::find(vb.begin(), vb.end(), v) != vb.end()) kept.push_back(v);
            }
            va = kept;
        } else if (key == "const") {
            return Json(false);  // two different constants
        } else {
            schema_fail(path, fmt::format("'allOf' cannot combine two different '{}' values", key));
        }
    }
    return out;
}

uint8_t SchemaCompiler::types_of(const Json& schema, int depth) {
    if (depth > options_.max_depth) return kAllTypes;
    if (schema.is_boolean()) return schema.get<bool>() ? kAllTypes : 0;
    if (!schema.is_object()) return kAllTypes;
    uint8_t types = kAllTypes;
    if (schema.contains("$ref")) types &= types_of(resolve_ref(schema, ""), depth + 1);
    if (schema.contains("allOf") && schema.at("allOf").is_array()) {
        for (const Json& s : schema.at("allOf")) types &= types_of(s, depth + 1);
    }
    for (const char* keyword : {"anyOf", "oneOf"}) {
        if (!schema.contains(keyword) || !schema.at(keyword).is_array()) continue;
        uint8_t any = 0;
        for (const Json& s : schema.at(keyword)) any |= types_of(s, depth + 1);
        types &= any;
    }
    if (schema.contains("const") || schema.contains("enum")) {
        uint8_t literal_types = 0;
        std::vector<Json> values;
        if (schema.contains("const")) values.push_back(schema.at("const"));
        if (schema.contains("enum") && schema.at("enum").is_array()) {
            for (const Json& v : schema.at("enum")) values.push_back(v);
        }
        for (const Json& v : values) {
            if (v.is_null()) literal_types |= kNull;
            if (v.is_boolean()) literal_types |= kBoolean;
            if (v.is_number())
                literal_types |= (v.is_number_integer() ||
                                  v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())))
                                     ? kInteger
                                     : kFraction;
            if (v.is_string()) literal_types |= kString;
            if (v.is_array()) literal_types |= kArray;
            if (v.is_object()) literal_types |= kObject;
        }
        types &= literal_types;
    }
    if (schema.contains("type"))
        types &= type_set(schema, "");
    else if (options_.strict)
        types &= type_set(schema, "");
    return types;
}

// Whether no value can match both schemas: different types, different constants, or objects whose shared required
// property has disjoint const / enum values (a discriminator).
bool SchemaCompiler::disjoint(const Json& a, const Json& b, int depth) {
    if ((types_of(a, depth) & types_of(b, depth)) == 0) return true;
    auto literals = [](const Json& s) -> std::optional<std::vector<Json>> {
        if (!s.is_object()) return std::nullopt;
        if (s.contains("const")) return std::vector<Json>{s.at("const")};
        if (s.contains("enum") && s.at("enum").is_array())
            return std::vector<Json>(s.at("enum").begin(), s.at("enum").end());
        return std::nullopt;
    };
    auto no_overlap = [](const std::vector<Json>& x, const std::vector<Json>& y) {
        return std::none_of(x.begin(), x.end(),
                            [&](const Json& v) { return std::find(y.begin(), y.end(), v) != y.end(); });
    };
    if (const auto la = literals(a), lb = literals(b); la && lb) return no_overlap(*la, *lb);
    if (!a.is_object() || !b.is_object() || !a.contains("properties") || !b.contains("properties")) return false;
    if (!a.contains("required") || !b.contains("required")) return false;
    for (const Json& name : a.at("required")) {
        if (!name.is_string() ||
            std::find(b.at("required").begin(), b.at("required").end(), name) == b.at("required").end())
            continue;
        const std::string key = name.get<std::string>();
        if (!a.at("properties").contains(key) || !b.at("properties").contains(key)) continue;
        const auto la = literals(a.at("properties").at(key));
        const auto lb = literals(b.at("properties").at(key));
        if (la && lb && no_overlap(*la, *lb)) return true;
    }
    return false;
}

}  // namespace dsv4::structured::schema
