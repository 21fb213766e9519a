// Small pieces: benchmark statistics, auth helpers, admission gate, metrics exposition, SSE/JSON text helpers and
// the choice pipeline's merging.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/client/bench_stats.h"
#include "core/error.h"
#include "server/generation/choice_pipeline.h"
#include "server/http/admission.h"
#include "server/http/api_error.h"
#include "server/http/auth.h"
#include "server/http/metrics.h"
#include "server/http/sse.h"
#include "server/model_files.h"

namespace dsv4::server {
namespace {

TEST(BenchStats, PercentilesInterpolateLikeNumpy) {
    const Summary s = summarize({4, 1, 3, 2}, {50, 90, 99, 100, 0});
    EXPECT_EQ(s.count, 4u);
    EXPECT_DOUBLE_EQ(s.mean, 2.5);
    EXPECT_DOUBLE_EQ(s.median, 2.5);
    EXPECT_DOUBLE_EQ(s.stddev, std::sqrt(1.25));
    EXPECT_DOUBLE_EQ(s.percentiles[0].second, 2.5);
    EXPECT_DOUBLE_EQ(s.percentiles[1].second, 3.7);  // numpy.percentile([1,2,3,4], 90)
    EXPECT_NEAR(s.percentiles[2].second, 3.97, 1e-12);
    EXPECT_DOUBLE_EQ(s.percentiles[3].second, 4);
    EXPECT_DOUBLE_EQ(s.percentiles[4].second, 1);
    const Summary empty = summarize({}, {99});
    EXPECT_EQ(empty.count, 0u);
    EXPECT_EQ(empty.percentiles.size(), 1u);
    EXPECT_EQ(summarize({7}, {99}).percentiles[0].second, 7);
}

TEST(Auth, ConstantTimeEqualAndKeyExtraction) {
    EXPECT_TRUE(constant_time_equal("secret", "secret"));
    EXPECT_FALSE(constant_time_equal("secret", "secreT"));
    EXPECT_FALSE(constant_time_equal("secret", "secret2"));
    EXPECT_FALSE(constant_time_equal("", "x"));
    EXPECT_TRUE(constant_time_equal("", ""));
    EXPECT_EQ(presented_api_key("Bearer abc", ""), "abc");
    EXPECT_EQ(presented_api_key("bearer abc", ""), "abc");
    EXPECT_EQ(presented_api_key("Basic abc", "k"), "k");
    EXPECT_EQ(presented_api_key("Bearer ", "k"), "k");
    EXPECT_EQ(presented_api_key("", ""), "");
    EXPECT_TRUE(path_is_public("/health", true, false));
    EXPECT_FALSE(path_is_public("/health", false, true));
    EXPECT_TRUE(path_is_public("/metrics", false, true));
    EXPECT_FALSE(path_is_public("/v1/models", true, true));
}

TEST(Admission, PhasesAndCap) {
    AdmissionGate gate(2);
    try {
        gate.enter();
        FAIL() << "admitted while loading";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 503);
        EXPECT_GT(e.retry_after_s(), 0);
    }
    gate.set_phase(ServerPhase::kReady);
    {
        AdmissionGate::Ticket a = gate.enter();
        AdmissionGate::Ticket b = gate.enter();
        EXPECT_EQ(gate.in_flight(), 2);
        try {
            gate.enter();
            FAIL() << "admitted over the cap";
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status(), 429);
            EXPECT_EQ(e.type(), "rate_limit_error");
        }
        AdmissionGate::Ticket moved = std::move(a);
        EXPECT_EQ(gate.in_flight(), 2);
        b.release();
        EXPECT_EQ(gate.in_flight(), 1);
    }
    EXPECT_EQ(gate.in_flight(), 0);
    gate.set_phase(ServerPhase::kDraining);
    EXPECT_THROW(gate.enter(), ApiError);
}

// A non-streaming response is written after its handler returns: its ticket must stay in flight until the write is
// done (the logger releases it on the same worker thread), or a drain closes the connection mid-response.
TEST(Admission, TicketHeldUntilTheResponseIsWritten) {
    AdmissionGate gate(4);
    gate.set_phase(ServerPhase::kReady);
    AdmissionGate::hold_until_written(gate.enter());
    EXPECT_EQ(gate.in_flight(), 1);
    std::thread other_worker([] { AdmissionGate::release_after_write(); });
    other_worker.join();
    EXPECT_EQ(gate.in_flight(), 1) << "another worker's write must not release this one's ticket";
    AdmissionGate::hold_until_written(gate.enter());  // a worker's next response releases the previous ticket
    EXPECT_EQ(gate.in_flight(), 1);
    AdmissionGate::release_after_write();
    EXPECT_EQ(gate.in_flight(), 0);
    AdmissionGate::release_after_write();  // nothing held: no effect
    EXPECT_EQ(gate.in_flight(), 0);
}

TEST(Metrics, HistogramAndExposition) {
    Histogram h({0.1, 1.0});
    h.observe(0.05);
    h.observe(0.1);  // the bound itself belongs to its bucket (le)
    h.observe(0.5);
    h.observe(7);
    const Histogram::Snapshot s = h.snapshot();
    EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 3, 4}));
    EXPECT_EQ(s.count, 4u);
    EXPECT_DOUBLE_EQ(s.sum, 7.65);

    ServerMetrics metrics;
    metrics.count_finish(FinishLabel::kLength);
    metrics.count_http_status(429);
    metrics.count_rejection("queue_full");
    metrics.time_to_first_token.observe(0.003);
    EngineStats stats;
    stats.running = 3;
    stats.generation_tokens_total = 1234567;
    const std::string text = metrics.render("a\"b", &stats, nullptr, 5);
    EXPECT_NE(text.find("vllm:num_requests_running{model_name=\"a\\\"b\"} 3\n"), std::string::npos) << text;
    EXPECT_NE(text.find("vllm:generation_tokens_total{model_name=\"a\\\"b\"} 1234567\n"), std::string::npos);
    EXPECT_NE(text.find("finished_reason=\"length\"} 1\n"), std::string::npos);
    EXPECT_NE(text.find("dsv4:http_responses_total{model_name=\"a\\\"b\",code=\"429\"} 1\n"), std::string::npos);
    EXPECT_NE(text.find("reason=\"queue_full\"} 1\n"), std::string::npos);
    EXPECT_NE(text.find("vllm:time_to_first_token_seconds_bucket{model_name=\"a\\\"b\",le=\"0.005\"} 1\n"),
              std::string::npos);
    EXPECT_NE(text.find("dsv4:requests_in_flight{model_name=\"a\\\"b\"} 5\n"), std::string::npos);
    // Every sample line is "name{labels} value" with a parsable number.
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t end = text.find('\n', pos);
        const std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        if (line.empty() || line[0] == '#') continue;
        const std::string value = line.substr(line.rfind(' ') + 1);
        char* parsed_end = nullptr;
        std::strtod(value.c_str(), &parsed_end);
        EXPECT_EQ(*parsed_end, '\0') << line;
    }
    EXPECT_EQ(escape_label_value("a\\b\nc\"d"), "a\\\\b\\nc\\\"d");
}

TEST(Sse, FramingAndJsonHelpers) {
    EXPECT_EQ(sse_event("{}"), "data: {}\n\n");
    std::string out;
    append_json_string(out, "a\"b\\c\nd\x01");
    EXPECT_EQ(nlohmann::json::parse(out).get<std::string>(), "a\"b\\c\nd\x01");
    out.clear();
    append_json_float(out, -0.25f);
    EXPECT_EQ(out, "-0.25");
    out.clear();
    append_json_float(out, -INFINITY);
    EXPECT_EQ(out, "-9999.0");
    out.clear();
    append_json_byte_array(out,
                           "\xff"
                           "a");
    EXPECT_EQ(out, "[255,97]");
}

TEST(ChoicePipelineMerge, AdjacentTextDeltasMerge) {
    std::vector<OutputDelta> out;
    OutputDelta a;
    a.kind = OutputDeltaKind::kContent;
    a.text = "he";
    OutputDelta b = a;
    b.text = "llo";
    OutputDelta r;
    r.kind = OutputDeltaKind::kReasoning;
    r.text = "x";
    append_merged(out, a);
    append_merged(out, b);
    append_merged(out, r);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].text, "hello");
    OutputDelta args0;
    args0.kind = OutputDeltaKind::kToolCallArguments;
    args0.tool_index = 0;
    args0.text = "{";
    OutputDelta args1 = args0;
    args1.tool_index = 1;
    append_merged(out, args0);
    append_merged(out, args1);
    EXPECT_EQ(out.size(), 4u);  // different tool calls never merge
}

TEST(ModelFiles, NamesAndTemplateRevision) {
    EXPECT_EQ(default_served_name("/models/DeepSeek-V4-Flash"), "DeepSeek-V4-Flash");
    EXPECT_EQ(default_served_name("/models/bundled/"), "bundled");
    EXPECT_EQ(resolve_template_revision("v4-0731", "/nonexistent"), ChatTemplateRevision::kV4_0731);
    EXPECT_EQ(resolve_template_revision("auto", "/nonexistent"), ChatTemplateRevision::kV4);
    EXPECT_EQ(resolve_template_revision("auto", std::string(DSV4_SOURCE_DIR) + "/tests/data"),
              ChatTemplateRevision::kV4);  // no config.json directly there
    EXPECT_THROW(resolve_template_revision("v5", "/"), Error);
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("dsv4_model_files_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const fs::path data = fs::path(DSV4_SOURCE_DIR) / "tests" / "data";
    fs::copy_file(data / "deepseek_v4_flash_0731_config.json", dir / "config.json",
                  fs::copy_options::overwrite_existing);
    EXPECT_EQ(resolve_template_revision("auto", dir.string()), ChatTemplateRevision::kV4_0731);
    EXPECT_EQ(resolve_model_dir(dir.string()), dir.string());
    fs::copy_file(data / "deepseek_v4_flash_config.json", dir / "config.json", fs::copy_options::overwrite_existing);
    EXPECT_EQ(resolve_template_revision("auto", dir.string()), ChatTemplateRevision::kV4);
    fs::remove_all(dir);
    EXPECT_THROW(resolve_model_dir("/nonexistent/model"), Error);
}

}  // namespace
}  // namespace dsv4::server
