#include "server/openai/response_json.h"

#include <cmath>

#include "server/http/sse.h"

namespace dsv4::server {
namespace {

using nlohmann::json;

json byte_list(std::string_view bytes) {
    json list = json::array();
    for (char c : bytes) list.push_back(static_cast<unsigned>(static_cast<unsigned char>(c)));
    return list;
}

double finite_logprob(float value) {
    return std::isfinite(value) ? static_cast<double>(value) : -9999.0;
}

}  // namespace

json usage_json(const UsageCounts& usage, bool with_reasoning) {
    json out = {{"prompt_tokens", usage.prompt_tokens},
                {"completion_tokens", usage.completion_tokens},
                {"total_tokens", usage.total()},
                {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
    // OpenAI always sends the details; reasoning_tokens is 0 outside thinking mode.
    out["completion_tokens_details"] = {{"reasoning_tokens", with_reasoning ? usage.reasoning_tokens : 0}};
    return out;
}

void append_chat_logprobs_text(std::string& out, const std::vector<LogprobEntry>& entries) {
    out += "{\"content\":[";
    for (size_t i = 0; i < entries.size(); ++i) {
        const LogprobEntry& entry = entries[i];
        if (i > 0) out += ',';
        out += "{\"token\":";
        append_json_string(out, entry.text);
        out += ",\"logprob\":";
        append_json_float(out, entry.logprob);
        out += ",\"bytes\":";
        append_json_byte_array(out, entry.bytes);
        out += ",\"top_logprobs\":[";
        for (size_t k = 0; k < entry.top.size(); ++k) {
            if (k > 0) out += ',';
            out += "{\"token\":";
            append_json_string(out, entry.top[k].text);
            out += ",\"logprob\":";
            append_json_float(out, entry.top[k].logprob);
            out += ",\"bytes\":";
            append_json_byte_array(out, entry.top[k].bytes);
            out += '}';
        }
        out += "]}";
    }
    out += "]}";
}

json chat_logprobs_json(const std::vector<LogprobEntry>& entries) {
    json content = json::array();
    for (const LogprobEntry& entry : entries) {
        json top = json::array();
        for (const TopLogprob& alternative : entry.top) {
            top.push_back({{"token", alternative.text},
                           {"logprob", finite_logprob(alternative.logprob)},
                           {"bytes", byte_list(alternative.bytes)}});
        }
        content.push_back({{"token", entry.text},
                           {"logprob", finite_logprob(entry.logprob)},
                           {"bytes", byte_list(entry.bytes)},
                           {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
}

json completion_logprobs_json(const std::vector<LogprobEntry>& entries, size_t& offset) {
    json tokens = json::array();
    json token_logprobs = json::array();
    json top_logprobs = json::array();
    json text_offset = json::array();
    for (const LogprobEntry& entry : entries) {
        tokens.push_back(entry.text);
        token_logprobs.push_back(finite_logprob(entry.logprob));
        json top = json::object();
        for (const TopLogprob& alternative : entry.top) top[alternative.text] = finite_logprob(alternative.logprob);
        top_logprobs.push_back(std::move(top));
        text_offset.push_back(offset);
        offset += entry.text.size();
    }
    return {{"tokens", std::move(tokens)},
            {"token_logprobs", std::move(token_logprobs)},
            {"top_logprobs", std::move(top_logprobs)},
            {"text_offset", std::move(text_offset)}};
}

json stop_reason_json(const ChoiceEnd& end) {
    if (!end.stop_string.empty()) return end.stop_string;
    if (end.stop_token >= 0) return end.stop_token;
    return nullptr;
}

}  // namespace dsv4::server
