#include "bench/client/bench_stats.h"

#include <algorithm>
#include <cmath>

namespace dsv4::server {

Summary summarize(std::vector<double> values, const std::vector<double>& percentiles) {
    Summary summary;
    summary.count = values.size();
    for (double p : percentiles) summary.percentiles.emplace_back(p, 0.0);
    if (values.empty()) return summary;
    std::sort(values.begin(), values.end());
    double sum = 0;
    for (double v : values) sum += v;
    summary.mean = sum / static_cast<double>(values.size());
    double squares = 0;
    for (double v : values) squares += (v - summary.mean) * (v - summary.mean);
    summary.stddev = std::sqrt(squares / static_cast<double>(values.size()));
    auto at = [&](double p) {
        const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
        const auto low = static_cast<size_t>(std::floor(rank));
        const size_t high = std::min(low + 1, values.size() - 1);
        const double fraction = rank - static_cast<double>(low);
        return values[low] + (values[high] - values[low]) * fraction;
    };
    summary.median = at(50);
    for (auto& [p, value] : summary.percentiles) value = at(p);
    return summary;
}

}  // namespace dsv4::server
