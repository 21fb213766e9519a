// ChoicePipeline: one completion choice's token ids -> what the client may see. Per token, in order:
// StreamingDetokenizer (never splits a UTF-8 character) -> StopFilter (holds back text that could start a stop
// string, cuts at a match) -> for chat, StreamingOutputParser (reasoning / content / tool-call deltas, never leaks
// DSML). Once a stop string matched, later tokens are ignored: the caller must then end the choice
// (Engine::finish) and no text after the stop is ever produced.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dsv4/engine.h"
#include "server/generation/stop_filter.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::server {

struct ChoiceConfig {
    bool chat = false;      // parse reasoning and tool calls (chat completions); else plain text deltas
    bool thinking = false;  // the prompt ended with <think>: the output starts as reasoning
    bool skip_special_tokens = true;
    std::vector<std::string> stop;
    bool include_stop_str_in_output = false;
    int min_tokens = 0;  // stop strings are not matched in text of the first min_tokens tokens (vLLM)
    std::string tool_call_id_prefix = "call_";
    bool parallel_tool_calls = true;   // false: only the first tool call is returned
    int32_t reasoning_end_token = -1;  // the </think> id: tokens up to it count as reasoning tokens
    bool logprobs = false;
};

struct TopLogprob {
    int32_t token = 0;
    std::string text;   // the token's decoded text (U+FFFD for a partial UTF-8 sequence)
    std::string bytes;  // the raw bytes the token contributes
    float logprob = 0.0f;
};

struct LogprobEntry {
    int32_t token = 0;
    std::string text;
    std::string bytes;  // the raw bytes the token contributes
    float logprob = 0.0f;
    std::vector<TopLogprob> top;
};

struct ChoiceUpdate {
    std::vector<OutputDelta> deltas;     // completions: only kContent deltas
    std::vector<LogprobEntry> logprobs;  // one per token consumed by this update (when requested)
    bool stopped = false;                // a stop string matched in this update
    std::string stop_reason;             // the matched stop string
    bool empty() const { return deltas.empty() && logprobs.empty() && !stopped; }
};

class ChoicePipeline {
  public:
    // `tokenizer` must outlive the pipeline.
    ChoicePipeline(const tokenizer::Tokenizer& tokenizer, ChoiceConfig config);

    // Tokens of one engine event. `stop_token`: the event ended the choice with this stop/EOS token; when it is the
    // last token it is counted but not turned into text.
    ChoiceUpdate push(const std::vector<GeneratedToken>& tokens, std::optional<int32_t> stop_token);
    // The choice ended (finished event, stop string, abort): releases held text and closes open tool calls.
    ChoiceUpdate finish();

    int completion_tokens() const { return completion_tokens_; }
    int reasoning_tokens() const { return reasoning_tokens_; }
    bool saw_tool_calls() const { return saw_tool_calls_; }
    bool stopped() const { return stop_.stopped(); }
    const std::string& stop_reason() const { return stop_reason_; }
    bool finished() const { return finished_; }

  private:
    void consume_token(const GeneratedToken& token, bool is_stop_token, ChoiceUpdate& update);
    void route_text(std::string_view text, ChoiceUpdate& update);
    LogprobEntry make_logprob_entry(const GeneratedToken& token) const;
    void append_deltas(std::vector<OutputDelta> deltas, ChoiceUpdate& update);

    const tokenizer::Tokenizer* tokenizer_;
    ChoiceConfig config_;
    tokenizer::StreamingDetokenizer detokenizer_;
    StopFilter stop_;
    std::optional<StreamingOutputParser> parser_;  // chat only
    int completion_tokens_ = 0;
    int reasoning_tokens_ = 0;
    bool in_reasoning_;
    bool saw_tool_calls_ = false;
    bool finished_ = false;
    std::string stop_reason_;
};

// Appends `delta` to `out`, merging it into the last delta when both are text of the same kind (and tool index).
void append_merged(std::vector<OutputDelta>& out, OutputDelta delta);

}  // namespace dsv4::server
