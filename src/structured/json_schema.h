// JSON Schema -> grammar (structured outputs). The subset people use is supported and everything else is refused
// with a GrammarError naming the keyword, never ignored:
//   type (one or a list), enum, const, properties, required, additionalProperties, items (schema or tuple),
//   prefixItems, additionalItems, minItems, maxItems, minLength, maxLength, pattern (regex.h), format (date, time,
//   date-time, uuid, ipv4, email, hostname), minimum, maximum, exclusiveMinimum, exclusiveMaximum, anyOf, oneOf
//   (when its branches cannot overlap), allOf (merged), $ref to "#..." pointers (recursion allowed), definitions /
//   $defs, boolean schemas, and the annotations (title, description, default, examples, ...).
// Refused: see unsupported_schema_keywords(). Unknown keywords (not JSON Schema vocabulary) are ignored, as the
// specification says.
// The grammar matches one JSON value. Properties come in the order the schema lists them (optional ones may be
// left out), then any additional properties; at most max_whitespace whitespace bytes separate two tokens.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string_view>

#include "structured/grammar.h"

namespace dsv4::structured {

struct JsonSchemaOptions {
    // true (generation, like vLLM / xgrammar): properties and array items that the schema does not list are not
    // generated unless additionalProperties / items / additionalItems allow them explicitly, integers are written
    // without a fraction, and a schema without "type" takes the types its keywords imply (properties -> object).
    // false (JSON Schema validation semantics): what the specification allows, e.g. extra properties by default.
    bool strict = true;
    bool ref_siblings_ignored = false;  // draft 7 and earlier: keywords next to "$ref" are ignored
    int max_whitespace = 20;            // whitespace bytes allowed between two JSON tokens
    int max_depth = 64;                 // nesting of subschemas
    int max_enum_values = 10000;
    // Strings never contain U+FF5C (the bar of DeepSeek's markup tokens) unescaped: tool-call arguments sit between
    // DSML tags, which a raw U+FF5C could imitate.
    bool exclude_markup_bar = false;
};

// Compiles schema text (a JSON document) into a grammar whose root rule is one JSON value.
Grammar compile_json_schema(std::string_view schema_text, const JsonSchemaOptions& options);

// Adds the value grammar of `schema` to an existing grammar and returns an expression for it (tool-call
// arguments). `schema` is the root for "$ref" resolution.
int32_t add_json_schema_value(Grammar& grammar, const nlohmann::ordered_json& schema, const JsonSchemaOptions& options);

// JSON Schema keywords that are refused (documented in docs/operations.md).
std::span<const std::string_view> unsupported_schema_keywords();

}  // namespace dsv4::structured
