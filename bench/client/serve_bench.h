// The serving benchmark client behind `dsv4 bench serve`: streams requests to an OpenAI-compatible server at fixed
// concurrency levels and reports TTFT / TPOT / ITL / E2EL (bench_stats.h), request and token throughput, and the
// server's own overhead per streamed event, scraped from its /metrics (dsv4:stream_event_overhead_seconds) before
// and after each level, and the engine's steps in the level: their mean wall time and how much of it was host work
// (scheduling, sampling, state updates: the step minus its forward passes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/client/bench_stats.h"

namespace dsv4::server {

struct ServeBenchOptions {
    std::string host = "127.0.0.1";
    int port = 8000;
    std::string api_key;
    std::string model;                     // "" = the first of /v1/models
    std::string endpoint = "completions";  // completions (random token-id prompts) | chat (synthetic text)
    std::vector<int> concurrency = {1, 8, 64};
    int requests_per_level = 0;  // 0 = max(16, 4 x concurrency)
    int input_len = 128;         // prompt tokens (completions) / words (chat)
    int output_len = 128;
    bool ignore_eos = true;  // every request generates output_len tokens
    double temperature = 0.0;
    double top_p = 1.0;
    uint64_t seed = 0;  // prompt generator seed
    std::vector<double> percentiles = {50, 90, 99};
    // A JSON object merged into every request body (vLLM's --extra-body), e.g. a structured-output constraint:
    // '{"guided_json": {...}}' (with --no-ignore-eos: constraints refuse ignore_eos).
    std::string extra_body;
    std::string json_out;  // also write the results as JSON here
};

struct LevelResult {
    int concurrency = 0;
    int completed = 0;
    int failed = 0;
    std::string first_error;
    double duration_s = 0;
    int64_t input_tokens = 0;
    int64_t output_tokens = 0;
    Summary ttft, tpot, itl, e2el;  // seconds
    // Server-side, from /metrics deltas (absent if the server does not export them).
    bool has_overhead = false;
    double overhead_mean_us = 0;
    double overhead_p99_bound_us = 0;  // the histogram bucket bound holding the 99th percentile
    int64_t overhead_events = 0;
    // The engine's steps during the level (dsv4:engine_steps_total, dsv4:engine_step_seconds_total,
    // dsv4:engine_step_host_seconds_total deltas): their mean wall time and the host work in them.
    bool has_steps = false;
    int64_t steps = 0;
    double step_mean_ms = 0;
    double host_ms_per_step = 0;
    double host_share = 0;          // host work / step wall time
    double sample_ms_per_step = 0;  // the sampling part of the host work (dsv4:engine_step_sample_seconds_total)
    // The most of the device's step scratch a step has used since the server started (what --cuda-workspace-mib must
    // cover; 0 on the CPU).
    double workspace_high_water_mib = 0;
};

// Runs every level; prints a table per level to stdout as it goes. Throws dsv4::Error when the server is
// unreachable or every request of a level fails.
std::vector<LevelResult> run_serve_bench(const ServeBenchOptions& options);

}  // namespace dsv4::server
