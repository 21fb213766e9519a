// Structured-output fields -> StructuredOutputRequest. The spellings of OpenAI (response_format), vLLM
// (guided_json, guided_regex, guided_choice, guided_grammar, structured_outputs) and llama-server (grammar,
// json_schema) mean the same thing here; two of them in one request is an error, never a silent choice. Schemas
// are compiled later (they need the vocabulary); here they are only checked for shape.
#include "server/http/api_error.h"
#include "server/openai/request_parser.h"

namespace dsv4::server {
namespace {

using structured::GrammarKind;

StructuredOutputRequest make(GrammarKind kind, std::string param) {
    StructuredOutputRequest request;
    request.spec.kind = kind;
    request.param = std::move(param);
    return request;
}

// A schema given as an object, or as JSON text (vLLM accepts both for guided_json).
StructuredOutputRequest json_schema_request(const Json& value, const std::string& param, bool strict) {
    Json schema = value;
    if (value.is_string()) {
        schema = Json::parse(value.get<std::string>(), nullptr, false);
        if (schema.is_discarded()) fail_request(param, "'{}' is not valid JSON", param);
    }
    if (!schema.is_object() && !schema.is_boolean()) {
        fail_request(param, "'{}' must be a JSON Schema (an object), not {}", param, json_type_name(schema));
    }
    StructuredOutputRequest request = make(GrammarKind::kJsonSchema, param);
    request.spec.text = schema.dump();
    request.spec.strict = strict;
    return request;
}

StructuredOutputRequest string_request(const Json& value, GrammarKind kind, const std::string& param) {
    if (!value.is_string()) fail_request(param, "'{}' must be a string, not {}", param, json_type_name(value));
    StructuredOutputRequest request = make(kind, param);
    request.spec.text = value.get<std::string>();
    return request;
}

StructuredOutputRequest choice_request(const Json& value, const std::string& param) {
    if (!value.is_array() || value.empty()) fail_request(param, "'{}' must be a non-empty array of strings", param);
    StructuredOutputRequest request = make(GrammarKind::kChoice, param);
    for (size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_string()) fail_request(index_path(param, i), "'{}' must be a string", index_path(param, i));
        request.spec.choices.push_back(value[i].get<std::string>());
    }
    return request;
}

// OpenAI: {"type": "text" | "json_object" | "json_schema", "json_schema": {"name", "schema", "strict"}}.
std::optional<StructuredOutputRequest> response_format_request(const Json& format) {
    const std::string type = get_string(format, "type", "response_format").value_or("text");
    if (type == "text") return std::nullopt;
    if (type == "json_object") return make(GrammarKind::kJsonObject, "response_format");
    if (type != "json_schema") {
        fail_request("response_format.type",
                     "'response_format.type' must be text, json_object or json_schema (got '{}')", type);
    }
    const Json* json_schema = get_object(format, "json_schema", "response_format");
    if (json_schema == nullptr)
        fail_request("response_format.json_schema", "'response_format.json_schema' is required");
    const std::string param = "response_format.json_schema.schema";
    const bool strict = get_bool(*json_schema, "strict", "response_format.json_schema").value_or(false);
    const Json schema = json_schema->contains("schema") && !json_schema->at("schema").is_null()
                            ? json_schema->at("schema")
                            : Json::object();
    StructuredOutputRequest request = json_schema_request(schema, param, strict);
    if (schema.is_object()) request.prompt_schema = schema;
    return request;
}

// vLLM's structured_outputs: {"json" | "regex" | "choice" | "grammar" | "json_object"}.
std::optional<StructuredOutputRequest> structured_outputs_request(const Json& object) {
    std::optional<StructuredOutputRequest> out;
    auto set = [&](StructuredOutputRequest request) {
        if (out)
            fail_request(request.param,
                         "'structured_outputs' may hold only one of json, regex, choice, grammar, json_object");
        out = std::move(request);
    };
    for (const auto& [key, value] : object.items()) {
        if (value.is_null()) continue;
        const std::string param = "structured_outputs." + key;
        if (key == "json") {
            set(json_schema_request(value, param, true));
        } else if (key == "regex") {
            set(string_request(value, GrammarKind::kRegex, param));
        } else if (key == "choice") {
            set(choice_request(value, param));
        } else if (key == "grammar") {
            set(string_request(value, GrammarKind::kGbnf, param));
        } else if (key == "json_object") {
            if (value == Json(true)) set(make(GrammarKind::kJsonObject, param));
        } else if (key == "disable_any_whitespace" || key == "disable_fallback" ||
                   key == "disable_additional_properties") {
            if (value != Json(false)) fail_request(param, "'{}' is not supported", param);
        } else {
            fail_request(param, "'{}' is not supported", param);  // structural_tag, whitespace_pattern, ...
        }
    }
    return out;
}

}  // namespace

std::optional<StructuredOutputRequest> parse_structured_output(const Json& body) {
    std::optional<StructuredOutputRequest> out;
    auto take = [&](std::optional<StructuredOutputRequest> request) {
        if (!request) return;
        if (out) {
            fail_request(request->param, "'{}' and '{}' both ask for structured output; give only one", out->param,
                         request->param);
        }
        out = std::move(request);
    };
    auto present = [&](const char* key) { return body.contains(key) && !body.at(key).is_null(); };
    if (const Json* format = get_object(body, "response_format", "")) take(response_format_request(*format));
    if (present("guided_json")) take(json_schema_request(body.at("guided_json"), "guided_json", true));
    if (present("guided_regex")) take(string_request(body.at("guided_regex"), GrammarKind::kRegex, "guided_regex"));
    if (present("guided_choice")) take(choice_request(body.at("guided_choice"), "guided_choice"));
    if (present("guided_grammar"))
        take(string_request(body.at("guided_grammar"), GrammarKind::kGbnf, "guided_grammar"));
    if (const Json* object = get_object(body, "structured_outputs", "")) take(structured_outputs_request(*object));
    if (present("grammar")) take(string_request(body.at("grammar"), GrammarKind::kGbnf, "grammar"));
    if (present("json_schema")) take(json_schema_request(body.at("json_schema"), "json_schema", true));
    if (present("guided_whitespace_pattern"))
        fail_request("guided_whitespace_pattern", "'guided_whitespace_pattern' is not supported");
    return out;
}

}  // namespace dsv4::server
