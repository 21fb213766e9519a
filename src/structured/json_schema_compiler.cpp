// The JSON Schema compiler's dispatch: keyword checks, $ref, allOf / anyOf / oneOf, enum, and the per-type values.
#include "structured/json_schema_compiler.h"

#include <algorithm>
#include <array>

#include "structured/char_classes.h"
#include "structured/number_range.h"

namespace dsv4::structured {
namespace schema {
namespace {

constexpr std::array<std::string_view, 13> kAnnotations = {
    "title",     "description", "default",          "examples",        "$comment",      "$schema", "readOnly",
    "writeOnly", "deprecated",  "contentMediaType", "contentEncoding", "contentSchema", "$anchor"};

constexpr std::array<std::string_view, 25> kHandled = {"type",
                                                       "enum",
                                                       "const",
                                                       "properties",
                                                       "required",
                                                       "additionalProperties",
                                                       "items",
                                                       "prefixItems",
                                                       "additionalItems",
                                                       "minItems",
                                                       "maxItems",
                                                       "minLength",
                                                       "maxLength",
                                                       "pattern",
                                                       "format",
                                                       "minimum",
                                                       "maximum",
                                                       "exclusiveMinimum",
                                                       "exclusiveMaximum",
                                                       "anyOf",
                                                       "oneOf",
                                                       "allOf",
                                                       "$ref",
                                                       "definitions",
                                                       "$defs"};

constexpr std::array<std::string_view, 23> kUnsupported = {"not",
                                                           "if",
                                                           "then",
                                                           "else",
                                                           "dependencies",
                                                           "dependentRequired",
                                                           "dependentSchemas",
                                                           "patternProperties",
                                                           "propertyNames",
                                                           "minProperties",
                                                           "maxProperties",
                                                           "uniqueItems",
                                                           "contains",
                                                           "minContains",
                                                           "maxContains",
                                                           "multipleOf",
                                                           "unevaluatedProperties",
                                                           "unevaluatedItems",
                                                           "$dynamicRef",
                                                           "$dynamicAnchor",
                                                           "$recursiveRef",
                                                           "$recursiveAnchor",
                                                           "$id"};

template <size_t N>
bool contains(const std::array<std::string_view, N>& list, std::string_view key) {
    return std::find(list.begin(), list.end(), key) != list.end();
}

// "#/definitions/a~1b" -> the pointer's tokens, percent-decoded and ~ unescaped.
std::vector<std::string> pointer_tokens(const std::string& ref, const std::string& path) {
    std::string decoded;
    for (size_t i = 1; i < ref.size(); ++i) {
        if (ref[i] == '%' && i + 2 < ref.size() && std::isxdigit(static_cast<unsigned char>(ref[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(ref[i + 2]))) {
            decoded += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
            i += 2;
        } else {
            decoded += ref[i];
        }
    }
    std::vector<std::string> tokens;
    if (decoded.empty()) return tokens;
    if (decoded[0] != '/') schema_fail(path, fmt::format("'$ref' '{}' is not a JSON pointer (#/...)", ref));
    size_t start = 1;
    while (true) {
        const size_t end = decoded.find('/', start);
        std::string token = decoded.substr(start, end == std::string::npos ? std::string::npos : end - start);
        std::string unescaped;
        for (size_t i = 0; i < token.size(); ++i) {
            if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
                unescaped += token[i + 1] == '0' ? '~' : '/';
                ++i;
            } else {
                unescaped += token[i];
            }
        }
        tokens.push_back(std::move(unescaped));
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return tokens;
}

}  // namespace

void schema_fail(const std::string& path, const std::string& what) {
    grammar_fail("JSON schema at '{}': {}", path.empty() ? "#" : path, what);
}

bool is_annotation(std::string_view keyword) {
    return contains(kAnnotations, keyword);
}

bool is_assertion(std::string_view keyword) {
    return contains(kHandled, keyword) && keyword != "definitions" && keyword != "$defs";
}

SchemaCompiler::SchemaCompiler(Grammar& grammar, const Json& root, const JsonSchemaOptions& options)
    : g_(grammar), root_(root), options_(options) {}

const Json& SchemaCompiler::keep(Json schema) {
    kept_.push_back(std::move(schema));
    return kept_.back();
}

int32_t SchemaCompiler::ws() {
    if (ws_ < 0) {
        ByteSet space = ByteSet::single(' ');
        space.insert('\t');
        space.insert('\n');
        space.insert('\r');
        ws_ = options_.max_whitespace > 0 ? g_.repeat(g_.bytes(space), 0, options_.max_whitespace) : g_.empty();
    }
    return ws_;
}

int32_t SchemaCompiler::separator() {
    return g_.seq({ws(), g_.literal(","), ws()});
}

int32_t SchemaCompiler::any_string_char() {
    if (any_char_ < 0) {
        any_char_ =
            json_string_any_char(g_, options_.exclude_markup_bar ? CodepointSet::single(kMarkupBar) : CodepointSet{});
    }
    return any_char_;
}

void SchemaCompiler::check_keywords(const Json& schema, const std::string& path) {
    for (const auto& [key, value] : schema.items()) {
        if (!contains(kUnsupported, key)) continue;
        if (key == "uniqueItems" && value.is_boolean() && !value.get<bool>()) continue;
        if (key == "$id" && &schema == &root_) continue;
        schema_fail(path, fmt::format("the keyword '{}' is not supported", key));
    }
}

const Json& SchemaCompiler::resolve_ref(const Json& schema, const std::string& path) {
    const Json& ref = schema.at("$ref");
    if (!ref.is_string()) schema_fail(path, "'$ref' must be a string");
    const std::string text = ref.get<std::string>();
    if (text.empty() || text[0] != '#') {
        schema_fail(path,
                    fmt::format("'$ref' '{}' is not supported: only references inside the schema (#/...) are", text));
    }
    const Json* node = &root_;
    for (const std::string& token : pointer_tokens(text, path)) {
        if (node->is_object() && node->contains(token)) {
            node = &node->at(token);
        } else if (node->is_array() && !token.empty() &&
                   std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                   token.size() < 10 && std::stoul(token) < node->size()) {
            node = &node->at(std::stoul(token));
        } else {
            schema_fail(path, fmt::format("'$ref' '{}' does not resolve", text));
        }
    }
    return *node;
}

uint8_t SchemaCompiler::type_set(const Json& schema, const std::string& path) {
    auto bits_of = [&](const Json& name) -> uint8_t {
        if (!name.is_string()) schema_fail(path, "'type' must be a string or an array of strings");
        const std::string n = name.get<std::string>();
        if (n == "null") return kNull;
        if (n == "boolean") return kBoolean;
        if (n == "integer") return kInteger;
        if (n == "number") return kInteger | kFraction;
        if (n == "string") return kString;
        if (n == "array") return kArray;
        if (n == "object") return kObject;
        schema_fail(path, fmt::format("unknown type '{}'", n));
    };
    if (schema.contains("type")) {
        const Json& type = schema.at("type");
        if (!type.is_array()) return bits_of(type);
        uint8_t bits = 0;
        for (const Json& name : type) bits |= bits_of(name);
        return bits;
    }
    if (!options_.strict) return kAllTypes;
    uint8_t implied = 0;  // generation: the types the keywords talk about
    for (const auto& [key, unused] : schema.items()) {
        if (key == "properties" || key == "required" || key == "additionalProperties") implied |= kObject;
        if (key == "items" || key == "prefixItems" || key == "additionalItems" || key == "minItems" ||
            key == "maxItems")
            implied |= kArray;
        if (key == "minLength" || key == "maxLength" || key == "pattern" || key == "format") implied |= kString;
        if (key == "minimum" || key == "maximum" || key == "exclusiveMinimum" || key == "exclusiveMaximum")
            implied |= kInteger | kFraction;
    }
    return implied != 0 ? implied : static_cast<uint8_t>(kAllTypes);
}

int32_t SchemaCompiler::value(const Json& schema, const std::string& path, int depth) {
    if (depth > options_.max_depth) schema_fail(path, fmt::format("schemas nest deeper than {}", options_.max_depth));
    if (schema.is_boolean()) return schema.get<bool>() ? any_value() : nothing();
    if (!schema.is_object()) schema_fail(path, "a schema must be an object or a boolean");
    check_keywords(schema, path);
    if (schema.contains("$ref")) {
        const Json& target = resolve_ref(schema, path);
        const bool siblings = std::any_of(schema.items().begin(), schema.items().end(), [](const auto& item) {
            return item.key() != "$ref" && is_assertion(item.key());
        });
        if (options_.ref_siblings_ignored || !siblings) return ref_value(target, path, depth + 1);
        Json rest = schema;
        rest.erase("$ref");
        return value(keep(merge(rest, target, path, depth)), path, depth + 1);
    }
    if (schema.contains("allOf")) return value(merge_all_of(schema, path, depth), path, depth + 1);
    if (schema.contains("anyOf") || schema.contains("oneOf")) return union_value(schema, path, depth);
    if (schema.contains("enum") || schema.contains("const")) return enum_value(schema, path, depth);
    const bool free_form = std::none_of(schema.items().begin(), schema.items().end(),
                                        [](const auto& item) { return is_assertion(item.key()); });
    if (free_form) return any_value();  // {} and annotation-only schemas: one shared JSON value rule
    return typed_value(schema, path, depth);
}

// A $ref target becomes a rule of its own (once), so recursive schemas are recursive rules.
int32_t SchemaCompiler::ref_value(const Json& target, const std::string& path, int depth) {
    auto it = ref_rules_.find(&target);
    if (it != ref_rules_.end()) return g_.ref(it->second);
    const int32_t rule = g_.add_rule(fmt::format("$ref {}", path));
    ref_rules_.emplace(&target, rule);
    g_.define(rule, value(target, path, depth));
    return g_.ref(rule);
}

int32_t SchemaCompiler::union_value(const Json& schema, const std::string& path, int depth) {
    if (schema.contains("anyOf") && schema.contains("oneOf"))
        schema_fail(path, "'anyOf' together with 'oneOf' is not supported");
    const bool one_of = schema.contains("oneOf");
    const char* keyword = one_of ? "oneOf" : "anyOf";
    const Json& list = schema.at(keyword);
    if (!list.is_array() || list.empty()) schema_fail(path, fmt::format("'{}' must be a non-empty array", keyword));
    Json base = schema;
    base.erase(keyword);
    const bool has_base = std::any_of(base.items().begin(), base.items().end(),
                                      [](const auto& item) { return is_assertion(item.key()); });
    std::vector<const Json*> branches;
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string branch_path = fmt::format("{}/{}/{}", path, keyword, i);
        branches.push_back(has_base ? &keep(merge(base, list[i], branch_path, depth)) : &list[i]);
    }
    if (one_of) {
        for (size_t i = 0; i < branches.size(); ++i) {
            for (size_t j = i + 1; j < branches.size(); ++j) {
                if (!disjoint(*branches[i], *branches[j], depth)) {
                    schema_fail(path, fmt::format("'oneOf' branches {} and {} can match the same value; only oneOf "
                                                  "with branches of different types or distinct const / enum "
                                                  "discriminators is supported (use anyOf)",
                                                  i, j));
                }
            }
        }
    }
    std::vector<int32_t> alternatives;
    for (size_t i = 0; i < branches.size(); ++i)
        alternatives.push_back(value(*branches[i], fmt::format("{}/{}/{}", path, keyword, i), depth + 1));
    return g_.alt(std::move(alternatives));
}

int32_t SchemaCompiler::typed_value(const Json& schema, const std::string& path, int depth) {
    const uint8_t types = type_set(schema, path);
    std::vector<int32_t> alternatives;
    if (types & kNull) alternatives.push_back(g_.literal("null"));
    if (types & kBoolean) alternatives.push_back(g_.alt({g_.literal("true"), g_.literal("false")}));
    if (types & kFraction) {
        alternatives.push_back(number_value(schema, path, false));
    } else if (types & kInteger) {
        alternatives.push_back(number_value(schema, path, true));
    }
    if (types & kString) alternatives.push_back(string_value(schema, path));
    if (types & kArray) alternatives.push_back(array_value(schema, path, depth));
    if (types & kObject) alternatives.push_back(object_value(schema, path, depth));
    if (alternatives.empty()) return nothing();
    return g_.alt(std::move(alternatives));
}

// JSON mode / the schema {}: any JSON value, nesting bounded by the matcher's stack depth.
int32_t SchemaCompiler::any_value() {
    if (any_value_rule_ < 0) build_any_value();
    return g_.ref(any_value_rule_);
}

void SchemaCompiler::build_any_value() {
    any_value_rule_ = g_.add_rule("json value");
    const int32_t object = g_.add_rule("json object");
    const int32_t array = g_.add_rule("json array");
    const int32_t string = g_.seq({g_.literal("\""), g_.star(any_string_char()), g_.literal("\"")});
    const int32_t number = number_expr(g_, NumberSyntax{}, NumberRange{});
    g_.define(any_value_rule_, g_.alt({g_.ref(object), g_.ref(array), string, number, g_.literal("true"),
                                       g_.literal("false"), g_.literal("null")}));
    const int32_t member = g_.seq({string, ws(), g_.literal(":"), ws(), g_.ref(any_value_rule_)});
    g_.define(object,
              g_.seq({g_.literal("{"), ws(), g_.optional(g_.seq({member, g_.star(g_.seq({separator(), member}))})),
                      ws(), g_.literal("}")}));
    const int32_t element = g_.ref(any_value_rule_);
    g_.define(array,
              g_.seq({g_.literal("["), ws(), g_.optional(g_.seq({element, g_.star(g_.seq({separator(), element}))})),
                      ws(), g_.literal("]")}));
}

}  // namespace schema

namespace {

constexpr int kMaxSchemaTextDepth = 256;

int text_depth(std::string_view text) {
    int depth = 0;
    int deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            deepest = std::max(deepest, ++depth);
        } else if (c == '}' || c == ']') {
            --depth;
        }
    }
    return deepest;
}

}  // namespace

Grammar compile_json_schema(std::string_view schema_text, const JsonSchemaOptions& options) {
    if (text_depth(schema_text) > kMaxSchemaTextDepth)
        grammar_fail("JSON schema: the document nests deeper than {}", kMaxSchemaTextDepth);
    schema::Json root;
    try {
        root = schema::Json::parse(schema_text);
    } catch (const nlohmann::json::exception& e) {
        grammar_fail("JSON schema is not valid JSON: {}", e.what());
    }
    Grammar grammar;
    const int32_t rule = grammar.add_rule("root");
    grammar.set_root(rule);
    grammar.define(rule, add_json_schema_value(grammar, root, options));
    return grammar;
}

int32_t add_json_schema_value(Grammar& grammar, const nlohmann::ordered_json& schema,
                              const JsonSchemaOptions& options) {
    schema::SchemaCompiler compiler(grammar, schema, options);
    return compiler.value(schema, "#", 0);
}

std::span<const std::string_view> unsupported_schema_keywords() {
    return schema::kUnsupported;
}

}  // namespace dsv4::structured
