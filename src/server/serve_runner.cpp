#include "server/serve_runner.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "server/http/http_server.h"
#include "server/http/shutdown_signals.h"

namespace dsv4::server {
namespace {

using Clock = std::chrono::steady_clock;

[[gnu::format(printf, 1, 2)]] void log_line(const char* format, ...) {
    std::fputs("dsv4 serve: ", stderr);
    va_list args;
    va_start(args, format);
    std::vfprintf(stderr, format, args);
    va_end(args);
    std::fputc('\n', stderr);
    std::fflush(stderr);
}

// Prints "still loading (N s)" every few seconds until destroyed, so a long load never looks like a hang.
class LoadTicker {
  public:
    explicit LoadTicker(std::string what) : what_(std::move(what)), start_(Clock::now()) {
        thread_ = std::thread([this] {
            std::unique_lock lock(mutex_);
            while (!wake_.wait_for(lock, std::chrono::seconds(5), [this] { return done_; })) {
                log_line("still loading %s (%.0f s)", what_.c_str(), seconds_since(start_));
            }
        });
    }
    ~LoadTicker() {
        {
            std::lock_guard lock(mutex_);
            done_ = true;
        }
        wake_.notify_all();
        thread_.join();
    }

  private:
    std::string what_;
    Clock::time_point start_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool done_ = false;
    std::thread thread_;
};

struct LoadedModel {
    std::unique_ptr<Engine> engine;
    std::shared_ptr<const ModelContext> context;
};

std::shared_ptr<const tokenizer::Tokenizer> load_tokenizer(const ServeOptions& options) {
    const std::string path = options.tokenizer_path.empty()
                                 ? (std::filesystem::path(options.engine.model_dir) / "tokenizer.json").string()
                                 : options.tokenizer_path;
    DSV4_CHECK(std::filesystem::exists(path),
               "no tokenizer at {}: put tokenizer.json in the model directory or pass "
               "--tokenizer FILE",
               path);
    const auto start = Clock::now();
    auto tokenizer = std::make_shared<const tokenizer::Tokenizer>(tokenizer::Tokenizer::load(path));
    log_line("tokenizer %s loaded in %.1f s (%d ids)", path.c_str(), seconds_since(start), tokenizer->vocab_size());
    return tokenizer;
}

LoadedModel load_model(const ServeOptions& options, const EngineFactory& create_engine) {
    LoadedModel loaded;
    auto tokenizer = load_tokenizer(options);
    const EngineConfig& config = options.engine;
    const std::string source = config.synthetic_preset.empty()
                                   ? config.model_dir
                                   : "synthetic " + config.synthetic_preset + " (random weights made on the device)";
    log_line("loading model %s (device %s, numerics %s) ...", source.c_str(), config.device.c_str(),
             config.numerics.c_str());
    const auto start = Clock::now();
    {
        LoadTicker ticker("the model");
        loaded.engine = create_engine(config);
    }
    auto context = std::make_shared<ModelContext>();
    context->engine = loaded.engine.get();
    context->info = loaded.engine->model_info();
    context->tokenizer = tokenizer;
    context->encoder = ChatEncoder(options.server.template_revision);
    context->served_name = options.server.served_model_name;
    context->model_dir = config.model_dir;
    context->created = static_cast<int64_t>(std::time(nullptr));
    context->think_end_token = tokenizer->token_to_id("</think>").value_or(-1);
    context->bos_token = context->info.bos_token_id;
    if (tokenizer->vocab_size() > context->info.vocab_size) {
        log_line("warning: the tokenizer has %d ids but the model only %lld; prompts using the others are rejected",
                 tokenizer->vocab_size(), static_cast<long long>(context->info.vocab_size));
    }
    if (!context->info.cache.memory_plan.empty()) log_line("%s", context->info.cache.memory_plan.c_str());
    log_line("model loaded in %.1f s: vocab %lld, context %d tokens, template %s", seconds_since(start),
             static_cast<long long>(context->info.vocab_size), context->info.max_model_len,
             options.server.template_revision == ChatTemplateRevision::kV4_0731 ? "v4-0731" : "v4");
    loaded.context = std::move(context);
    return loaded;
}

}  // namespace

int run_server(const ServeOptions& options, const EngineFactory& create_engine) {
    std::mutex mutex;
    std::condition_variable stop_wake;
    bool stop_requested = false;
    std::atomic<bool> loading{true};
    ShutdownSignals signals([&](int signal_number, int count) {
        if (loading.load()) {
            log_line("%s while loading the model: exiting", strsignal(signal_number));
            std::_Exit(0);
        }
        if (count > 1) {
            log_line("second %s: exiting without waiting for running requests", strsignal(signal_number));
            std::_Exit(1);
        }
        std::lock_guard lock(mutex);
        stop_requested = true;
        stop_wake.notify_all();
    });

    const ServerConfig& config = options.server;
    HttpServer http(config);
    const int port = http.bind();
    http.start();
    log_line("listening on http://%s:%d (loading the model: /health answers 503 until it is ready)",
             config.host.c_str(), port);
    if (options.engine.speculative.oracle_acceptance_length > 0.0) {
        log_line(
            "speculative decoding in oracle mode (a benchmark): drafts are accepted so that a verify step emits "
            "%.2f tokens on average whatever the logits say; outputs are the drafts, not the model's",
            options.engine.speculative.oracle_acceptance_length);
    }
    LoadedModel model = load_model(options, create_engine);
    http.set_model(model.context);
    loading.store(false);
    log_line("ready: serving '%s' at http://%s:%d/v1 (thinking %s by default%s)%s", config.served_model_name.c_str(),
             config.host.c_str(), port, config.default_thinking == ThinkingMode::kThinking ? "on" : "off",
             config.api_key.empty() ? ", no API key" : ", API key required", config.webui ? "; chat page at /" : "");

    {
        std::unique_lock lock(mutex);
        stop_wake.wait(lock, [&] { return stop_requested; });
    }
    const auto drain_start = Clock::now();
    log_line("shutting down: refusing new requests, waiting up to %.0f s for %d running ones",
             config.shutdown_timeout_s, http.state().gate().in_flight());
    http.begin_drain();
    model.engine->shutdown(std::chrono::milliseconds(static_cast<int64_t>(config.shutdown_timeout_s * 1000)));
    http.stop(std::chrono::seconds(5));
    model.engine.reset();
    log_line("stopped after %.1f s", seconds_since(drain_start));
    return 0;
}

}  // namespace dsv4::server
