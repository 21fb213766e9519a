#include "server/serve_cli.h"

#include "core/error.h"
#include "server/http/cors.h"
#include "server/model_files.h"
#include "server/speculative_cli.h"

namespace dsv4::server {
namespace {

void add_http_options(CLI::App& app, ServeCliValues& v) {
    ServerConfig& s = v.options.server;
    app.add_option("--model", v.model,
                   "Model directory (config.json, safetensors, tokenizer.json); default: the "
                   "bundled demo model at <repo>/models/demo");
    app.add_option("--tokenizer", v.options.tokenizer_path, "tokenizer.json (default: the model directory's)");
    app.add_option("--host", s.host, "Address to bind (default 127.0.0.1: put a TLS proxy in front to expose it)");
    app.add_option("--port", s.port, "Port (0 = any free port, printed at startup)")->check(CLI::Range(0, 65535));
    app.add_option("--api-key", s.api_key, "Require this key (Authorization: Bearer KEY or X-Api-Key)")
        ->envname("DSV4_API_KEY");
    app.add_flag("--protect-health", v.protect_health,
                 "/health needs the API key too (by default it answers without one, so probes work)");
    app.add_flag("--public-health", v.public_health_flag, "Accepted for compatibility: /health is public by default")
        ->excludes("--protect-health");
    app.add_flag("--public-metrics", s.public_metrics,
                 "/metrics answers without the API key (by default it needs it: it shows request volumes)");
    app.add_option("--allowed-origins", v.allowed_origins,
                   "CORS: origins whose pages may call the API (comma-separated, repeatable, or a JSON list as vLLM "
                   "takes it; * = any); default: none, CORS off")
        ->default_str("");
    app.add_flag("--no-webui", v.no_webui, "Do not serve the chat page at /");
    app.add_option("--request-read-timeout", s.request_read_timeout_s,
                   "Seconds a request's line, headers and body may take to arrive (else 408 and the connection "
                   "closes): slow clients cannot hold HTTP threads")
        ->check(CLI::Range(0.1, 3600.0));
    app.add_option("--served-model-name", s.served_model_name,
                   "The model name clients send (default: the model "
                   "directory's name)");
    app.add_option("--shutdown-timeout", s.shutdown_timeout_s,
                   "SIGTERM: seconds running requests may take before they are aborted")
        ->check(CLI::Range(0.0, 86400.0));
    app.add_option("--max-request-bytes", s.max_request_bytes, "Largest request body (413 above)")
        ->check(CLI::Range(size_t{1024}, size_t{1} << 32));
    app.add_option("--max-concurrent-requests", s.max_in_flight,
                   "Generation requests in flight before 429 (default 2 x max-num-seqs + 64)")
        ->check(CLI::Range(1, 100000))
        ->default_str("");  // derived (the field's 0 means "not given")
    app.add_option("--http-threads", s.http_threads, "HTTP worker threads (default max-concurrent-requests + 16)")
        ->check(CLI::Range(1, 100000))
        ->default_str("");
    app.add_option("--keep-alive-timeout", s.keep_alive_timeout_s, "Seconds an idle keep-alive connection is kept")
        ->check(CLI::Range(1, 3600));
    app.add_option("--default-thinking", v.default_thinking,
                   "Thinking mode when a request does not choose (chat_template_kwargs.thinking / reasoning_effort)")
        ->check(CLI::IsMember({"on", "off"}));
    app.add_option("--chat-template-revision", v.options.template_revision,
                   "auto (from config.json), v4 or v4-0731 (reasoning-effort prompts differ)")
        ->check(CLI::IsMember({"auto", "v4", "v4-0731"}));
    app.add_flag("--quiet", s.quiet, "No per-request log lines");
}

// Host-memory tiers (docs/operations.md "Memory tiers").
void add_tier_options(CLI::App& app, ServeCliValues& v) {
    EngineConfig& e = v.options.engine;
    app.add_option("--gpu-experts", e.gpu_experts,
                   "Routed experts per layer kept in GPU memory; the others stay in pinned host memory (-1 = all)")
        ->check(CLI::Range(-1, 1 << 16));
    app.add_option("--expert-fetch-min-pairs", e.expert_fetch_min_pairs,
                   "With --gpu-experts: a host expert with fewer (token, expert) pairs in a step is computed on the "
                   "host CPU instead of fetched over PCIe")
        ->check(CLI::Range(1, 1 << 30));
    app.add_option("--expert-read-in-place-tokens", e.expert_read_in_place_tokens,
                   "With --gpu-experts: steps of at most N tokens read host experts in place over PCIe instead of "
                   "fetching them (decode steps then run as CUDA graphs); 0 = never")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
    app.add_option("--host-kv-cache-gib", v.host_kv_cache_gib,
                   "Pinned host pool for prefix-cache blocks and snapshots evicted from the device (0 = off)")
        ->check(CLI::Range(0.0, 1048576.0));
    app.add_option("--disk-kv-cache", e.disk_kv_cache_dir,
                   "Directory of the disk tier below the host pool (needs --host-kv-cache-gib; empty = off)");
    app.add_option("--disk-kv-cache-gib", v.disk_kv_cache_gib, "Size cap of the disk tier")
        ->check(CLI::Range(0.001, 16777216.0));
}

void add_engine_options(CLI::App& app, ServeCliValues& v) {
    EngineConfig& e = v.options.engine;
    app.add_option("--device", e.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
    app.add_option("--numerics", e.numerics, "exact | reference | fast")
        ->check(CLI::IsMember({"exact", "reference", "fast"}));
    app.add_option("--threads", e.threads, "CPU backend threads (0 = all)")->check(CLI::Range(0, 4096));
    app.add_option("--max-num-seqs", e.max_num_seqs,
                   "Sequences decoded together; also the most completions (n) one request may ask for")
        ->check(CLI::Range(1, 4096));
    app.add_option("--max-num-batched-tokens", e.max_num_batched_tokens,
                   "Token budget per engine step (default: 8192 on cuda, 2048 on cpu or with --gpu-experts); the "
                   "default --cuda-workspace-mib grows with it")
        ->check(CLI::Range(1, 1 << 24));
    app.add_option("--long-prefill-token-threshold", e.long_prefill_token_threshold,
                   "Longest prefill chunk per request per step (default: the budget above 2048 tokens, else half)")
        ->check(CLI::Range(1, 1 << 24));
    app.add_option("--max-model-len", e.max_model_len, "Context length (0 = the model's)")
        ->check(CLI::Range(0, 1 << 30));
    app.add_option("--max-num-queued-reqs", e.max_queued_requests,
                   "Requests that may wait for a free sequence slot (429 beyond; running ones do not count)")
        ->check(CLI::Range(1, 1 << 24));
    app.add_option("--max-num-queued-tokens", e.max_queued_tokens, "Engine queued-prompt-token cap (429 above)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
    app.add_option("--kv-cache-memory-bytes", e.kv_cache_bytes, "Sequence-state memory (0 = derived)")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 50));
    app.add_option("--gpu-memory-utilization", e.gpu_memory_utilization, "Fraction of GPU memory to use")
        ->check(CLI::Range(0.05, 1.0));
    app.add_option("--kv-cache-dtype", e.kv_cache_dtype, "auto | bf16 | fp8")
        ->check(CLI::IsMember({"auto", "bf16", "fp8"}));
    app.add_option("--fp8-dialect", e.fp8_dialect,
                   "FP8 dialect of weights in memory, activation quantization and fp8 caches: ocp | fnuz (default: the "
                   "device's native one, ocp on cpu and cuda; fnuz = AMD MI300X numerics)")
        ->check(CLI::IsMember({"ocp", "fnuz"}));
    app.add_option("--block-size", e.block_tokens, "Positions per state block")->check(CLI::Range(1, 1 << 20));
    app.add_flag("--no-enable-prefix-caching", v.no_prefix_caching, "Disable prefix caching");
    app.add_flag("--enforce-eager", e.enforce_eager, "Run every step eagerly: no CUDA graphs (debugging, profiling)");
    app.add_flag("--batch-invariant", e.batch_invariant,
                 "A request's logits do not depend on the other requests it is batched with (reference numerics "
                 "always are): one kernel and one split rule at every step size, at a cost in speed "
                 "(docs/operations.md)");
    app.add_option("--cuda-workspace-mib", e.cuda_workspace_mib,
                   "CUDA step scratch in MiB (0 = 6144, or 2048 + 1 a token of the budget where more: 10240 at 8192; "
                   "1.25 a token with --speculative-config)")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 22));
    app.add_option("--seed", e.seed, "Seed of the seeds of unseeded requests (0 = random)");
    app.add_option("--synthetic-weights", e.synthetic_preset,
                   "Benchmarks: serve random weights made on the device for a full-size preset (flash, flash-0731, "
                   "flash-160) instead of the model directory's weights (its tokenizer is still used)")
        ->check(CLI::IsMember({"flash", "flash-0731", "flash-160"}));
    app.add_option("--synthetic-layers", e.synthetic_layers, "With --synthetic-weights: keep only the first N layers")
        ->check(CLI::Range(0, 1 << 10));
    app.add_option("--speculative-config", v.speculative_config,
                   "Speculative decoding, vLLM's JSON: {\"method\":\"mtp\"|\"dspark\",\"num_speculative_tokens\":K, "
                   "\"draft_sample_method\", \"rejection_sample_method\", \"disable_by_batch_size\", "
                   "\"confidence_threshold\"} (docs/operations.md)");
    app.add_option("--synthetic-routing-skew", e.synthetic_routing_skew,
                   "With --synthetic-weights: Zipf exponent of expert popularity (S for every layer, or S0,S1,... "
                   "one per layer; 0 = even routing)")
        ->default_str("0");
    add_tier_options(app, v);
}

}  // namespace

void add_serve_options(CLI::App& app, ServeCliValues& values) {
    // `serve --help` shows every default (the values the fields start with).
    app.option_defaults()->always_capture_default();
    add_http_options(app, values);
    add_engine_options(app, values);
}

ServeOptions finalize_serve_options(ServeCliValues& values) {
    ServeOptions options = values.options;
    options.engine.model_dir = resolve_model_dir(values.model);
    options.engine.enable_prefix_caching = !values.no_prefix_caching;
    options.engine.speculative = parse_speculative_config(values.speculative_config);
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    options.engine.host_kv_cache_bytes = static_cast<int64_t>(values.host_kv_cache_gib * kGiB);
    options.engine.disk_kv_cache_bytes = static_cast<int64_t>(values.disk_kv_cache_gib * kGiB);
    ServerConfig& server = options.server;
    if (server.served_model_name.empty()) {
        server.served_model_name = options.engine.synthetic_preset.empty()
                                       ? default_served_name(options.engine.model_dir)
                                       : "synthetic-" + options.engine.synthetic_preset;
    }
    server.default_thinking = values.default_thinking == "on" ? ThinkingMode::kThinking : ThinkingMode::kChat;
    server.public_health = !values.protect_health;
    server.webui = !values.no_webui;
    server.allowed_origins = parse_allowed_origins(values.allowed_origins);
    server.template_revision = resolve_template_revision(options.template_revision, options.engine.model_dir);
    if (server.max_in_flight <= 0) server.max_in_flight = 2 * options.engine.max_num_seqs + 64;
    if (server.http_threads <= 0) server.http_threads = server.max_in_flight + 16;
    DSV4_CHECK(server.http_threads > server.max_in_flight,
               "--http-threads ({}) must exceed --max-concurrent-requests ({}) so /health and /metrics still answer "
               "when every generation slot is busy",
               server.http_threads, server.max_in_flight);
    return options;
}

}  // namespace dsv4::server
