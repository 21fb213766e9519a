// ResponseSink: what the generation driver reports to, per choice. Four implementations: chat / completions, each
// streamed (SSE chunks) or accumulated into one JSON response.
#pragma once

#include <string>

#include "server/generation/choice_pipeline.h"
#include "server/http/api_error.h"

namespace dsv4::server {

struct UsageCounts {
    int prompt_tokens = 0;
    int completion_tokens = 0;
    int cached_tokens = 0;     // prompt tokens served from the prefix cache
    int reasoning_tokens = 0;  // chat in thinking mode
    int total() const { return prompt_tokens + completion_tokens; }
};

struct ChoiceEnd {
    std::string finish_reason;  // stop | length | tool_calls | abort
    // vLLM's stop_reason: the matched stop string, or the stop token id; both empty/-1 for EOS and non-stops.
    std::string stop_string;
    int64_t stop_token = -1;
};

class ResponseSink {
  public:
    virtual ~ResponseSink() = default;
    // Before any output (streams send their first chunks here). All methods return false once the client is gone.
    virtual bool on_start() = 0;
    virtual bool on_update(int choice, const ChoiceUpdate& update, const UsageCounts& usage) = 0;
    virtual bool on_choice_end(int choice, const ChoiceEnd& end, const UsageCounts& usage) = 0;
    // Every choice ended.
    virtual bool on_complete(const UsageCounts& usage) = 0;
    // The engine failed the request after output started (streams send an error event; others answer with it).
    virtual void on_error(const ApiError& error) = 0;
};

}  // namespace dsv4::server
