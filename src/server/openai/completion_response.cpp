#include "server/openai/completion_response.h"

#include <fmt/format.h>

namespace dsv4::server {

using nlohmann::json;

namespace {

std::string content_text(const ChoiceUpdate& update) {
    std::string text;
    for (const OutputDelta& delta : update.deltas) {
        if (delta.kind == OutputDeltaKind::kContent) text += delta.text;
    }
    return text;
}

json completion_response_header(const ResponseIdentity& identity) {
    return {
        {"id", identity.id}, {"object", "text_completion"}, {"created", identity.created}, {"model", identity.model}};
}

std::string echo_of(const CompletionResponseOptions& options, size_t choice) {
    return choice < options.echo_text.size() ? options.echo_text[choice] : std::string();
}

}  // namespace

CompletionStreamSink::CompletionStreamSink(ByteSink& out, ResponseIdentity identity, CompletionResponseOptions options)
    : out_(&out), identity_(std::move(identity)), options_(std::move(options)) {
    prefix_ = "{\"id\":";
    append_json_string(prefix_, identity_.id);
    fmt::format_to(std::back_inserter(prefix_),
                   ",\"object\":\"text_completion\",\"created\":{},\"model\":", identity_.created);
    append_json_string(prefix_, identity_.model);
    prefix_ += ",\"choices\":[";
    text_offsets_.resize(static_cast<size_t>(options_.num_choices), 0);
    for (size_t i = 0; i < text_offsets_.size(); ++i) text_offsets_[i] = echo_of(options_, i).size();
}

bool CompletionStreamSink::send_chunk(int choice, std::string_view text, const std::vector<LogprobEntry>* logprobs,
                                      const ChoiceEnd* end, const UsageCounts& usage) {
    // Built as text (the per-token hot path), field order as vLLM writes it.
    scratch_.clear();
    scratch_ += "data: ";
    scratch_ += prefix_;
    fmt::format_to(std::back_inserter(scratch_), "{{\"index\":{},\"text\":", choice);
    append_json_string(scratch_, text);
    scratch_ += ",\"logprobs\":";
    if (logprobs != nullptr && options_.logprobs) {
        scratch_ += completion_logprobs_json(*logprobs, text_offsets_.at(static_cast<size_t>(choice)))
                        .dump(-1, ' ', false, json::error_handler_t::replace);
    } else {
        scratch_ += "null";
    }
    scratch_ += ",\"finish_reason\":";
    if (end != nullptr) {
        append_json_string(scratch_, end->finish_reason);
        scratch_ += ",\"stop_reason\":";
        scratch_ += stop_reason_json(*end).dump();
    } else {
        scratch_ += "null,\"stop_reason\":null";
    }
    scratch_ += "}]";
    if (options_.stream.include_usage) {
        scratch_ += ",\"usage\":";
        scratch_ += options_.stream.continuous_usage_stats ? usage_json(usage, false).dump() : "null";
    }
    scratch_ += "}\n\n";
    return out_->write(scratch_);
}

bool CompletionStreamSink::on_start() {
    for (int i = 0; i < options_.num_choices; ++i) {
        const std::string echo = echo_of(options_, static_cast<size_t>(i));
        if (!echo.empty() && !send_chunk(i, echo, nullptr, nullptr, UsageCounts{})) return false;
    }
    return true;
}

bool CompletionStreamSink::on_update(int choice, const ChoiceUpdate& update, const UsageCounts& usage) {
    return send_chunk(choice, content_text(update), &update.logprobs, nullptr, usage);
}

bool CompletionStreamSink::on_choice_end(int choice, const ChoiceEnd& end, const UsageCounts& usage) {
    return send_chunk(choice, "", nullptr, &end, usage);
}

bool CompletionStreamSink::on_complete(const UsageCounts& usage) {
    if (options_.stream.include_usage) {
        json chunk = completion_response_header(identity_);
        chunk["choices"] = json::array();
        chunk["usage"] = usage_json(usage, false);
        if (!out_->write(sse_event(chunk.dump()))) return false;
    }
    return out_->write(kSseDone);
}

void CompletionStreamSink::on_error(const ApiError& error) {
    if (out_->write(sse_event(error.to_json()))) out_->write(kSseDone);
}

CompletionAccumulator::CompletionAccumulator(ResponseIdentity identity, CompletionResponseOptions options)
    : identity_(std::move(identity)),
      options_(std::move(options)),
      choices_(static_cast<size_t>(options_.num_choices)) {
    for (size_t i = 0; i < choices_.size(); ++i) choices_[i].text = echo_of(options_, i);
}

bool CompletionAccumulator::on_update(int choice, const ChoiceUpdate& update, const UsageCounts& usage) {
    Choice& c = choices_.at(static_cast<size_t>(choice));
    c.text += content_text(update);
    c.logprobs.insert(c.logprobs.end(), update.logprobs.begin(), update.logprobs.end());
    usage_ = usage;
    return true;
}

bool CompletionAccumulator::on_choice_end(int choice, const ChoiceEnd& end, const UsageCounts& usage) {
    choices_.at(static_cast<size_t>(choice)).end = end;
    usage_ = usage;
    return true;
}

bool CompletionAccumulator::on_complete(const UsageCounts& usage) {
    usage_ = usage;
    return true;
}

std::string CompletionAccumulator::response_json() const {
    json choices = json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
        const Choice& c = choices_[i];
        size_t offset = echo_of(options_, i).size();
        choices.push_back(
            {{"index", i},
             {"text", c.text},
             {"logprobs", options_.logprobs ? completion_logprobs_json(c.logprobs, offset) : json(nullptr)},
             {"finish_reason", c.end.finish_reason},
             {"stop_reason", stop_reason_json(c.end)}});
    }
    json response = completion_response_header(identity_);
    response["choices"] = std::move(choices);
    response["usage"] = usage_json(usage_, false);
    return response.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace dsv4::server
