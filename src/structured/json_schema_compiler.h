// Internal to the JSON Schema front end (json_schema*.cpp): the compiler's state and the pieces its files share.
#pragma once

#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "structured/grammar.h"
#include "structured/json_schema.h"

namespace dsv4::structured::schema {

using Json = nlohmann::ordered_json;

// JSON types as bits; "number" is kInteger | kFraction.
enum TypeBits : uint8_t {
    kNull = 1,
    kBoolean = 2,
    kInteger = 4,
    kFraction = 8,  // numbers that are not integers
    kString = 16,
    kArray = 32,
    kObject = 64,
    kAllTypes = 127,
};

inline constexpr char32_t kMarkupBar = 0xFF5C;  // "｜", inside every DeepSeek special token

bool is_annotation(std::string_view keyword);
bool is_assertion(std::string_view keyword);  // a keyword that restricts values (not an annotation or container)

class SchemaCompiler {
  public:
    SchemaCompiler(Grammar& grammar, const Json& root, const JsonSchemaOptions& options);

    // An expression matching the values `schema` allows. path: a JSON pointer for messages.
    int32_t value(const Json& schema, const std::string& path, int depth);

    Grammar& grammar() { return g_; }
    const JsonSchemaOptions& options() const { return options_; }
    int32_t ws();
    int32_t separator();  // ws "," ws
    int32_t nothing() { return g_.bytes(ByteSet{}); }
    int32_t any_value();
    int32_t any_string_char();

    // json_schema_values.cpp
    int32_t literal(const Json& value, int depth);
    int32_t string_value(const Json& schema, const std::string& path);
    // A string as raw text (a DSML string="true" parameter): the characters themselves, no quotes or escapes,
    // never U+FF5C.
    int32_t raw_string_value(const Json& schema, const std::string& path);
    int32_t number_value(const Json& schema, const std::string& path, bool integer);
    int32_t enum_value(const Json& schema, const std::string& path, int depth);

    // json_schema_objects.cpp
    int32_t object_value(const Json& schema, const std::string& path, int depth);
    int32_t array_value(const Json& schema, const std::string& path, int depth);

    // json_schema_merge.cpp
    const Json& merge_all_of(const Json& schema, const std::string& path, int depth);
    Json merge(const Json& a, const Json& b, const std::string& path, int depth);
    uint8_t types_of(const Json& schema, int depth);
    bool disjoint(const Json& a, const Json& b, int depth);

    const Json& resolve_ref(const Json& schema, const std::string& path);
    uint8_t type_set(const Json& schema, const std::string& path);
    const Json& keep(Json schema);  // stores a derived schema for the compiler's lifetime

  private:
    void check_keywords(const Json& schema, const std::string& path);
    int32_t ref_value(const Json& target, const std::string& path, int depth);
    int32_t union_value(const Json& schema, const std::string& path, int depth);
    int32_t typed_value(const Json& schema, const std::string& path, int depth);
    void build_any_value();

    Grammar& g_;
    const Json& root_;
    JsonSchemaOptions options_;
    std::deque<Json> kept_;
    std::unordered_map<const Json*, int32_t> ref_rules_;
    int32_t any_value_rule_ = -1;
    int32_t any_char_ = -1;
    int32_t ws_ = -1;
};

[[noreturn]] void schema_fail(const std::string& path, const std::string& what);

}  // namespace dsv4::structured::schema
