// GrammarSpec: what a request asks to constrain its output to, as plain data (the server fills it from
// response_format / guided_* / structured_outputs / grammar / json_schema / tool_choice), and build_grammar(), which
// dispatches to the front ends. key() identifies equal specs for the compiled-grammar cache.
#pragma once

#include <string>
#include <vector>

#include "structured/grammar.h"

namespace dsv4::structured {

enum class GrammarKind {
    kJsonObject,  // JSON mode: any JSON object
    kJsonSchema,  // text: a JSON Schema document
    kRegex,       // text: a regular expression the whole output matches
    kChoice,      // choices: the output is exactly one of them
    kGbnf,        // text: a GBNF grammar
    kToolCalls,   // tools: a DSML tool-call block calling one of them (parallel: one or more calls)
};

struct ToolSpec {
    std::string name;
    std::string parameters;  // the function's "parameters" JSON Schema as JSON text; "" = no parameters
};

struct GrammarSpec {
    GrammarKind kind = GrammarKind::kJsonObject;
    std::string text;
    std::vector<std::string> choices;
    std::vector<ToolSpec> tools;
    bool parallel_tool_calls = true;
    bool strict = true;  // kJsonSchema: JsonSchemaOptions::strict

    std::string key() const;
};

// Throws GrammarError naming what is wrong or unsupported.
Grammar build_grammar(const GrammarSpec& spec);

// The DSML tool-call block for `tools` (chat_tokens.h format). String-typed parameters are written raw
// (string="true"), every other one as JSON (string="false"); properties follow the schema's order, required ones
// always present. No other text: the constraint starts where the content would.
Grammar tool_call_grammar(const std::vector<ToolSpec>& tools, bool parallel);

std::string_view grammar_kind_name(GrammarKind kind);

}  // namespace dsv4::structured
