#include "server/http/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace dsv4::server {
namespace {

// vLLM's buckets, so histograms from both servers can be compared directly.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                                          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                         0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kE2eBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                         30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kTokenCountBuckets = {1,    2,    5,    10,    20,    50,    100,    200,    500,
                                                1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000};
const std::vector<double> kOverheadBuckets = {1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 1e-2, 0.1};
const std::vector<double> kParamsNBuckets = {1, 2, 5, 10, 20};
const std::vector<double> kMaskBuckets = {1e-6,   2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4,
                                          2.5e-4, 5e-4,   1e-3, 5e-3, 0.01,   0.05};
const std::vector<double> kCompileBuckets = {1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5};

constexpr std::array<std::string_view, static_cast<size_t>(FinishLabel::kCount)> kFinishNames = {"stop", "length",
                                                                                                 "abort", "error"};

class Writer {
  public:
    explicit Writer(std::string_view model_name)
        : labels_(fmt::format("model_name=\"{}\"", escape_label_value(model_name))) {}

    void header(std::string_view name, std::string_view type, std::string_view help) {
        fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    }
    void sample(std::string_view name, double value, std::string_view extra_labels = {}) {
        fmt::format_to(std::back_inserter(out_), "{}{{{}{}{}}} ", name, labels_, extra_labels.empty() ? "" : ",",
                       extra_labels);
        // Counts print as integers (fmt would write 1e+06); other values in shortest round-trip form.
        if (value == std::floor(value) && std::fabs(value) < 9.0e15) {
            fmt::format_to(std::back_inserter(out_), "{}\n", static_cast<int64_t>(value));
        } else {
            fmt::format_to(std::back_inserter(out_), "{}\n", value);
        }
    }
    void gauge(std::string_view name, std::string_view help, double value) {
        header(name, "gauge", help);
        sample(name, value);
    }
    void counter(std::string_view name, std::string_view help, double value) {
        header(name, "counter", help);
        sample(name, value);
    }
    void histogram(std::string_view name, std::string_view help, const Histogram& histogram) {
        histogram_samples(name, help, histogram.upper_bounds(), histogram.snapshot());
    }
    void histogram_samples(std::string_view name, std::string_view help, const std::vector<double>& bounds,
                           const Histogram::Snapshot& snap) {
        header(name, "histogram", help);
        const std::string bucket = fmt::format("{}_bucket", name);
        for (size_t i = 0; i < bounds.size(); ++i) {
            sample(bucket, static_cast<double>(snap.cumulative[i]), fmt::format("le=\"{}\"", bounds[i]));
        }
        sample(bucket, static_cast<double>(snap.count), "le=\"+Inf\"");
        sample(fmt::format("{}_sum", name), snap.sum);
        sample(fmt::format("{}_count", name), static_cast<double>(snap.count));
    }
    std::string take() { return std::move(out_); }

  private:
    std::string labels_;
    std::string out_;
};

// The memory tiers (docs/operations.md "Memory tiers"): prefix-cache hits by the tier their blocks came from (they
// sum to vllm:prefix_cache_hits_total), the expert cache, and the bytes each tier moved over PCIe.
void render_tiers(Writer& w, const EngineStats& s) {
    w.header("dsv4:prefix_cache_hits_by_tier_total", "counter",
             "Prompt tokens found in the prefix cache, by the tier their blocks were in (device, host, disk).");
    constexpr std::array<std::string_view, 3> kTiers = {"device", "host", "disk"};
    for (size_t t = 0; t < kTiers.size(); ++t) {
        w.sample("dsv4:prefix_cache_hits_by_tier_total", static_cast<double>(s.prefix_cache_hits_by_tier[t]),
                 fmt::format("tier=\"{}\"", kTiers[t]));
    }
    w.counter("dsv4:kv_disk_corrupt_total", "Disk KV entries found truncated or corrupted (removed, recomputed).",
              static_cast<double>(s.kv_disk_corrupt));
    w.counter("dsv4:expert_cache_queries_total", "Routed (token, expert) pairs under the expert tier.",
              static_cast<double>(s.expert_pairs));
    w.counter("dsv4:expert_cache_hits_total", "Routed pairs whose expert was resident on the device.",
              static_cast<double>(s.expert_hit_pairs));
    w.counter("dsv4:expert_host_pairs_total", "Routed pairs computed on the host CPU.",
              static_cast<double>(s.expert_host_pairs));
    w.counter("dsv4:expert_in_place_pairs_total", "Routed pairs whose expert was read from host memory in place.",
              static_cast<double>(s.expert_in_place_pairs));
    w.header("dsv4:tier_bytes_total", "counter", "Bytes the memory tiers moved, by direction.");
    const std::array<std::pair<std::string_view, int64_t>, 7> moved = {{
        {"kv_device_to_host", s.kv_offloaded_bytes},
        {"kv_host_to_device", s.kv_loaded_bytes},
        {"kv_disk_to_device", s.kv_disk_loaded_bytes},
        {"kv_host_to_disk", s.kv_disk_written_bytes},
        {"expert_host_to_device", s.expert_fetched_bytes},
        {"expert_activations", s.expert_activation_bytes},
        {"expert_read_in_place", s.expert_in_place_bytes},
    }};
    for (const auto& [direction, bytes] : moved) {
        w.sample("dsv4:tier_bytes_total", static_cast<double>(bytes), fmt::format("direction=\"{}\"", direction));
    }
}

void render_engine(Writer& w, const EngineStats& s) {
    w.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", s.running);
    w.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", s.waiting);
    w.gauge("vllm:kv_cache_usage_perc", "Fraction of sequence-state (KV) blocks in use, 0 to 1.", s.kv_cache_usage);
    w.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.",
              static_cast<double>(s.prompt_tokens_total));
    w.counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
              static_cast<double>(s.generation_tokens_total));
    w.counter("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
              static_cast<double>(s.prefix_cache_queries));
    w.counter("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
              static_cast<double>(s.prefix_cache_hits));
    render_tiers(w, s);
    w.counter("vllm:num_preemptions_total", "Cumulative number of preemptions.",
              static_cast<double>(s.preemptions_total));
    w.counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.",
              static_cast<double>(s.spec_drafts_total));
    w.counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.",
              static_cast<double>(s.spec_draft_tokens_total));
    w.counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.",
              static_cast<double>(s.spec_accepted_tokens_total));
    w.header("vllm:spec_decode_num_accepted_tokens_per_pos", "counter", "Accepted tokens per draft position.");
    for (size_t i = 0; i < s.spec_accepted_per_pos.size(); ++i) {
        w.sample("vllm:spec_decode_num_accepted_tokens_per_pos", static_cast<double>(s.spec_accepted_per_pos[i]),
                 fmt::format("position=\"{}\"", i));
    }
    w.counter("dsv4:engine_steps_total", "Engine steps executed.", static_cast<double>(s.steps_total));
    w.counter("dsv4:engine_requests_finished_total", "Engine requests finished (any reason).",
              static_cast<double>(s.requests_finished_total));
    w.counter("dsv4:engine_step_seconds_total", "Wall time of the engine's steps.", s.step_seconds_total);
    w.counter("dsv4:engine_step_host_seconds_total",
              "Host work in the engine's steps: the step minus its forward passes (scheduling, sampling, state "
              "updates, publishing events).",
              s.step_host_seconds_total);
    w.counter("dsv4:engine_step_sample_seconds_total",
              "The sampling part of the host work (the device sampler's launch and wait, reading the draws).",
              s.step_sample_seconds_total);
    w.gauge("dsv4:device_workspace_bytes", "The device's step scratch (--cuda-workspace-mib); 0 on the CPU.",
            static_cast<double>(s.workspace_bytes));
    w.gauge("dsv4:device_workspace_high_water_bytes",
            "The most of the device's step scratch a step has used since start: what --cuda-workspace-mib must cover.",
            static_cast<double>(s.workspace_high_water_bytes));
    // The engine counts steps per bucket; Prometheus wants cumulative counts.
    Histogram::Snapshot steps;
    std::vector<double> bounds;
    uint64_t running = 0;
    for (size_t i = 0; i < kStepTokenBounds.size(); ++i) {
        running += static_cast<uint64_t>(s.steps_by_tokens[i]);
        steps.cumulative.push_back(running);
        bounds.push_back(static_cast<double>(kStepTokenBounds[i]));
    }
    steps.count = running + static_cast<uint64_t>(s.steps_by_tokens.back());
    steps.sum = static_cast<double>(s.step_tokens_total);
    w.histogram_samples("vllm:iteration_tokens_total", "Histogram of number of tokens per engine step.", bounds, steps);
}

std::string python_bool(bool value) {
    return value ? "True" : "False";  // vLLM's labels are Python str() values
}

void render_cache_info(Writer& w, const CacheInfo& c) {
    // vLLM's label names where they exist; num_gpu_blocks counts the state blocks wherever they live (CPU device too).
    w.header("vllm:cache_config_info", "gauge", "Information of the sequence-state (KV cache) configuration.");
    w.sample("vllm:cache_config_info", 1,
             fmt::format("block_size=\"{}\",cache_dtype=\"{}\",enable_prefix_caching=\"{}\","
                         "gpu_memory_utilization=\"{}\",num_gpu_blocks=\"{}\",num_slots=\"{}\",state_bytes=\"{}\"",
                         c.block_size, escape_label_value(c.cache_dtype), python_bool(c.enable_prefix_caching),
                         c.gpu_memory_utilization, c.num_blocks, c.num_slots, c.state_bytes));
}

void render_request_timing(Writer& w, const ServerMetrics& m) {
    w.histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                m.queue_time);
    w.histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
                m.prefill_time);
    w.histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                m.decode_time);
    w.histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
                m.inference_time);
    w.histogram("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
                m.request_time_per_output_token);
    w.histogram("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.",
                m.request_max_num_generation_tokens);
    w.histogram("vllm:request_params_n", "Histogram of the n request parameter.", m.request_params_n);
    w.histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
                m.request_params_max_tokens);
}

void render_structured(Writer& w, const StructuredOutputMetrics& s) {
    w.histogram("dsv4:structured_output_mask_seconds",
                "Time to compute one structured-output token mask (cached masks included).", s.mask_seconds);
    w.counter("dsv4:structured_output_mask_cache_hits_total", "Structured-output token masks found in the mask cache.",
              static_cast<double>(s.mask_cache_hits.load()));
    w.histogram("dsv4:structured_output_compile_seconds", "Time to compile one structured-output grammar.",
                s.compile_seconds);
    w.counter("dsv4:structured_output_grammars_compiled_total",
              "Schemas and grammars compiled for structured outputs (grammar cache misses).",
              static_cast<double>(s.grammars_compiled.load()));
    w.counter("dsv4:structured_output_grammar_cache_hits_total",
              "Structured-output requests whose grammar was already compiled.",
              static_cast<double>(s.grammar_cache_hits.load()));
    w.counter("dsv4:structured_output_grammar_errors_total",
              "Structured-output schemas and grammars refused (unsupported or invalid).",
              static_cast<double>(s.grammar_errors.load()));
}

}  // namespace

StructuredOutputMetrics::StructuredOutputMetrics() : mask_seconds(kMaskBuckets), compile_seconds(kCompileBuckets) {}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
    const size_t bucket =
        static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
    std::lock_guard lock(mutex_);
    ++counts_[bucket];
    sum_ += value;
    ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
    std::lock_guard lock(mutex_);
    Snapshot snap;
    snap.sum = sum_;
    snap.count = count_;
    uint64_t running = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        running += counts_[i];
        snap.cumulative.push_back(running);
    }
    snap.cumulative.push_back(count_);
    return snap;
}

ServerMetrics::ServerMetrics()
    : time_to_first_token(kTtftBuckets),
      inter_token_latency(kItlBuckets),
      e2e_latency(kE2eBuckets),
      request_prompt_tokens(kTokenCountBuckets),
      request_generation_tokens(kTokenCountBuckets),
      event_overhead(kOverheadBuckets),
      queue_time(kE2eBuckets),
      prefill_time(kE2eBuckets),
      decode_time(kE2eBuckets),
      inference_time(kE2eBuckets),
      request_time_per_output_token(kItlBuckets),
      request_max_num_generation_tokens(kTokenCountBuckets),
      request_params_n(kParamsNBuckets),
      request_params_max_tokens(kTokenCountBuckets) {
    // Zero samples for the common reasons, so a dashboard sees 0 rather than no series before the first refusal.
    for (const char* reason : {"server_busy", "queue_full", "too_large", "too_long", "read_timeout", "unauthorized",
                               "invalid", "loading", "draining"}) {
        rejections_.emplace(reason, 0);
    }
}

void ServerMetrics::count_http_status(int status) {
    std::lock_guard lock(maps_mutex_);
    ++http_statuses_[status];
}

void ServerMetrics::count_rejection(std::string_view reason) {
    std::lock_guard lock(maps_mutex_);
    auto it = rejections_.find(reason);
    if (it == rejections_.end()) it = rejections_.emplace(std::string(reason), 0).first;
    ++it->second;
}

std::string ServerMetrics::render(std::string_view model_name, const EngineStats* stats, const CacheInfo* cache,
                                  int in_flight) const {
    Writer w(model_name);
    w.gauge("dsv4:model_loaded", "1 once the model is loaded and requests are served.", stats != nullptr ? 1 : 0);
    if (stats != nullptr) render_engine(w, *stats);
    if (cache != nullptr) render_cache_info(w, *cache);
    w.gauge("dsv4:requests_in_flight", "HTTP generation requests being served.", static_cast<double>(in_flight));
    w.header("vllm:request_success_total", "counter", "Count of finished choices by finish reason.");
    for (size_t i = 0; i < kFinishNames.size(); ++i) {
        w.sample("vllm:request_success_total", static_cast<double>(finished_[i].load()),
                 fmt::format("finished_reason=\"{}\"", kFinishNames[i]));
    }
    w.histogram("vllm:time_to_first_token_seconds", "Time to first token in seconds.", time_to_first_token);
    w.histogram("vllm:inter_token_latency_seconds", "Time between streamed engine events in seconds.",
                inter_token_latency);
    w.histogram("vllm:time_per_output_token_seconds",
                "Time between streamed engine events in seconds (vllm:inter_token_latency_seconds' name before vLLM "
                "0.11, which dashboards still use).",
                inter_token_latency);
    w.histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency in seconds.", e2e_latency);
    w.histogram("vllm:request_prompt_tokens", "Prompt tokens per request.", request_prompt_tokens);
    w.histogram("vllm:request_generation_tokens", "Generated tokens per request.", request_generation_tokens);
    render_request_timing(w, *this);
    w.histogram("dsv4:stream_event_overhead_seconds",
                "Server time per engine event: popped from the result stream until its bytes were written.",
                event_overhead);
    w.counter("dsv4:client_disconnects_total", "Requests aborted because the client went away.",
              static_cast<double>(client_disconnects_.load()));
    render_structured(w, *structured);
    std::lock_guard lock(maps_mutex_);
    w.header("dsv4:http_responses_total", "counter", "HTTP responses by status code.");
    for (const auto& [status, count] : http_statuses_) {
        w.sample("dsv4:http_responses_total", static_cast<double>(count), fmt::format("code=\"{}\"", status));
    }
    w.header("dsv4:requests_rejected_total", "counter", "Requests refused before generation, by reason.");
    for (const auto& [reason, count] : rejections_) {
        w.sample("dsv4:requests_rejected_total", static_cast<double>(count), fmt::format("reason=\"{}\"", reason));
    }
    return w.take();
}

std::string escape_label_value(std::string_view value) {
    std::string out;
    out.reserve(value.size());
    for (char c : value) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '"') {
            out += "\\\"";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

}  // namespace dsv4::server
