// Latency statistics for the serving benchmark, with `vllm bench serve` definitions (anchors.md 4.1):
//   TTFT  request sent -> first chunk carrying output text
//   ITL   gaps between successive output chunks of one request
//   TPOT  (E2EL - TTFT) / (output tokens - 1), only for requests with more than one output token
//   E2EL  request sent -> last byte received
#pragma once

#include <string>
#include <vector>

namespace dsv4::server {

struct Summary {
    size_t count = 0;
    double mean = 0;
    double median = 0;
    double stddev = 0;  // population standard deviation (numpy's default, as vLLM reports)
    std::vector<std::pair<double, double>> percentiles;  // (p, value)
};

// Percentiles by linear interpolation between closest ranks (numpy's default); empty input gives zeros.
Summary summarize(std::vector<double> values, const std::vector<double>& percentiles);

struct RequestTiming {
    bool ok = false;
    std::string error;
    double ttft_s = 0;
    double e2el_s = 0;
    std::vector<double> itl_s;
    int prompt_tokens = 0;
    int output_tokens = 0;
};

}  // namespace dsv4::server
