// dsv4_fake_serve: `dsv4 serve` with the FakeEngine (tests/unit/server/fake_engine.h) in place of the model. Same
// flags, plus --fake-* knobs; the e2e suite drives it with real clients (openai SDK, curl, Caddy) to test the HTTP
// layer under controlled timing, and bench/server_overhead measures the server's own cost per token with it.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <thread>

#include "fake_engine.h"
#include "server/serve_cli.h"

int main(int argc, char** argv) {
    using namespace dsv4;
    CLI::App app{"dsv4 serve on the FakeEngine (deterministic tokens, scripted tool calls / reasoning) for e2e tests"};
    server::ServeCliValues values;
    server::add_serve_options(app, values);
    int step_us = 2000;
    int first_token_ms = 0;
    int load_ms = 0;
    app.add_option("--fake-step-us", step_us, "Engine step interval (one token per running completion per step)");
    app.add_option("--fake-first-token-ms", first_token_ms, "Simulated prefill time before each request's first token");
    app.add_option("--fake-load-ms", load_ms, "Simulated model loading time (/health answers 503 meanwhile)");
    CLI11_PARSE(app, argc, argv);
    try {
        const server::ServeOptions options = server::finalize_serve_options(values);
        const auto create = [&](const EngineConfig& config) -> std::unique_ptr<Engine> {
            std::this_thread::sleep_for(std::chrono::milliseconds(load_ms));
            const std::string path =
                options.tokenizer_path.empty() ? config.model_dir + "/tokenizer.json" : options.tokenizer_path;
            auto tokenizer = std::make_shared<const tokenizer::Tokenizer>(tokenizer::Tokenizer::load(path));
            testing::FakeEngineOptions fake;
            fake.info = testing::fake_model_info(*tokenizer, config.max_model_len > 0 ? config.max_model_len : 4096);
            fake.info.name = "fake";
            fake.step_interval = std::chrono::microseconds(step_us);
            fake.first_token_delay = std::chrono::milliseconds(first_token_ms);
            fake.max_running = config.max_num_seqs;
            fake.max_queued_requests = config.max_queued_requests;
            fake.word_tokens = testing::fake_word_tokens(*tokenizer);
            fake.script = testing::fake_demo_script(tokenizer);
            // Engine event pushed -> popped by the server: the first half of the per-token server overhead (the
            // second half, popped -> bytes written, is dsv4:stream_event_overhead_seconds on /metrics).
            fake.on_shutdown = [](const testing::FakeHandoffStats& h) {
                std::fprintf(stderr, "fake engine: %lld events handed off, mean %.1f us, max %.1f us (push -> pop)\n",
                             static_cast<long long>(h.events), h.events ? h.seconds_total / h.events * 1e6 : 0.0,
                             h.seconds_max * 1e6);
            };
            return std::make_unique<testing::FakeEngine>(std::move(fake));
        };
        return server::run_server(options, create);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
