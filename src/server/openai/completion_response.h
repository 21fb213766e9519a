// Text completion responses: CompletionStreamSink writes text_completion SSE chunks; CompletionAccumulator collects
// one text_completion object. With echo, each choice's text starts with its prompt's text.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/generation/response_sink.h"
#include "server/http/sse.h"
#include "server/openai/api_types.h"
#include "server/openai/response_json.h"

namespace dsv4::server {

struct CompletionResponseOptions {
    int num_choices = 1;
    bool logprobs = false;
    StreamOptions stream;
    std::vector<std::string> echo_text;  // per choice; empty without echo
};

class CompletionStreamSink : public ResponseSink {
  public:
    CompletionStreamSink(ByteSink& out, ResponseIdentity identity, CompletionResponseOptions options);

    bool on_start() override;
    bool on_update(int choice, const ChoiceUpdate& update, const UsageCounts& usage) override;
    bool on_choice_end(int choice, const ChoiceEnd& end, const UsageCounts& usage) override;
    bool on_complete(const UsageCounts& usage) override;
    void on_error(const ApiError& error) override;

  private:
    bool send_chunk(int choice, std::string_view text, const std::vector<LogprobEntry>* logprobs, const ChoiceEnd* end,
                    const UsageCounts& usage);

    ByteSink* out_;
    ResponseIdentity identity_;
    CompletionResponseOptions options_;
    std::vector<size_t> text_offsets_;  // per choice, for logprobs.text_offset
    std::string prefix_;                // {"id":…,"object":"text_completion","created":…,"model":…,"choices":[
    std::string scratch_;
};

class CompletionAccumulator : public ResponseSink {
  public:
    CompletionAccumulator(ResponseIdentity identity, CompletionResponseOptions options);

    bool on_start() override { return true; }
    bool on_update(int choice, const ChoiceUpdate& update, const UsageCounts& usage) override;
    bool on_choice_end(int choice, const ChoiceEnd& end, const UsageCounts& usage) override;
    bool on_complete(const UsageCounts& usage) override;
    void on_error(const ApiError& error) override { error_ = error; }

    const std::optional<ApiError>& error() const { return error_; }
    std::string response_json() const;

  private:
    struct Choice {
        std::string text;
        std::vector<LogprobEntry> logprobs;
        ChoiceEnd end;
    };
    ResponseIdentity identity_;
    CompletionResponseOptions options_;
    std::vector<Choice> choices_;
    UsageCounts usage_;
    std::optional<ApiError> error_;
};

}  // namespace dsv4::server
