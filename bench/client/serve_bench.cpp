#include "bench/client/serve_bench.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "core/error.h"

namespace dsv4::server {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

httplib::Headers auth_headers(const ServeBenchOptions& o) {
    httplib::Headers headers;
    if (!o.api_key.empty()) headers.emplace("Authorization", "Bearer " + o.api_key);
    return headers;
}

httplib::Client make_client(const ServeBenchOptions& o) {
    httplib::Client client(o.host, o.port);
    client.set_keep_alive(true);
    client.set_tcp_nodelay(true);
    client.set_read_timeout(600, 0);
    client.set_connection_timeout(10, 0);
    return client;
}

json get_json(const ServeBenchOptions& o, const std::string& path) {
    httplib::Client client = make_client(o);
    auto response = client.Get(path.c_str(), auth_headers(o));
    DSV4_CHECK(response, "cannot reach http://{}:{}{}: {}", o.host, o.port, path, httplib::to_string(response.error()));
    DSV4_CHECK(response->status == 200, "GET {} answered {}: {}", path, response->status, response->body);
    return json::parse(response->body);
}

// A pool of valid token ids for this server's tokenizer (from /tokenize on synthetic text).
std::vector<int32_t> token_pool(const ServeBenchOptions& o, const std::string& model) {
    std::string text;
    static constexpr const char* kWords[] = {"the",    "river", "stone", "light",  "quiet",  "number", "city",  "green",
                                             "system", "music", "paper", "engine", "winter", "garden", "signal"};
    std::mt19937_64 rng(o.seed + 17);
    for (int i = 0; i < 3000; ++i) text += std::string(kWords[rng() % std::size(kWords)]) + " ";
    httplib::Client client = make_client(o);
    auto response =
        client.Post("/tokenize", auth_headers(o),
                    json{{"model", model}, {"prompt", text}, {"add_special_tokens", false}}.dump(), "application/json");
    DSV4_CHECK(response && response->status == 200, "POST /tokenize failed; the benchmark needs it for prompts");
    return json::parse(response->body)["tokens"].get<std::vector<int32_t>>();
}

std::string request_body(const ServeBenchOptions& o, const std::string& model, const std::vector<int32_t>& pool,
                         int index) {
    std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(index));
    json body = {{"model", model},
                 {"max_tokens", o.output_len},
                 {"temperature", o.temperature},
                 {"top_p", o.top_p},
                 {"stream", true},
                 {"ignore_eos", o.ignore_eos},
                 {"stream_options", {{"include_usage", true}}}};
    if (!o.extra_body.empty()) {
        const json extra = json::parse(o.extra_body, nullptr, false);
        DSV4_CHECK(extra.is_object(), "--extra-body must be a JSON object (got: {})", o.extra_body);
        body.update(extra);
    }
    if (o.endpoint == "chat") {
        std::string text = "Request " + std::to_string(index) + ":";
        for (int i = 0; i < o.input_len; ++i) text += " w" + std::to_string(rng() % 1000);
        body["messages"] = json::array({{{"role", "user"}, {"content", text}}});
    } else {
        std::vector<int32_t> prompt;
        for (int i = 0; i < o.input_len; ++i) prompt.push_back(pool[rng() % pool.size()]);
        body["prompt"] = prompt;
    }
    return body.dump();
}

// One streamed request, timed.
RequestTiming timed_request(httplib::Client& client, const ServeBenchOptions& o, const std::string& body) {
    RequestTiming timing;
    const std::string path = o.endpoint == "chat" ? "/v1/chat/completions" : "/v1/completions";
    std::string buffer;
    bool saw_output = false;
    Clock::time_point last_output;
    const Clock::time_point start = Clock::now();
    httplib::Request request;
    request.method = "POST";
    request.path = path;
    request.headers = auth_headers(o);
    request.headers.emplace("Content-Type", "application/json");
    request.body = body;
    request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
        const Clock::time_point now = Clock::now();
        buffer.append(data, length);
        size_t end;
        while ((end = buffer.find("\n\n")) != std::string::npos) {
            const std::string event = buffer.substr(0, end);
            buffer.erase(0, end + 2);
            if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
            const json chunk = json::parse(event.substr(6), nullptr, false);
            if (chunk.is_discarded()) continue;
            if (chunk.contains("error")) timing.error = chunk["error"].value("message", "error event");
            if (chunk.contains("usage") && chunk["usage"].is_object()) {
                timing.prompt_tokens = chunk["usage"].value("prompt_tokens", 0);
                timing.output_tokens = chunk["usage"].value("completion_tokens", 0);
            }
            bool has_output = false;
            for (const json& choice : chunk.value("choices", json::array())) {
                const json& delta = choice.contains("delta") ? choice["delta"] : choice;
                for (const char* field : {"text", "content", "reasoning_content"}) {
                    if (delta.contains(field) && delta[field].is_string() && !delta[field].get<std::string>().empty()) {
                        has_output = true;
                    }
                }
                if (delta.contains("tool_calls")) has_output = true;
            }
            if (!has_output) continue;
            if (!saw_output) {
                timing.ttft_s = seconds_between(start, now);
                saw_output = true;
            } else {
                timing.itl_s.push_back(seconds_between(last_output, now));
            }
            last_output = now;
        }
        return true;
    };
    auto result = client.send(request);
    timing.e2el_s = seconds_between(start, Clock::now());
    if (!result) {
        timing.error = httplib::to_string(result.error());
    } else if (result->status != 200) {
        timing.error = "HTTP " + std::to_string(result->status) + " " + result->body.substr(0, 200);
    }
    timing.ok = timing.error.empty() && saw_output;
    if (timing.error.empty() && !saw_output) timing.error = "no output";
    return timing;
}

struct OverheadSnapshot {
    bool present = false;
    double sum = 0;
    double count = 0;
    std::vector<std::pair<double, double>> buckets;  // (le, cumulative)
};

struct StepCounters {
    bool present = false;
    double steps = 0, seconds = 0, host_seconds = 0, sample_seconds = 0;
    double workspace_high_water = 0;  // bytes (a gauge: the value after the level is the level's answer)
};

struct ServerScrape {
    OverheadSnapshot overhead;
    StepCounters steps;
};

// The value of a sample of `name` (with or without labels) on a /metrics line, if the line is one.
std::optional<double> sample_value(const std::string& line, const std::string& name) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) return std::nullopt;
    if (line[name.size()] != ' ' && line[name.size()] != '{') return std::nullopt;
    return std::strtod(line.substr(line.rfind(' ') + 1).c_str(), nullptr);
}

void scrape_overhead_line(const std::string& line, OverheadSnapshot& snap) {
    const std::string name = "dsv4:stream_event_overhead_seconds";
    if (line.rfind(name, 0) != 0) return;
    const double value = std::strtod(line.substr(line.rfind(' ') + 1).c_str(), nullptr);
    if (line.rfind(name + "_sum", 0) == 0) {
        snap.sum = value;
        snap.present = true;
    } else if (line.rfind(name + "_count", 0) == 0) {
        snap.count = value;
    } else if (const size_t le = line.find("le=\""); le != std::string::npos) {
        const std::string bound = line.substr(le + 4, line.find('"', le + 4) - le - 4);
        snap.buckets.emplace_back(bound == "+Inf" ? INFINITY : std::strtod(bound.c_str(), nullptr), value);
    }
}

void scrape_step_line(const std::string& line, StepCounters& steps) {
    if (auto v = sample_value(line, "dsv4:engine_steps_total")) steps.steps = *v;
    if (auto v = sample_value(line, "dsv4:engine_step_host_seconds_total")) steps.host_seconds = *v;
    if (auto v = sample_value(line, "dsv4:engine_step_sample_seconds_total")) steps.sample_seconds = *v;
    if (auto v = sample_value(line, "dsv4:device_workspace_high_water_bytes")) steps.workspace_high_water = *v;
    if (auto v = sample_value(line, "dsv4:engine_step_seconds_total")) {
        steps.seconds = *v;
        steps.present = true;
    }
}

ServerScrape scrape_server(const ServeBenchOptions& o) {
    ServerScrape scrape;
    httplib::Client client = make_client(o);
    auto response = client.Get("/metrics", auth_headers(o));
    if (!response || response->status != 200) return scrape;
    std::istringstream lines(response->body);
    std::string line;
    while (std::getline(lines, line)) {
        scrape_overhead_line(line, scrape.overhead);
        scrape_step_line(line, scrape.steps);
    }
    return scrape;
}

void add_overhead(LevelResult& level, const OverheadSnapshot& before, const OverheadSnapshot& after) {
    if (!before.present || !after.present || after.count <= before.count) return;
    const double events = after.count - before.count;
    level.has_overhead = true;
    level.overhead_events = static_cast<int64_t>(events);
    level.overhead_mean_us = (after.sum - before.sum) / events * 1e6;
    for (size_t i = 0; i < after.buckets.size() && i < before.buckets.size(); ++i) {
        if (after.buckets[i].second - before.buckets[i].second >= 0.99 * events) {
            level.overhead_p99_bound_us = after.buckets[i].first * 1e6;
            break;
        }
    }
}

void add_steps(LevelResult& level, const StepCounters& before, const StepCounters& after) {
    const double steps = after.steps - before.steps, seconds = after.seconds - before.seconds;
    if (!before.present || !after.present || steps <= 0 || seconds <= 0) return;
    level.has_steps = true;
    level.steps = static_cast<int64_t>(steps);
    level.step_mean_ms = seconds / steps * 1e3;
    level.host_ms_per_step = (after.host_seconds - before.host_seconds) / steps * 1e3;
    level.host_share = (after.host_seconds - before.host_seconds) / seconds;
    level.sample_ms_per_step = (after.sample_seconds - before.sample_seconds) / steps * 1e3;
    level.workspace_high_water_mib = after.workspace_high_water / (1 << 20);
}

void print_summary(const char* title, const char* key, const Summary& s) {
    std::printf("%s\n", title);
    std::printf("Mean %s (ms):%*.2f\n", key, static_cast<int>(37 - std::strlen(key)), s.mean * 1e3);
    std::printf("Median %s (ms):%*.2f\n", key, static_cast<int>(35 - std::strlen(key)), s.median * 1e3);
    for (const auto& [p, v] : s.percentiles) {
        std::printf("P%g %s (ms):%*.2f\n", p, key,
                    static_cast<int>(37 - std::strlen(key) - std::to_string(static_cast<int>(p)).size()), v * 1e3);
    }
}

void print_level(const LevelResult& r) {
    std::printf("\n============ Serving Benchmark Result (concurrency %d) ============\n", r.concurrency);
    std::printf("Successful requests:%31d\n", r.completed);
    std::printf("Failed requests:%35d\n", r.failed);
    if (!r.first_error.empty()) std::printf("First error: %s\n", r.first_error.c_str());
    std::printf("Benchmark duration (s):%28.2f\n", r.duration_s);
    std::printf("Total input tokens:%32lld\n", static_cast<long long>(r.input_tokens));
    std::printf("Total generated tokens:%28lld\n", static_cast<long long>(r.output_tokens));
    std::printf("Request throughput (req/s):%24.2f\n", r.completed / r.duration_s);
    std::printf("Output token throughput (tok/s):%19.2f\n", static_cast<double>(r.output_tokens) / r.duration_s);
    std::printf("Total token throughput (tok/s):%20.2f\n",
                static_cast<double>(r.input_tokens + r.output_tokens) / r.duration_s);
    print_summary("---------------Time to First Token----------------", "TTFT", r.ttft);
    print_summary("-----Time per Output Token (excl. 1st token)------", "TPOT", r.tpot);
    print_summary("---------------Inter-token Latency----------------", "ITL", r.itl);
    print_summary("----------------End-to-end Latency----------------", "E2EL", r.e2el);
    if (r.has_overhead) {
        std::printf("-------Server overhead per streamed event---------\n");
        std::printf("Mean (us):%41.2f\n", r.overhead_mean_us);
        std::printf("P99 upper bound (us):%30.0f\n", r.overhead_p99_bound_us);
        std::printf("Events:%44lld\n", static_cast<long long>(r.overhead_events));
    }
    if (r.has_steps) {
        std::printf("-------------Engine steps (server-side)-----------\n");
        std::printf("Steps:%45lld\n", static_cast<long long>(r.steps));
        std::printf("Mean step (ms):%36.3f\n", r.step_mean_ms);
        std::printf("Host work per step (ms):%27.3f\n", r.host_ms_per_step);
        std::printf("Host share of the step (%%):%24.2f\n", r.host_share * 100.0);
        std::printf("  of which sampling per step (ms):%18.3f\n", r.sample_ms_per_step);
        std::printf("Device workspace high water (MiB):%17.0f\n", r.workspace_high_water_mib);
    }
    std::printf("==================================================\n");
    std::fflush(stdout);
}

LevelResult run_level(const ServeBenchOptions& o, const std::string& model, const std::vector<int32_t>& pool,
                      int concurrency) {
    const int total = o.requests_per_level > 0 ? o.requests_per_level : std::max(16, 4 * concurrency);
    std::vector<std::string> bodies;
    for (int i = 0; i < total; ++i) bodies.push_back(request_body(o, model, pool, i));
    std::vector<RequestTiming> timings(static_cast<size_t>(total));
    std::atomic<int> next{0};
    const ServerScrape before = scrape_server(o);
    const Clock::time_point start = Clock::now();
    std::vector<std::thread> workers;
    for (int w = 0; w < concurrency; ++w) {
        workers.emplace_back([&] {
            httplib::Client client = make_client(o);
            for (int i = next++; i < total; i = next++)
                timings[static_cast<size_t>(i)] = timed_request(client, o, bodies[i]);
        });
    }
    for (auto& w : workers) w.join();
    LevelResult level;
    level.concurrency = concurrency;
    level.duration_s = seconds_between(start, Clock::now());
    const ServerScrape after = scrape_server(o);
    add_overhead(level, before.overhead, after.overhead);
    add_steps(level, before.steps, after.steps);
    std::vector<double> ttft, tpot, itl, e2el;
    for (const RequestTiming& t : timings) {
        if (!t.ok) {
            ++level.failed;
            if (level.first_error.empty()) level.first_error = t.error;
            continue;
        }
        ++level.completed;
        level.input_tokens += t.prompt_tokens;
        level.output_tokens += t.output_tokens;
        ttft.push_back(t.ttft_s);
        e2el.push_back(t.e2el_s);
        itl.insert(itl.end(), t.itl_s.begin(), t.itl_s.end());
        if (t.output_tokens > 1) tpot.push_back((t.e2el_s - t.ttft_s) / (t.output_tokens - 1));
    }
    level.ttft = summarize(ttft, o.percentiles);
    level.tpot = summarize(tpot, o.percentiles);
    level.itl = summarize(itl, o.percentiles);
    level.e2el = summarize(e2el, o.percentiles);
    return level;
}

json summary_json(const Summary& s) {
    json out = {{"mean_ms", s.mean * 1e3}, {"median_ms", s.median * 1e3}, {"std_ms", s.stddev * 1e3}};
    for (const auto& [p, v] : s.percentiles) out["p" + std::to_string(static_cast<int>(p)) + "_ms"] = v * 1e3;
    return out;
}

void write_json(const ServeBenchOptions& o, const std::vector<LevelResult>& results) {
    json levels = json::array();
    for (const LevelResult& r : results) {
        levels.push_back(
            {{"concurrency", r.concurrency},
             {"completed", r.completed},
             {"failed", r.failed},
             {"duration_s", r.duration_s},
             {"input_tokens", r.input_tokens},
             {"output_tokens", r.output_tokens},
             {"request_throughput", r.completed / r.duration_s},
             {"output_throughput", static_cast<double>(r.output_tokens) / r.duration_s},
             {"ttft", summary_json(r.ttft)},
             {"tpot", summary_json(r.tpot)},
             {"itl", summary_json(r.itl)},
             {"e2el", summary_json(r.e2el)},
             {"server_overhead_mean_us", r.has_overhead ? json(r.overhead_mean_us) : json(nullptr)},
             {"server_overhead_p99_bound_us", r.has_overhead ? json(r.overhead_p99_bound_us) : json(nullptr)},
             {"engine_steps", r.has_steps ? json(r.steps) : json(nullptr)},
             {"step_mean_ms", r.has_steps ? json(r.step_mean_ms) : json(nullptr)},
             {"host_ms_per_step", r.has_steps ? json(r.host_ms_per_step) : json(nullptr)},
             {"host_share", r.has_steps ? json(r.host_share) : json(nullptr)},
             {"sample_ms_per_step", r.has_steps ? json(r.sample_ms_per_step) : json(nullptr)},
             {"workspace_high_water_mib", r.has_steps ? json(r.workspace_high_water_mib) : json(nullptr)}});
    }
    std::ofstream(o.json_out) << json{{"endpoint", o.endpoint},
                                      {"input_len", o.input_len},
                                      {"output_len", o.output_len},
                                      {"levels", levels}}
                                     .dump(2)
                              << "\n";
}

}  // namespace

std::vector<LevelResult> run_serve_bench(const ServeBenchOptions& options) {
    DSV4_CHECK(options.endpoint == "completions" || options.endpoint == "chat",
               "--endpoint must be completions or chat (got '{}')", options.endpoint);
    std::string model = options.model;
    if (model.empty()) model = get_json(options, "/v1/models")["data"][0]["id"].get<std::string>();
    const std::vector<int32_t> pool = options.endpoint == "chat" ? std::vector<int32_t>{} : token_pool(options, model);
    DSV4_CHECK(options.endpoint == "chat" || !pool.empty(), "/tokenize returned no tokens");
    std::vector<LevelResult> results;
    for (int concurrency : options.concurrency) {
        DSV4_CHECK(concurrency >= 1, "concurrency levels must be >= 1 (got {})", concurrency);
        LevelResult level = run_level(options, model, pool, concurrency);
        print_level(level);
        DSV4_CHECK(level.completed > 0, "every request at concurrency {} failed: {}", concurrency, level.first_error);
        results.push_back(std::move(level));
    }
    if (!options.json_out.empty()) write_json(options, results);
    return results;
}

}  // namespace dsv4::server
