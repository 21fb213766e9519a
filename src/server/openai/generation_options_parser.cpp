// The sampling and output fields shared by /v1/chat/completions and /v1/completions.
#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>

#include "sample/sampling_params.h"
#include "server/http/api_error.h"
#include "server/openai/request_parser.h"

namespace dsv4::server {
namespace {

constexpr int64_t kIntMax = INT_MAX;

void parse_stop(const Json& body, SamplingParams& params) {
    if (!body.contains("stop")) return;
    const Json& stop = body.at("stop");
    if (stop.is_null()) return;
    if (stop.is_string()) {
        params.stop.push_back(stop.get<std::string>());
        return;
    }
    if (!stop.is_array())
        fail_request("stop", "'stop' must be a string or an array of strings, not {}", json_type_name(stop));
    size_t i = 0;
    for (const Json& entry : stop) {
        if (!entry.is_string()) {
            fail_request(index_path("stop", i), "'stop[{}]' must be a string, not {}", i, json_type_name(entry));
        }
        params.stop.push_back(entry.get<std::string>());
        ++i;
    }
}

void parse_logit_bias(const Json& body, SamplingParams& params) {
    const Json* bias = get_object(body, "logit_bias", "");
    if (bias == nullptr) return;
    if (bias->size() > static_cast<size_t>(kMaxLogitBiasEntries)) {
        fail_request("logit_bias", "'logit_bias' has {} entries; at most {} are allowed", bias->size(),
                     kMaxLogitBiasEntries);
    }
    for (const auto& [key, value] : bias->items()) {
        int64_t token = -1;
        const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), token);
        if (ec != std::errc() || end != key.data() + key.size() || token < 0) {
            fail_request("logit_bias", "'logit_bias' keys must be token ids (non-negative integers), got '{}'", key);
        }
        if (!value.is_number()) {
            fail_request("logit_bias", "'logit_bias[{}]' must be a number, not {}", key, json_type_name(value));
        }
        const double v = value.get<double>();
        if (!std::isfinite(v)) fail_request("logit_bias", "'logit_bias[{}]' must be finite", key);
        params.logit_bias.emplace_back(token, static_cast<float>(std::clamp(v, -kMaxLogitBias, kMaxLogitBias)));
    }
}

void parse_token_id_list(const Json& body, std::string_view key, std::vector<int64_t>& out) {
    const Json* list = get_array(body, key, "");
    if (list == nullptr) return;
    for (size_t i = 0; i < list->size(); ++i) out.push_back(to_int((*list)[i], index_path(key, i), 0, kIntMax));
}

void parse_distribution(const Json& body, SamplingParams& params) {
    if (auto v = get_number(body, "temperature", "")) params.temperature = *v;
    if (auto v = get_number(body, "top_p", "")) params.top_p = *v;
    if (auto v = get_int(body, "top_k", "", INT_MIN, kIntMax)) params.top_k = static_cast<int>(*v);
    if (auto v = get_number(body, "min_p", "")) params.min_p = *v;
    if (auto v = get_number(body, "presence_penalty", "")) params.presence_penalty = *v;
    if (auto v = get_number(body, "frequency_penalty", "")) params.frequency_penalty = *v;
    if (auto v = get_number(body, "repetition_penalty", "")) params.repetition_penalty = *v;
    if (auto v = get_int(body, "seed", "", INT64_MIN, INT64_MAX)) params.seed = static_cast<uint64_t>(*v);
    parse_logit_bias(body, params);
}

void parse_length(const Json& body, GenerationOptions& options) {
    SamplingParams& params = options.sampling;
    auto max_tokens = get_int(body, "max_tokens", "", 1, kIntMax);
    auto max_completion_tokens = get_int(body, "max_completion_tokens", "", 1, kIntMax);
    if (max_completion_tokens) max_tokens = max_completion_tokens;  // the newer spelling wins (vLLM)
    if (max_tokens) options.max_tokens = static_cast<int>(*max_tokens);
    if (auto v = get_int(body, "min_tokens", "", 0, kIntMax)) params.min_tokens = static_cast<int>(*v);
    if (auto v = get_bool(body, "ignore_eos", "")) params.ignore_eos = *v;
    parse_stop(body, params);
    parse_token_id_list(body, "stop_token_ids", params.stop_token_ids);
    if (auto v = get_bool(body, "include_stop_str_in_output", "")) params.include_stop_str_in_output = *v;
}

void parse_logprobs(const Json& body, bool chat, GenerationOptions& options) {
    if (chat) {
        options.logprobs = get_bool(body, "logprobs", "").value_or(false);
        if (auto top = get_int(body, "top_logprobs", "", 0, kMaxLogprobs)) {
            if (!options.logprobs && *top > 0) {
                fail_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
            }
            options.top_logprobs = static_cast<int>(*top);
        }
    } else if (auto n = get_int(body, "logprobs", "", 0, kMaxLogprobs)) {
        options.logprobs = true;
        options.top_logprobs = static_cast<int>(*n);
    }
    if (options.logprobs) options.sampling.logprobs = options.top_logprobs;
}

void parse_stream(const Json& body, GenerationOptions& options) {
    options.stream = get_bool(body, "stream", "").value_or(false);
    if (const Json* stream_options = get_object(body, "stream_options", "")) {
        if (!options.stream) fail_request("stream_options", "'stream_options' is only allowed with 'stream': true");
        options.stream_options.include_usage =
            get_bool(*stream_options, "include_usage", "stream_options").value_or(false);
        options.stream_options.continuous_usage_stats =
            get_bool(*stream_options, "continuous_usage_stats", "stream_options").value_or(false);
    }
}

// Fields other servers (vLLM, llama-server, OpenAI) accept that would change the output, with their neutral value:
// present with another value, they are refused instead of ignored.
enum class Neutral { kFalse, kTrue, kZero, kOne, kMinusOne, kEmpty };
struct GenerationField {
    const char* name;
    Neutral neutral;
};
constexpr GenerationField kUnsupportedGenerationFields[] = {
    {"use_beam_search", Neutral::kFalse},
    {"length_penalty", Neutral::kOne},
    {"early_stopping", Neutral::kFalse},
    {"allowed_token_ids", Neutral::kEmpty},
    {"bad_words", Neutral::kEmpty},
    {"truncate_prompt_tokens", Neutral::kEmpty},
    {"typical_p", Neutral::kOne},
    {"tfs_z", Neutral::kOne},
    {"mirostat", Neutral::kZero},
    {"repeat_penalty", Neutral::kOne},
    {"penalize_nl", Neutral::kFalse},
    {"n_predict", Neutral::kMinusOne},
    {"dry_multiplier", Neutral::kZero},
    {"xtc_probability", Neutral::kZero},
    {"top_n_sigma", Neutral::kMinusOne},
    {"dynatemp_range", Neutral::kZero},
    {"logits_processors", Neutral::kEmpty},
    {"chat_template", Neutral::kEmpty},
    {"add_generation_prompt", Neutral::kTrue},
    {"documents", Neutral::kEmpty},
    {"structural_tag", Neutral::kEmpty},
    {"spaces_between_special_tokens", Neutral::kTrue},
    {"samplers", Neutral::kEmpty},
    {"audio", Neutral::kEmpty},
    {"return_tokens_as_token_ids", Neutral::kFalse},
};

bool is_neutral(const Json& value, Neutral neutral) {
    if (value.is_null()) return true;
    switch (neutral) {
        case Neutral::kFalse:
            return value == Json(false);
        case Neutral::kTrue:
            return value == Json(true);
        case Neutral::kZero:
            return value.is_number() && value.get<double>() == 0.0;
        case Neutral::kOne:
            return value.is_number() && value.get<double>() == 1.0;
        case Neutral::kMinusOne:
            return value.is_number() && value.get<double>() == -1.0;
        case Neutral::kEmpty:
            return (value.is_string() || value.is_array() || value.is_object()) && value.empty();
    }
    return false;
}

void reject_unsupported(const Json& body) {
    reject_unsupported_generation_fields(body);
    if (get_int(body, "prompt_logprobs", "", INT_MIN, kIntMax)) {
        fail_request("prompt_logprobs", "'prompt_logprobs' is not supported");
    }
}

}  // namespace

void reject_unsupported_generation_fields(const Json& body) {
    for (const GenerationField& field : kUnsupportedGenerationFields) {
        if (body.contains(field.name) && !is_neutral(body.at(field.name), field.neutral)) {
            fail_request(field.name, "'{}' is not supported by this server (it would change the output)", field.name);
        }
    }
    if (body.contains("modalities") && !body.at("modalities").is_null() &&
        body.at("modalities") != Json::array({"text"})) {
        fail_request("modalities", "'modalities' other than [\"text\"] are not supported");
    }
}

GenerationOptions parse_generation_options(const Json& body, bool chat) {
    GenerationOptions options;
    options.model = get_string(body, "model", "").value_or("");
    options.user = get_string(body, "user", "").value_or("");
    parse_distribution(body, options.sampling);
    parse_length(body, options);
    parse_logprobs(body, chat, options);
    parse_stream(body, options);
    reject_unsupported(body);
    options.structured = parse_structured_output(body);
    if (auto n = get_int(body, "n", "", 1, kMaxCompletions)) options.sampling.n = static_cast<int>(*n);
    if (auto best_of = get_int(body, "best_of", "", 1, kMaxCompletions); best_of && *best_of != options.sampling.n) {
        fail_request("best_of", "'best_of' different from 'n' is not supported (got best_of {} and n {})", *best_of,
                     options.sampling.n);
    }
    if (auto v = get_bool(body, "skip_special_tokens", "")) options.sampling.skip_special_tokens = *v;
    return options;
}

}  // namespace dsv4::server
