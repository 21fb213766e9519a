#include "core/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace dsv4 {
namespace {

// log(sum(exp(logits))) with the max subtracted first.
double log_sum_exp(std::span<const float> logits) {
    double max_logit = -INFINITY;
    for (float x : logits) max_logit = std::max(max_logit, static_cast<double>(x));
    DSV4_CHECK(std::isfinite(max_logit), "logprobs: the logits row has no finite entry");
    double sum = 0.0;
    for (float x : logits) sum += std::exp(static_cast<double>(x) - max_logit);
    return max_logit + std::log(sum);
}

std::vector<TopLogprob> top_tokens(std::span<const float> logits, int num_top, double lse) {
    size_t count = std::min(static_cast<size_t>(num_top), logits.size());
    if (count == 0) return {};
    // Order by logit descending, then id ascending; a partial sort touches each entry once plus O(V log count).
    thread_local std::vector<int32_t> order;
    order.resize(logits.size());
    std::iota(order.begin(), order.end(), 0);
    auto better = [&](int32_t a, int32_t b) {
        float la = logits[static_cast<size_t>(a)];
        float lb = logits[static_cast<size_t>(b)];
        return la > lb || (la == lb && a < b);
    };
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(count), order.end(), better);
    std::vector<TopLogprob> top(count);
    for (size_t i = 0; i < count; ++i) {
        top[i].token = order[i];
        top[i].logprob = static_cast<float>(static_cast<double>(logits[static_cast<size_t>(order[i])]) - lse);
    }
    return top;
}

}  // namespace

SampledLogprobs compute_raw_logprobs(std::span<const float> logits, int64_t token, int num_top) {
    DSV4_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size(), "logprobs: token {} outside [0, {})", token,
               logits.size());
    DSV4_CHECK(num_top >= 0, "logprobs: num_top must be >= 0 (got {})", num_top);
    double lse = log_sum_exp(logits);
    SampledLogprobs result;
    float token_logit = logits[static_cast<size_t>(token)];
    result.logprob = static_cast<float>(static_cast<double>(token_logit) - lse);
    result.rank = std::count_if(logits.begin(), logits.end(), [&](float x) { return x >= token_logit; });
    result.top = top_tokens(logits, num_top, lse);
    return result;
}

}  // namespace dsv4
