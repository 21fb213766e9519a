// `dsv4 bench serve`: the serving benchmark client (src/server/serve_bench.h) against a running server.
#include "bench/client/serve_bench.h"
#include "bench_registry.h"

namespace dsv4::cli {
namespace {

const BenchmarkRegistrar kRegistrar{
    "serve", "HTTP load against a running server: TTFT/TPOT/ITL/E2EL percentiles, throughput, server overhead",
    [](CLI::App& app) {
        auto o = std::make_shared<server::ServeBenchOptions>();
        app.add_option("--host", o->host, "Server address");
        app.add_option("--port", o->port, "Server port");
        app.add_option("--api-key", o->api_key, "API key")->envname("DSV4_API_KEY");
        app.add_option("--model", o->model, "Model name (default: the server's)");
        app.add_option("--endpoint", o->endpoint, "completions (token-id prompts) or chat")
            ->check(CLI::IsMember({"completions", "chat"}));
        app.add_option("--concurrency", o->concurrency, "Concurrency levels, e.g. 1,8,64")->delimiter(',');
        app.add_option("--num-prompts", o->requests_per_level, "Requests per level (default max(16, 4 x level))");
        app.add_option("--input-len", o->input_len, "Prompt tokens (chat: words)")->check(CLI::Range(1, 1 << 20));
        app.add_option("--output-len", o->output_len, "Tokens to generate")->check(CLI::Range(1, 1 << 20));
        app.add_flag("!--no-ignore-eos", o->ignore_eos, "Let requests stop at EOS");
        app.add_option("--temperature", o->temperature, "Sampling temperature");
        app.add_option("--top-p", o->top_p, "Nucleus sampling mass (the seeds' protocol: 0.95)")
            ->check(CLI::Range(0.0, 1.0));
        app.add_option("--seed", o->seed, "Prompt generator seed");
        app.add_option("--percentiles", o->percentiles, "Percentiles to report, e.g. 50,90,99")->delimiter(',');
        app.add_option("--json", o->json_out, "Also write the results to this JSON file");
        app.add_option("--extra-body", o->extra_body,
                       "JSON object merged into every request (e.g. a structured-output constraint)");
        app.callback([o] { server::run_serve_bench(*o); });
    }};

}  // namespace
}  // namespace dsv4::cli
