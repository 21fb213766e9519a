// Chat completion responses: ChatStreamSink writes chat.completion.chunk SSE events; ChatAccumulator collects the
// choices into one chat.completion object. Reasoning goes out under both `reasoning_content` (DeepSeek / SGLang /
// older vLLM) and `reasoning` (vLLM >= 0.28), so clients of either convention see it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/generation/response_sink.h"
#include "server/http/sse.h"
#include "server/openai/api_types.h"
#include "server/openai/response_json.h"
#include "tokenizer/output_parser.h"

namespace dsv4::server {

struct ChatResponseOptions {
    int num_choices = 1;
    bool logprobs = false;
    bool thinking = false;  // report reasoning_tokens in usage
    StreamOptions stream;
};

class ChatStreamSink : public ResponseSink {
  public:
    ChatStreamSink(ByteSink& out, ResponseIdentity identity, ChatResponseOptions options);

    bool on_start() override;
    bool on_update(int choice, const ChoiceUpdate& update, const UsageCounts& usage) override;
    bool on_choice_end(int choice, const ChoiceEnd& end, const UsageCounts& usage) override;
    bool on_complete(const UsageCounts& usage) override;
    void on_error(const ApiError& error) override;

  private:
    // One chunk with one choice whose body (after "index") is `choice_body`.
    bool send_chunk(int choice, std::string_view choice_body, const UsageCounts& usage);
    void append_delta(std::string& body, const OutputDelta& delta) const;

    ByteSink* out_;
    ResponseIdentity identity_;
    ChatResponseOptions options_;
    std::string prefix_;  // {"id":…,"object":"chat.completion.chunk","created":…,"model":…,"choices":[
    std::string scratch_;
};

class ChatAccumulator : public ResponseSink {
  public:
    ChatAccumulator(ResponseIdentity identity, ChatResponseOptions options);

    bool on_start() override { return true; }
    bool on_update(int choice, const ChoiceUpdate& update, const UsageCounts& usage) override;
    bool on_choice_end(int choice, const ChoiceEnd& end, const UsageCounts& usage) override;
    bool on_complete(const UsageCounts& usage) override;
    void on_error(const ApiError& error) override { error_ = error; }

    const std::optional<ApiError>& error() const { return error_; }
    // The chat.completion object (after on_complete).
    std::string response_json() const;

  private:
    struct Choice {
        ParsedOutput output;
        std::vector<LogprobEntry> logprobs;
        ChoiceEnd end;
    };
    ResponseIdentity identity_;
    ChatResponseOptions options_;
    std::vector<Choice> choices_;
    UsageCounts usage_;
    std::optional<ApiError> error_;
};

}  // namespace dsv4::server
