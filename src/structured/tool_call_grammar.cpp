// Forced tool calls: the DSML block DeepSeek-V4 writes for tool calls, with every parameter constrained by the
// tool's JSON Schema (json_schema_compiler.h). The output parser (tokenizer/output_parser.h) reads it back into
// OpenAI tool calls whose arguments are {"name": value, ...} in schema order.
#include <algorithm>

#include "structured/grammar_spec.h"
#include "structured/json_schema_compiler.h"
#include "tokenizer/chat_tokens.h"

namespace dsv4::structured {
namespace {

namespace ct = chat_tokens;
using schema::Json;

void check_markup_free(std::string_view text, std::string_view what) {
    if (text.empty() || text.find('"') != std::string_view::npos ||
        text.find(ct::kFullwidthBar) != std::string_view::npos || text.find('\n') != std::string_view::npos) {
        grammar_fail("{} '{}' cannot be written in a DSML tool call (empty, or contains '\"', a newline or U+FF5C)",
                     what, text);
    }
}

Json parse_parameters(const ToolSpec& tool) {
    if (tool.parameters.empty()) return Json::object();
    Json parameters;
    try {
        parameters = Json::parse(tool.parameters);
    } catch (const nlohmann::json::exception& e) {
        grammar_fail("tool '{}': parameters are not valid JSON: {}", tool.name, e.what());
    }
    if (!parameters.is_object() || (parameters.contains("type") && parameters.at("type") != Json("object"))) {
        grammar_fail("tool '{}': 'parameters' must be an object schema", tool.name);
    }
    for (const char* keyword : {"anyOf", "oneOf", "allOf", "$ref", "not", "if"}) {
        if (parameters.contains(keyword))
            grammar_fail("tool '{}': '{}' at the top of 'parameters' is not supported for forced tool calls", tool.name,
                         keyword);
    }
    return parameters;
}

// One parameter: string-typed ones raw (string="true"), everything else as JSON.
int32_t parameter_expr(schema::SchemaCompiler& compiler, const std::string& name, const Json& property,
                       const std::string& path) {
    Grammar& g = compiler.grammar();
    const Json* resolved = &property;
    if (property.is_object() && property.contains("$ref")) resolved = &compiler.resolve_ref(property, path);
    const bool raw = resolved->is_object() && resolved->contains("type") && resolved->at("type") == Json("string") &&
                     !resolved->contains("anyOf") && !resolved->contains("oneOf") && !resolved->contains("allOf");
    const std::string open =
        fmt::format("{}{}\" string=\"{}\">", ct::kParameterOpenPrefix, name, raw ? "true" : "false");
    const int32_t value = raw ? compiler.raw_string_value(*resolved, path) : compiler.value(property, path, 1);
    return g.seq({g.literal(open), value, g.literal(ct::kParameterClose), g.literal("\n")});
}

// The parameters of one invoke, each followed by "\n"; an invoke without parameters is a bare "\n".
int32_t parameters_expr(Grammar& g, const ToolSpec& tool) {
    const Json parameters = parse_parameters(tool);
    JsonSchemaOptions options;
    options.exclude_markup_bar = true;
    schema::SchemaCompiler compiler(g, parameters, options);
    std::vector<std::string> required;
    if (parameters.contains("required") && parameters.at("required").is_array()) {
        for (const Json& name : parameters.at("required")) {
            if (name.is_string()) required.push_back(name.get<std::string>());
        }
    }
    std::vector<int32_t> items;
    std::vector<bool> mandatory;
    if (parameters.contains("properties") && parameters.at("properties").is_object()) {
        for (const auto& [name, property] : parameters.at("properties").items()) {
            check_markup_free(name, "parameter name");
            items.push_back(parameter_expr(compiler, name, property, "#/properties/" + name));
            mandatory.push_back(std::find(required.begin(), required.end(), name) != required.end());
        }
    }
    for (const std::string& name : required) {
        if (!parameters.contains("properties") || !parameters.at("properties").contains(name))
            grammar_fail("tool '{}': required parameter '{}' has no schema in 'properties'", tool.name, name);
    }
    // rest[i]: parameters i.. (each optional or required); first[i]: at least one of the optional parameters i..
    const size_t n = items.size();
    std::vector<int32_t> rest(n + 1), first(n + 1);
    for (size_t i = 0; i <= n; ++i) {
        rest[i] = g.add_rule(fmt::format("{} parameters {}", tool.name, i));
        first[i] = g.add_rule(fmt::format("{} first parameter {}", tool.name, i));
    }
    g.define(rest[n], g.empty());
    g.define(first[n], g.bytes(ByteSet{}));
    for (size_t i = n; i-- > 0;) {
        const int32_t with = g.seq({items[i], g.ref(rest[i + 1])});
        g.define(rest[i], mandatory[i] ? with : g.alt({with, g.ref(rest[i + 1])}));
        g.define(first[i], g.alt({with, g.ref(first[i + 1])}));
    }
    const bool any_required = std::find(mandatory.begin(), mandatory.end(), true) != mandatory.end();
    return any_required ? g.ref(rest[0]) : g.alt({g.literal("\n"), g.ref(first[0])});
}

}  // namespace

Grammar tool_call_grammar(const std::vector<ToolSpec>& tools, bool parallel) {
    if (tools.empty()) grammar_fail("forced tool calls need at least one tool");
    Grammar g;
    const int32_t invoke = g.add_rule("invoke");
    std::vector<int32_t> invokes;
    for (const ToolSpec& tool : tools) {
        check_markup_free(tool.name, "tool name");
        invokes.push_back(g.seq({g.literal(fmt::format("{}{}\">\n", ct::kInvokeOpenPrefix, tool.name)),
                                 parameters_expr(g, tool), g.literal(ct::kInvokeClose)}));
    }
    g.define(invoke, g.alt(std::move(invokes)));
    const int32_t root = g.add_rule("root");
    g.set_root(root);
    g.define(root, g.seq({g.literal(fmt::format("\n\n{}\n", ct::kToolCallsOpen)), g.ref(invoke),
                          parallel ? g.star(g.seq({g.literal("\n"), g.ref(invoke)})) : g.empty(),
                          g.literal(fmt::format("\n{}", ct::kToolCallsClose))}));
    return g;
}

}  // namespace dsv4::structured
