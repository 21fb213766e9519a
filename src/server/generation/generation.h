// GenerationRun: drives one HTTP generation request through the engine. It submits one engine request per prompt
// (n completions each), pops their result streams, feeds every choice's tokens through a ChoicePipeline, reports to
// a ResponseSink, calls Engine::finish when a stop string matches and Engine::abort when the client leaves, and
// records the request-level metrics (TTFT, inter-token latency, end-to-end latency, server overhead per event).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dsv4/engine.h"
#include "server/generation/choice_pipeline.h"
#include "server/generation/response_sink.h"
#include "server/http/metrics.h"

namespace dsv4::server {

struct EngineJob {
    std::string request_id;
    std::vector<int32_t> prompt_tokens;
};

struct GenerationSpec {
    SamplingParams params;        // validated; params.n completions per job
    ChoiceConfig choice;          // per-choice copies get a unique tool-call id prefix
    std::vector<EngineJob> jobs;  // choice index = job index * n + completion index
    std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
};

class GenerationRun {
  public:
    using Clock = std::chrono::steady_clock;

    GenerationRun(Engine& engine, const tokenizer::Tokenizer& tokenizer, ServerMetrics& metrics, GenerationSpec spec);
    ~GenerationRun();  // aborts engine requests that are still running
    GenerationRun(const GenerationRun&) = delete;
    GenerationRun& operator=(const GenerationRun&) = delete;

    // Submits every job. A rejection aborts the jobs already admitted and throws the matching ApiError
    // (400 invalid / too long, 429 queue full, 503 draining).
    void submit();

    // Streams everything to `sink` until every choice has ended. `client_gone` is set from outside (the connection
    // watcher) when the peer disconnects; a sink returning false means the same. Either way the engine requests are
    // aborted and their remaining events drained without writing.
    UsageCounts run(ResponseSink& sink, const std::atomic<bool>& client_gone);

    // Aborts every engine request that has not finished (idempotent, any thread).
    void abort_all();
    std::vector<std::string> request_ids() const;
    bool client_left() const { return client_left_; }

  private:
    struct ChoiceState {
        std::unique_ptr<ChoicePipeline> pipeline;
        bool ended = false;
    };
    struct JobState {
        EngineJob job;
        std::shared_ptr<ResultStream> stream;
        int finished_completions = 0;
        int cached_tokens = 0;
        bool saw_token = false;
        Clock::time_point last_token_time;
    };

    std::optional<std::pair<size_t, RequestOutput>> next_event(std::chrono::milliseconds wait);
    bool all_done() const;
    // false: stop writing (client gone or the request failed).
    bool handle_event(size_t job_index, RequestOutput& event, ResponseSink& sink);
    bool end_choice(int choice, ChoiceUpdate update, ChoiceEnd end, ResponseSink& sink);
    void observe_token_timing(JobState& job, const RequestOutput& event);
    void drain_after_abort();
    UsageCounts usage() const;

    Engine* engine_;
    const tokenizer::Tokenizer* tokenizer_;
    ServerMetrics* metrics_;
    GenerationSpec spec_;
    std::vector<JobState> jobs_;
    std::vector<ChoiceState> choices_;
    size_t rotation_ = 0;
    bool client_left_ = false;
    bool failed_ = false;
};

// The OpenAI finish_reason for an engine finish (tool_calls when the choice produced tool calls and stopped).
std::string openai_finish_reason(FinishReason reason, bool saw_tool_calls);

}  // namespace dsv4::server
