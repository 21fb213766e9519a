// /metrics against vLLM's example Grafana dashboard: every metric name its panels query is exported, with the
// model_name label the panels filter on, and the request-phase histograms get samples from real requests.
//
// Source of the names: vllm-project/vllm, examples/observability/prometheus_grafana/grafana.json at commit
// 4b5c627c23e6690b8987100d1cbf78e34ac14bf9 (the "expr" of every panel target; the file's earlier home,
// examples/online_serving/prometheus_grafana/grafana.json at e88892c9080b29aa3dbc1d1096ba719ab0886163, adds
// vllm:time_per_output_token_seconds, also listed in issue 22 with the rest of kIssueMetrics). That older dashboard
// also plots vLLM V0 series (vllm:num_requests_swapped, vllm:gpu_cache_usage_perc, vllm:cpu_cache_usage_perc) that
// vLLM itself no longer exports; dsv4 does not fake them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "server/http/metrics.h"
#include "test_support.h"

namespace dsv4::testing {
namespace {

using nlohmann::json;

const std::vector<std::string> kDashboardSamples = {
    "vllm:e2e_request_latency_seconds_bucket",
    "vllm:e2e_request_latency_seconds_sum",
    "vllm:e2e_request_latency_seconds_count",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:inter_token_latency_seconds_bucket",
    "vllm:inter_token_latency_seconds_sum",
    "vllm:inter_token_latency_seconds_count",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:time_to_first_token_seconds_sum",
    "vllm:time_to_first_token_seconds_count",
    "vllm:kv_cache_usage_perc",
    "vllm:request_prompt_tokens_bucket",
    "vllm:request_generation_tokens_bucket",
    "vllm:request_success_total",
    "vllm:request_queue_time_seconds_sum",
    "vllm:request_prefill_time_seconds_sum",
    "vllm:request_decode_time_seconds_sum",
    "vllm:request_max_num_generation_tokens_sum",
    // the earlier dashboard
    "vllm:time_per_output_token_seconds_bucket",
    "vllm:time_per_output_token_seconds_sum",
    "vllm:time_per_output_token_seconds_count",
};

// Issue 22's list of missing vLLM metrics (metric family names).
const std::vector<std::string> kIssueMetrics = {
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:request_inference_time_seconds",
    "vllm:time_per_output_token_seconds",
    "vllm:iteration_tokens_total",
    "vllm:cache_config_info",
};

struct Exposition {
    std::set<std::string> families;                   // from "# TYPE name type"
    std::multimap<std::string, std::string> samples;  // name -> "{labels} value"
    double value(const std::string& name, const std::string& label_part = "") const {
        for (auto [it, end] = samples.equal_range(name); it != end; ++it) {
            if (it->second.find(label_part) == std::string::npos) continue;
            return std::stod(it->second.substr(it->second.rfind(' ') + 1));
        }
        return -1;
    }
};

Exposition parse_exposition(const std::string& text) {
    Exposition out;
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t end = text.find('\n', pos);
        const std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        if (line.rfind("# TYPE ", 0) == 0) {
            const std::string rest = line.substr(7);
            out.families.insert(rest.substr(0, rest.find(' ')));
        } else if (!line.empty() && line[0] != '#') {
            const size_t brace = line.find('{');
            out.samples.emplace(line.substr(0, brace), line.substr(brace));
        }
    }
    return out;
}

// The memory tiers' series (docs/operations.md "Memory tiers"): prefix-cache hits by tier (summing to vLLM's total),
// the expert cache's queries and hits, and the bytes moved by direction, straight from the engine's counters.
TEST(Metrics, MemoryTierCountersCarryTheirLabels) {
    EngineStats stats;
    stats.prefix_cache_queries = 1000;
    stats.prefix_cache_hits = 700;
    stats.prefix_cache_hits_by_tier = {400, 256, 44};
    stats.kv_offloaded_bytes = 11;
    stats.kv_loaded_bytes = 12;
    stats.kv_disk_loaded_bytes = 13;
    stats.kv_disk_written_bytes = 14;
    stats.kv_disk_corrupt = 2;
    stats.expert_pairs = 600;
    stats.expert_hit_pairs = 450;
    stats.expert_host_pairs = 30;
    stats.expert_fetched_bytes = 15;
    stats.expert_activation_bytes = 16;
    stats.expert_in_place_pairs = 40;
    stats.expert_in_place_bytes = 17;
    const server::ServerMetrics metrics;
    const Exposition e = parse_exposition(metrics.render("m", &stats, nullptr, 0));
    double by_tier = 0;
    for (const char* tier : {"device", "host", "disk"}) {
        const double v = e.value("dsv4:prefix_cache_hits_by_tier_total", fmt::format("tier=\"{}\"", tier));
        EXPECT_GE(v, 0) << tier;
        by_tier += v;
    }
    EXPECT_EQ(by_tier, e.value("vllm:prefix_cache_hits_total"));
    EXPECT_EQ(e.value("dsv4:prefix_cache_hits_by_tier_total", "tier=\"host\""), 256);
    EXPECT_EQ(e.value("dsv4:expert_cache_queries_total"), 600);
    EXPECT_EQ(e.value("dsv4:expert_cache_hits_total"), 450);
    EXPECT_EQ(e.value("dsv4:expert_host_pairs_total"), 30);
    EXPECT_EQ(e.value("dsv4:expert_in_place_pairs_total"), 40);
    EXPECT_EQ(e.value("dsv4:tier_bytes_total", "direction=\"expert_read_in_place\""), 17);
    EXPECT_EQ(e.value("dsv4:kv_disk_corrupt_total"), 2);
    EXPECT_EQ(e.value("dsv4:tier_bytes_total", "direction=\"kv_host_to_device\""), 12);
    EXPECT_EQ(e.value("dsv4:tier_bytes_total", "direction=\"expert_host_to_device\""), 15);
    EXPECT_EQ(e.value("dsv4:tier_bytes_total", "direction=\"kv_host_to_disk\""), 14);
}

TEST(Metrics, EveryNameOfVllmsGrafanaDashboardIsExported) {
    DSV4_REQUIRE_TOKENIZER();
    TestServer server;
    ASSERT_EQ(post_json(server, "/v1/chat/completions",
                        R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true})")
                  .status,
              200);
    ASSERT_EQ(post_json(server, "/v1/completions", R"({"prompt":"hello","max_tokens":4,"n":2})").status, 200);
    const HttpResult scrape = get(server, "/metrics");
    ASSERT_EQ(scrape.status, 200);
    const Exposition e = parse_exposition(scrape.body);
    for (const std::string& name : kDashboardSamples) {
        const auto [begin, end] = e.samples.equal_range(name);
        ASSERT_NE(begin, end) << "no sample named " << name;
        for (auto it = begin; it != end; ++it) {
            EXPECT_EQ(it->second.rfind("{model_name=\"dsv4-test\"", 0), 0u) << name << it->second;
        }
    }
    for (const std::string& family : kIssueMetrics) EXPECT_TRUE(e.families.count(family)) << family;

    // One stream + one request with n = 2: three completions, each with its phases observed.
    for (const char* phase : {"queue", "prefill", "decode", "inference"}) {
        EXPECT_EQ(e.value(fmt::format("vllm:request_{}_time_seconds_count", phase)), 3) << phase;
    }
    EXPECT_EQ(e.value("vllm:request_time_per_output_token_seconds_count"), 3);
    EXPECT_EQ(e.value("vllm:request_max_num_generation_tokens_count"), 2);  // per request
    EXPECT_EQ(e.value("vllm:request_max_num_generation_tokens_sum"), 5 + 4);
    EXPECT_EQ(e.value("vllm:request_params_n_sum"), 1 + 2);
    EXPECT_EQ(e.value("vllm:time_per_output_token_seconds_count"), e.value("vllm:inter_token_latency_seconds_count"));
    EXPECT_GT(e.value("vllm:time_per_output_token_seconds_count"), 0);
    // Engine steps: the histogram's count is the engine's step count, its sum the tokens of those steps.
    const EngineStats stats = server.engine().stats();
    EXPECT_EQ(e.value("vllm:iteration_tokens_total_count"), static_cast<double>(stats.steps_total));
    EXPECT_EQ(e.value("vllm:iteration_tokens_total_sum"), static_cast<double>(stats.step_tokens_total));
    EXPECT_EQ(e.value("vllm:iteration_tokens_total_bucket", "le=\"+Inf\""), static_cast<double>(stats.steps_total));
    EXPECT_NEAR(e.value("dsv4:engine_step_seconds_total"), stats.steps_total * kFakeStepSeconds, 1e-9);
    EXPECT_NEAR(e.value("dsv4:engine_step_host_seconds_total"), stats.steps_total * kFakeStepSeconds * kFakeHostShare,
                1e-9);
    EXPECT_NEAR(e.value("dsv4:engine_step_sample_seconds_total"),
                stats.steps_total * kFakeStepSeconds * kFakeSampleShare, 1e-9);
    EXPECT_EQ(e.value("dsv4:device_workspace_bytes"), static_cast<double>(kFakeWorkspaceBytes));
    EXPECT_EQ(e.value("dsv4:device_workspace_high_water_bytes"), static_cast<double>(stats.workspace_high_water_bytes));
    EXPECT_GT(stats.workspace_high_water_bytes, 0);
    EXPECT_EQ(
        e.value("vllm:cache_config_info", "block_size=\"256\",cache_dtype=\"fake\",enable_prefix_caching=\"False\""),
        1);
}

TEST(Metrics, RequestPhasesAddUpForASlowPrefill) {
    DSV4_REQUIRE_TOKENIZER();
    // Prefill 60 ms, then 4 tokens 5 ms apart: prefill >= 60 ms, decode ~ 15 ms, inference = prefill + decode.
    TestServer server({.engine =
                           [](FakeEngineOptions& o) {
                               o.first_token_delay = std::chrono::milliseconds(60);
                               o.step_interval = std::chrono::milliseconds(5);
                           },
                       .server = {}});
    ASSERT_EQ(post_json(server, "/v1/completions", R"({"prompt":"hi","max_tokens":4})").status, 200);
    const Exposition e = parse_exposition(get(server, "/metrics").body);
    const double prefill = e.value("vllm:request_prefill_time_seconds_sum");
    const double decode = e.value("vllm:request_decode_time_seconds_sum");
    const double inference = e.value("vllm:request_inference_time_seconds_sum");
    EXPECT_GE(prefill, 0.055);
    EXPECT_GE(decode, 0.010);
    EXPECT_LT(decode, prefill);
    EXPECT_NEAR(inference, prefill + decode, 1e-6);
    EXPECT_NEAR(e.value("vllm:request_time_per_output_token_seconds_sum"), decode / 3, 1e-6);
    EXPECT_GE(e.value("vllm:e2e_request_latency_seconds_sum"), inference);
}

}  // namespace
}  // namespace dsv4::testing
