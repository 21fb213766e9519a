#include "server/openai/chat_response.h"

#include <fmt/format.h>

namespace dsv4::server {

using nlohmann::json;

ChatStreamSink::ChatStreamSink(ByteSink& out, ResponseIdentity identity, ChatResponseOptions options)
    : out_(&out), identity_(std::move(identity)), options_(options) {
    prefix_ = "{\"id\":";
    append_json_string(prefix_, identity_.id);
    fmt::format_to(std::back_inserter(prefix_),
                   ",\"object\":\"chat.completion.chunk\",\"created\":{},\"model\":", identity_.created);
    append_json_string(prefix_, identity_.model);
    prefix_ += ",\"choices\":[";
}

bool ChatStreamSink::send_chunk(int choice, std::string_view choice_body, const UsageCounts& usage) {
    scratch_.clear();
    scratch_ += "data: ";
    scratch_ += prefix_;
    fmt::format_to(std::back_inserter(scratch_), "{{\"index\":{},", choice);
    scratch_ += choice_body;
    scratch_ += "}]";
    if (options_.stream.include_usage) {
        scratch_ += ",\"usage\":";
        scratch_ += options_.stream.continuous_usage_stats ? usage_json(usage, options_.thinking).dump() : "null";
    }
    scratch_ += "}\n\n";
    return out_->write(scratch_);
}

bool ChatStreamSink::on_start() {
    const UsageCounts none;
    for (int i = 0; i < options_.num_choices; ++i) {
        if (!send_chunk(i, R"("delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null)", none)) {
            return false;
        }
    }
    return true;
}

void ChatStreamSink::append_delta(std::string& body, const OutputDelta& delta) const {
    switch (delta.kind) {
        case OutputDeltaKind::kContent:
            body += "\"content\":";
            append_json_string(body, delta.text);
            break;
        case OutputDeltaKind::kReasoning:
            body += "\"reasoning_content\":";
            append_json_string(body, delta.text);
            body += ",\"reasoning\":";
            append_json_string(body, delta.text);
            break;
        case OutputDeltaKind::kToolCallStart:
            fmt::format_to(std::back_inserter(body), "\"tool_calls\":[{{\"index\":{},\"id\":", delta.tool_index);
            append_json_string(body, delta.tool_call_id);
            body += ",\"type\":\"function\",\"function\":{\"name\":";
            append_json_string(body, delta.tool_name);
            body += ",\"arguments\":\"\"}}]";
            break;
        case OutputDeltaKind::kToolCallArguments:
            fmt::format_to(std::back_inserter(body),
                           "\"tool_calls\":[{{\"index\":{},\"function\":{{\"arguments\":", delta.tool_index);
            append_json_string(body, delta.text);
            body += "}}]";
            break;
        case OutputDeltaKind::kToolCallEnd:
            break;
    }
}

bool ChatStreamSink::on_update(int choice, const ChoiceUpdate& update, const UsageCounts& usage) {
    bool logprobs_sent = !options_.logprobs || update.logprobs.empty();
    std::string body;
    for (const OutputDelta& delta : update.deltas) {
        if (delta.kind == OutputDeltaKind::kToolCallEnd) continue;
        body.clear();
        body += "\"delta\":{";
        append_delta(body, delta);
        body += "},\"logprobs\":";
        if (!logprobs_sent) {
            append_chat_logprobs_text(body, update.logprobs);
            logprobs_sent = true;
        } else {
            body += "null";
        }
        body += ",\"finish_reason\":null";
        if (!send_chunk(choice, body, usage)) return false;
    }
    if (!logprobs_sent) {  // tokens whose text is still held back: their logprobs go out now
        body = "\"delta\":{},\"logprobs\":";
        append_chat_logprobs_text(body, update.logprobs);
        body += ",\"finish_reason\":null";
        if (!send_chunk(choice, body, usage)) return false;
    }
    return true;
}

bool ChatStreamSink::on_choice_end(int choice, const ChoiceEnd& end, const UsageCounts& usage) {
    std::string body = "\"delta\":{},\"logprobs\":null,\"finish_reason\":";
    append_json_string(body, end.finish_reason);
    body += ",\"stop_reason\":";
    body += stop_reason_json(end).dump();
    return send_chunk(choice, body, usage);
}

bool ChatStreamSink::on_complete(const UsageCounts& usage) {
    if (options_.stream.include_usage) {
        std::string chunk = prefix_;
        chunk += "],\"usage\":";
        chunk += usage_json(usage, options_.thinking).dump();
        chunk += '}';
        if (!out_->write(sse_event(chunk))) return false;
    }
    return out_->write(kSseDone);
}

void ChatStreamSink::on_error(const ApiError& error) {
    if (out_->write(sse_event(error.to_json()))) out_->write(kSseDone);
}

ChatAccumulator::ChatAccumulator(ResponseIdentity identity, ChatResponseOptions options)
    : identity_(std::move(identity)), options_(options), choices_(static_cast<size_t>(options.num_choices)) {}

bool ChatAccumulator::on_update(int choice, const ChoiceUpdate& update, const UsageCounts& usage) {
    Choice& c = choices_.at(static_cast<size_t>(choice));
    accumulate_deltas(c.output, update.deltas);
    c.logprobs.insert(c.logprobs.end(), update.logprobs.begin(), update.logprobs.end());
    usage_ = usage;
    return true;
}

bool ChatAccumulator::on_choice_end(int choice, const ChoiceEnd& end, const UsageCounts& usage) {
    choices_.at(static_cast<size_t>(choice)).end = end;
    usage_ = usage;
    return true;
}

bool ChatAccumulator::on_complete(const UsageCounts& usage) {
    usage_ = usage;
    return true;
}

std::string ChatAccumulator::response_json() const {
    json choices = json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
        const Choice& c = choices_[i];
        json message = {{"role", "assistant"}};
        const bool has_calls = !c.output.tool_calls.empty();
        message["content"] = (has_calls && c.output.content.empty()) ? json(nullptr) : json(c.output.content);
        const json reasoning = c.output.reasoning.empty() ? json(nullptr) : json(c.output.reasoning);
        message["reasoning_content"] = reasoning;
        message["reasoning"] = reasoning;
        if (has_calls) {
            json calls = json::array();
            for (const ParsedToolCall& call : c.output.tool_calls) {
                calls.push_back({{"id", call.id},
                                 {"type", "function"},
                                 {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
            }
            message["tool_calls"] = std::move(calls);
        }
        choices.push_back({{"index", i},
                           {"message", std::move(message)},
                           {"logprobs", options_.logprobs ? chat_logprobs_json(c.logprobs) : json(nullptr)},
                           {"finish_reason", c.end.finish_reason},
                           {"stop_reason", stop_reason_json(c.end)}});
    }
    json response = {
        {"id", identity_.id},       {"object", "chat.completion"},   {"created", identity_.created},
        {"model", identity_.model}, {"choices", std::move(choices)}, {"usage", usage_json(usage_, options_.thinking)}};
    return response.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace dsv4::server
