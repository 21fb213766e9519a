#include "server/generation/choice_pipeline.h"

#include <span>

namespace dsv4::server {
namespace {

bool is_text_kind(OutputDeltaKind kind) {
    return kind == OutputDeltaKind::kReasoning || kind == OutputDeltaKind::kContent ||
           kind == OutputDeltaKind::kToolCallArguments;
}

}  // namespace

void append_merged(std::vector<OutputDelta>& out, OutputDelta delta) {
    if (!out.empty()) {
        OutputDelta& last = out.back();
        if (is_text_kind(delta.kind) && last.kind == delta.kind && last.tool_index == delta.tool_index) {
            last.text += delta.text;
            return;
        }
    }
    out.push_back(std::move(delta));
}

ChoicePipeline::ChoicePipeline(const tokenizer::Tokenizer& tokenizer, ChoiceConfig config)
    : tokenizer_(&tokenizer),
      config_(std::move(config)),
      detokenizer_(tokenizer, config_.skip_special_tokens),
      stop_(config_.stop, config_.include_stop_str_in_output),
      in_reasoning_(config_.chat && config_.thinking) {
    if (config_.chat) {
        parser_.emplace(
            OutputParserOptions{.thinking = config_.thinking, .tool_call_id_prefix = config_.tool_call_id_prefix});
    }
}

ChoiceUpdate ChoicePipeline::push(const std::vector<GeneratedToken>& tokens, std::optional<int32_t> stop_token) {
    ChoiceUpdate update;
    for (size_t i = 0; i < tokens.size() && !stop_.stopped() && !finished_; ++i) {
        const bool is_stop_token = stop_token && i + 1 == tokens.size() && tokens[i].token == *stop_token;
        consume_token(tokens[i], is_stop_token, update);
    }
    return update;
}

void ChoicePipeline::consume_token(const GeneratedToken& token, bool is_stop_token, ChoiceUpdate& update) {
    ++completion_tokens_;
    if (in_reasoning_) {
        ++reasoning_tokens_;
        if (token.token == config_.reasoning_end_token) in_reasoning_ = false;
    }
    if (config_.logprobs) update.logprobs.push_back(make_logprob_entry(token));
    if (is_stop_token) return;  // EOS / stop_token_ids never become text
    const std::string text = detokenizer_.push(token.token);
    if (text.empty()) return;
    StopFilter::Result result = stop_.push(text, completion_tokens_ > config_.min_tokens);
    route_text(result.emit, update);
    if (result.stopped) {
        update.stopped = true;
        update.stop_reason = result.matched;
        stop_reason_ = std::move(result.matched);
    }
}

void ChoicePipeline::route_text(std::string_view text, ChoiceUpdate& update) {
    if (text.empty()) return;
    if (parser_) {
        append_deltas(parser_->push(text), update);
    } else {
        OutputDelta delta;
        delta.kind = OutputDeltaKind::kContent;
        delta.text = std::string(text);
        append_merged(update.deltas, std::move(delta));
    }
}

void ChoicePipeline::append_deltas(std::vector<OutputDelta> deltas, ChoiceUpdate& update) {
    for (OutputDelta& delta : deltas) {
        if (delta.kind != OutputDeltaKind::kReasoning && delta.kind != OutputDeltaKind::kContent) {
            if (!config_.parallel_tool_calls && delta.tool_index > 0) continue;
            saw_tool_calls_ = true;
        }
        append_merged(update.deltas, std::move(delta));
    }
}

ChoiceUpdate ChoicePipeline::finish() {
    ChoiceUpdate update;
    if (finished_) return update;
    finished_ = true;
    if (!stop_.stopped()) {
        // Whatever the detokenizer and the stop filter still hold is real output (no stop string completed).
        std::string tail = stop_.push(detokenizer_.flush(), false).emit;
        tail += stop_.flush();
        route_text(tail, update);
    }
    if (parser_) append_deltas(parser_->finish(), update);
    return update;
}

LogprobEntry ChoicePipeline::make_logprob_entry(const GeneratedToken& token) const {
    LogprobEntry entry;
    entry.token = token.token;
    const int32_t id = token.token;
    entry.text = tokenizer_->decode(std::span<const int32_t>(&id, 1), false);
    entry.bytes = std::string(tokenizer_->token_bytes(id));
    entry.logprob = token.logprob.value_or(0.0f);
    entry.top.reserve(token.top.size());
    for (const TokenLogprob& alternative : token.top) {
        const int32_t alt_id = alternative.token;
        entry.top.push_back({alt_id, tokenizer_->decode(std::span<const int32_t>(&alt_id, 1), false),
                             std::string(tokenizer_->token_bytes(alt_id)), alternative.logprob});
    }
    return entry;
}

}  // namespace dsv4::server
