// Prometheus metrics (text exposition format 0.0.4) for GET /metrics. Names follow vLLM wherever the meaning is the
// same (vllm:num_requests_running, vllm:time_to_first_token_seconds, vllm:spec_decode_num_accepted_tokens_total, ...)
// so dashboards and `vllm bench serve` work unmodified; what only dsv4 has is prefixed dsv4:. Every sample carries
// model_name like vLLM's. Engine-side numbers come from Engine::stats() at scrape time; request-level histograms
// are observed by the server as events stream out.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dsv4/engine.h"

namespace dsv4::server {

class Histogram {
  public:
    explicit Histogram(std::vector<double> upper_bounds);  // sorted, +Inf implied
    void observe(double value);

    struct Snapshot {
        std::vector<uint64_t> cumulative;  // per bound, then +Inf
        double sum = 0.0;
        uint64_t count = 0;
    };
    Snapshot snapshot() const;
    const std::vector<double>& upper_bounds() const { return bounds_; }

  private:
    std::vector<double> bounds_;
    mutable std::mutex mutex_;
    std::vector<uint64_t> counts_;  // per bucket (not cumulative), +Inf last
    double sum_ = 0.0;
    uint64_t count_ = 0;
};

enum class FinishLabel : uint8_t { kStop, kLength, kAbort, kError, kCount };

// Structured outputs: compiled grammars and the token masks computed on the engine threads. Shared (shared_ptr) with
// the constraints, which may outlive a request.
struct StructuredOutputMetrics {
    StructuredOutputMetrics();
    Histogram mask_seconds;     // dsv4:structured_output_mask_seconds: one token mask (cache hits included)
    Histogram compile_seconds;  // dsv4:structured_output_compile_seconds: one grammar compile (cache misses)
    std::atomic<uint64_t> grammars_compiled{0};
    std::atomic<uint64_t> grammar_cache_hits{0};
    std::atomic<uint64_t> grammar_errors{0};  // schemas / grammars refused with a 400
    std::atomic<uint64_t> mask_cache_hits{0};
};

class ServerMetrics {
  public:
    ServerMetrics();

    Histogram time_to_first_token;        // vllm:time_to_first_token_seconds
    Histogram inter_token_latency;        // vllm:inter_token_latency_seconds (per engine event); also exported as
                                          // vllm:time_per_output_token_seconds, its name before vLLM 0.11
    Histogram e2e_latency;                // vllm:e2e_request_latency_seconds
    Histogram request_prompt_tokens;      // vllm:request_prompt_tokens
    Histogram request_generation_tokens;  // vllm:request_generation_tokens
    Histogram event_overhead;             // dsv4:stream_event_overhead_seconds: engine event popped -> bytes written
    // Per completion, from its engine events (vLLM's definitions): queue = submitted -> first scheduled, prefill =
    // scheduled -> first token, decode = first -> last token, inference = scheduled -> last token.
    Histogram queue_time;                         // vllm:request_queue_time_seconds
    Histogram prefill_time;                       // vllm:request_prefill_time_seconds
    Histogram decode_time;                        // vllm:request_decode_time_seconds
    Histogram inference_time;                     // vllm:request_inference_time_seconds
    Histogram request_time_per_output_token;      // vllm:request_time_per_output_token_seconds (decode / (tokens-1))
    Histogram request_max_num_generation_tokens;  // vllm:request_max_num_generation_tokens (max_tokens asked)
    Histogram request_params_n;                   // vllm:request_params_n
    Histogram request_params_max_tokens;          // vllm:request_params_max_tokens
    std::shared_ptr<StructuredOutputMetrics> structured = std::make_shared<StructuredOutputMetrics>();

    void count_finish(FinishLabel label) { finished_[static_cast<size_t>(label)].fetch_add(1); }
    void count_http_status(int status);
    void count_client_disconnect() { client_disconnects_.fetch_add(1); }
    void count_rejection(std::string_view reason);  // rejection_reason() of api_error.h

    // The whole exposition. `stats` and `cache` are null while the model is loading; `in_flight`: HTTP generation
    // requests being served.
    std::string render(std::string_view model_name, const EngineStats* stats, const CacheInfo* cache,
                       int in_flight) const;

  private:
    std::array<std::atomic<uint64_t>, static_cast<size_t>(FinishLabel::kCount)> finished_{};
    std::atomic<uint64_t> client_disconnects_{0};
    mutable std::mutex maps_mutex_;
    std::map<int, uint64_t> http_statuses_;
    std::map<std::string, uint64_t, std::less<>> rejections_;
};

// A Prometheus label value with \, " and newline escaped.
std::string escape_label_value(std::string_view value);

}  // namespace dsv4::server
