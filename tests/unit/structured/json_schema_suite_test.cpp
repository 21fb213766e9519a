// The official JSON-Schema-Test-Suite (Debian package json-schema-test-suite, draft 7) as data: for every schema the
// compiler accepts, the grammar must accept each valid instance and reject each invalid one, written as JSON text
// (object keys in the schema's property order, then sorted: the grammar writes listed properties first). Schemas
// the compiler refuses must name a keyword or feature that the schema really uses; the counts are printed (and
// listed in docs/operations.md). JSON Schema semantics here: strict = false, $ref siblings ignored (draft 7).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "structured/compiled_grammar.h"
#include "structured/grammar_matcher.h"
#include "structured/json_schema.h"

namespace dsv4::structured {
namespace {

using Json = nlohmann::json;  // std::map objects: keys sorted, like the grammar's const / enum literals
namespace fs = std::filesystem;

const char* kSuite = DSV4_JSON_SCHEMA_TEST_SUITE;

const Json* resolve(const Json& schema, const Json& root) {
    if (!schema.is_object() || !schema.contains("$ref") || !schema["$ref"].is_string()) return &schema;
    const std::string ref = schema["$ref"];
    if (ref.empty() || ref[0] != '#') return &schema;
    try {
        return &root.at(Json::json_pointer(ref.substr(1)));
    } catch (const Json::exception&) {
        return &schema;
    }
}

// Property names in the order the schema lists them (following $ref, allOf and the branches of anyOf / oneOf).
void listed_properties(const Json& schema, const Json& root, std::vector<std::string>& out, int depth) {
    if (depth > 8) return;
    const Json& s = *resolve(schema, root);
    if (!s.is_object()) return;
    if (s.contains("properties") && s["properties"].is_object()) {
        for (const auto& [name, unused] : s["properties"].items()) {
            if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
        }
    }
    for (const char* keyword : {"allOf", "anyOf", "oneOf"}) {
        if (s.contains(keyword) && s[keyword].is_array()) {
            for (const Json& branch : s[keyword]) listed_properties(branch, root, out, depth + 1);
        }
    }
    if (s.contains("required") && s["required"].is_array()) {
        for (const Json& name : s["required"]) {
            if (name.is_string() && std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
        }
    }
}

const Json& subschema(const Json& schema, const Json& root, const char* key, const std::string& name) {
    static const Json kEmpty = Json::object();
    const Json& s = *resolve(schema, root);
    if (!s.is_object()) return kEmpty;
    if (s.contains(key) && s[key].is_object() && s[key].contains(name)) return s[key][name];
    return kEmpty;
}

std::string serialize(const Json& instance, const Json& schema, const Json& root) {
    const Json& s = *resolve(schema, root);
    if (instance.is_object()) {
        std::vector<std::string> order;
        listed_properties(s, root, order, 0);
        std::vector<std::string> keys;
        for (const std::string& name : order) {
            if (instance.contains(name)) keys.push_back(name);
        }
        for (const auto& [name, unused] : instance.items()) {
            if (std::find(keys.begin(), keys.end(), name) == keys.end()) keys.push_back(name);
        }
        std::string out = "{";
        for (size_t i = 0; i < keys.size(); ++i) {
            if (i > 0) out += ',';
            out += Json(keys[i]).dump() + ":" +
                   serialize(instance[keys[i]], subschema(s, root, "properties", keys[i]), root);
        }
        return out + "}";
    }
    if (instance.is_array()) {
        std::string out = "[";
        for (size_t i = 0; i < instance.size(); ++i) {
            if (i > 0) out += ',';
            Json item = Json::object();
            if (s.is_object() && s.contains("items"))
                item = s["items"].is_array() ? (i < s["items"].size() ? s["items"][i] : Json::object()) : s["items"];
            out += serialize(instance[i], item, root);
        }
        return out + "]";
    }
    return instance.dump();
}

struct SuiteCounts {
    int groups = 0;
    int compiled = 0;
    int refused = 0;
    int tests = 0;
    std::map<std::string, int> refusals;  // keyword or feature -> groups
};

// The unsupported keyword (or feature) a refusal names; empty when the message names nothing the schema uses.
std::string refusal_reason(const std::string& message, const std::string& schema_text) {
    for (std::string_view keyword : unsupported_schema_keywords()) {
        const std::string quoted = fmt::format("'{}'", keyword);
        if (message.find(quoted) != std::string::npos &&
            schema_text.find(fmt::format("\"{}\"", keyword)) != std::string::npos)
            return std::string(keyword);
    }
    for (const char* feature : {"oneOf", "$ref", "anyOf"}) {
        if (message.find(fmt::format("'{}'", feature)) != std::string::npos &&
            schema_text.find(fmt::format("\"{}\"", feature)) != std::string::npos)
            return feature;
    }
    return "";
}

void run_file(const fs::path& file, SuiteCounts& counts) {
    std::ifstream in(file);
    const Json groups = Json::parse(in);
    JsonSchemaOptions options;
    options.strict = false;
    options.ref_siblings_ignored = true;
    options.max_whitespace = 0;  // instances are written compactly
    for (const Json& group : groups) {
        ++counts.groups;
        const std::string schema_text = group["schema"].dump();
        const std::string where =
            fmt::format("{}: {}", file.filename().string(), group["description"].get<std::string>());
        std::unique_ptr<CompiledGrammar> grammar;
        try {
            grammar = std::make_unique<CompiledGrammar>(compile_json_schema(schema_text, options));
        } catch (const GrammarError& e) {
            const std::string message = e.what();
            if (message.find("matches nothing") != std::string::npos) {  // no valid instance exists
                ++counts.compiled;
                for (const Json& test : group["tests"]) EXPECT_FALSE(test["valid"].get<bool>()) << where;
                continue;
            }
            const std::string reason = refusal_reason(message, schema_text);
            EXPECT_FALSE(reason.empty()) << where << ": refused without naming a feature it uses: " << message;
            ++counts.refused;
            ++counts.refusals[reason];
            continue;
        }
        ++counts.compiled;
        for (const Json& test : group["tests"]) {
            const std::string text = serialize(test["data"], group["schema"], group["schema"]);
            EXPECT_EQ(grammar_accepts(*grammar, text), test["valid"].get<bool>())
                << where << " / " << test["description"].get<std::string>() << ": " << text;
            ++counts.tests;
        }
    }
}

TEST(JsonSchemaSuite, SupportedKeywordsMatchEveryValidAndNoInvalidInstance) {
    if (!fs::is_directory(kSuite)) {
        if (std::getenv("CI") != nullptr) FAIL() << kSuite << " is missing: scripts/install-deps.sh installs it";
        GTEST_SKIP() << kSuite << " is missing (apt-get install json-schema-test-suite)";
    }
    SuiteCounts counts;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(kSuite)) {
        if (entry.path().extension() == ".json") files.push_back(entry.path());
    }
    for (const char* format : {"date", "time", "date-time", "ipv4", "email", "hostname"})
        files.push_back(fs::path(kSuite) / "optional" / "format" / (std::string(format) + ".json"));
    std::sort(files.begin(), files.end());
    std::map<std::string, int> compiled_per_file;
    for (const fs::path& file : files) {
        const int before = counts.compiled;
        run_file(file, counts);
        compiled_per_file[file.stem().string()] = counts.compiled - before;
    }
    // Every keyword this compiler claims is exercised by at least one compiled schema of its file.
    for (const char* file : {"type",
                             "properties",
                             "required",
                             "additionalProperties",
                             "items",
                             "additionalItems",
                             "enum",
                             "const",
                             "minimum",
                             "maximum",
                             "exclusiveMinimum",
                             "exclusiveMaximum",
                             "minLength",
                             "maxLength",
                             "minItems",
                             "maxItems",
                             "pattern",
                             "anyOf",
                             "oneOf",
                             "allOf",
                             "ref",
                             "boolean_schema",
                             "default",
                             "date",
                             "date-time",
                             "time",
                             "ipv4"}) {
        EXPECT_GT(compiled_per_file[file], 0) << file << ".json: no schema compiled";
    }
    std::string refusals;
    for (const auto& [reason, n] : counts.refusals) refusals += fmt::format(" {}={}", reason, n);
    std::printf("JSON-Schema-Test-Suite draft7: %d groups, %d compiled (%d instances checked), %d refused:%s\n",
                counts.groups, counts.compiled, counts.tests, counts.refused, refusals.c_str());
}

}  // namespace
}  // namespace dsv4::structured
