#include "structured/grammar_spec.h"

#include <functional>

#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured/regex.h"

namespace dsv4::structured {
namespace {

constexpr size_t kMaxChoices = 10000;

Grammar single_rule(const std::function<int32_t(Grammar&)>& body) {
    Grammar g;
    const int32_t root = g.add_rule("root");
    g.set_root(root);
    g.define(root, body(g));
    return g;
}

// A length-prefixed field, so that no two different specs share a key.
void append_field(std::string& out, std::string_view field) {
    out += std::to_string(field.size());
    out += ':';
    out += field;
}

}  // namespace

std::string_view grammar_kind_name(GrammarKind kind) {
    switch (kind) {
        case GrammarKind::kJsonObject:
            return "json_object";
        case GrammarKind::kJsonSchema:
            return "json_schema";
        case GrammarKind::kRegex:
            return "regex";
        case GrammarKind::kChoice:
            return "choice";
        case GrammarKind::kGbnf:
            return "grammar";
        case GrammarKind::kToolCalls:
            return "tool_calls";
    }
    return "unknown";
}

std::string GrammarSpec::key() const {
    std::string out(grammar_kind_name(kind));
    out += strict ? "|strict|" : "|loose|";
    out += parallel_tool_calls ? "parallel|" : "single|";
    append_field(out, text);
    for (const std::string& choice : choices) append_field(out, choice);
    for (const ToolSpec& tool : tools) {
        append_field(out, tool.name);
        append_field(out, tool.parameters);
    }
    return out;
}

Grammar build_grammar(const GrammarSpec& spec) {
    switch (spec.kind) {
        case GrammarKind::kJsonObject: {
            JsonSchemaOptions options;
            options.strict = false;  // any object, with any properties
            return compile_json_schema(R"({"type": "object"})", options);
        }
        case GrammarKind::kJsonSchema: {
            JsonSchemaOptions options;
            options.strict = spec.strict;
            return compile_json_schema(spec.text, options);
        }
        case GrammarKind::kRegex:
            return single_rule([&](Grammar& g) { return compile_regex(g, spec.text, {RegexText::kRaw, false}); });
        case GrammarKind::kChoice:
            if (spec.choices.empty()) grammar_fail("a choice list needs at least one choice");
            if (spec.choices.size() > kMaxChoices) grammar_fail("at most {} choices are supported", kMaxChoices);
            return single_rule([&](Grammar& g) {
                std::vector<int32_t> alternatives;
                for (const std::string& choice : spec.choices) alternatives.push_back(g.literal(choice));
                return g.alt(std::move(alternatives));
            });
        case GrammarKind::kGbnf:
            return parse_gbnf(spec.text);
        case GrammarKind::kToolCalls:
            return tool_call_grammar(spec.tools, spec.parallel_tool_calls);
    }
    grammar_fail("unknown grammar kind");
}

}  // namespace dsv4::structured
