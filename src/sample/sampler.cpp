#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "core/error.h"
#include "sample/logits_processors.h"
#include "sample/sampling_params.h"

namespace dsv4 {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Candidate tokens in ascending id order with unnormalised weights exp((logit - max) / temperature).
struct Candidates {
    std::vector<int64_t> tokens;
    std::vector<double> weights;
    double total = 0.0;
};

// Per-thread scratch so that sampling a 129K-entry row allocates nothing after the first call.
struct Workspace {
    std::vector<float> logits;
    std::vector<float> float_scratch;
    std::vector<double> double_scratch;
    Candidates candidates;
};

Workspace& workspace() {
    thread_local Workspace ws;
    return ws;
}

void check_logits_row(std::span<const float> logits, int64_t vocab_size) {
    DSV4_CHECK(static_cast<int64_t>(logits.size()) == vocab_size, "sample: logits row has {} entries, vocabulary has {}",
               logits.size(), vocab_size);
    for (size_t i = 0; i < logits.size(); ++i) {
        float x = logits[i];
        if (std::isnan(x) || x == std::numeric_limits<float>::infinity()) {
            fail("sample: logit for token {} is {}; the model produced a non-finite value", i, x);
        }
    }
}

float max_logit(std::span<const float> logits) {
    float best = kNegInf;
    for (float x : logits) best = std::max(best, x);
    DSV4_CHECK(best != kNegInf, "sample: every token is masked (all logits are -inf), nothing can be sampled");
    return best;
}

// The k-th largest logit when top_k removes anything, else -inf. Ties with it survive (vLLM keeps them too).
float top_k_floor(std::span<const float> logits, int top_k, std::vector<float>& scratch) {
    if (top_k <= 0 || static_cast<size_t>(top_k) >= logits.size()) return kNegInf;
    scratch.assign(logits.begin(), logits.end());
    auto kth = scratch.begin() + (top_k - 1);
    std::nth_element(scratch.begin(), kth, scratch.end(), std::greater<float>());
    return *kth;
}

// Temperature, top_k and min_p in one pass over the vocabulary. min_p keeps p >= min_p * p_max, and p / p_max is
// exactly the weight below because the max logit has weight exp(0) = 1.
void collect_candidates(std::span<const float> logits, const SamplingParams& params, Workspace& ws) {
    float best = max_logit(logits);
    float floor = top_k_floor(logits, params.top_k, ws.float_scratch);
    Candidates& out = ws.candidates;
    out.tokens.clear();
    out.weights.clear();
    out.total = 0.0;
    for (size_t i = 0; i < logits.size(); ++i) {
        float x = logits[i];
        if (x == kNegInf || x < floor) continue;
        double weight = std::exp((static_cast<double>(x) - best) / params.temperature);
        if (weight < params.min_p || weight == 0.0) continue;  // underflowed tokens have probability 0
        out.tokens.push_back(static_cast<int64_t>(i));
        out.weights.push_back(weight);
        out.total += weight;
    }
}

// Smallest weight top_p keeps: walking tokens from most to least likely, a token is kept while the mass before it
// is below top_p * total. Sorts progressively larger leading chunks, so a peaked distribution costs O(V) and the
// worst case is bounded by a full sort.
double top_p_cutoff(const std::vector<double>& weights, double total, double top_p, std::vector<double>& sorted) {
    sorted.assign(weights.begin(), weights.end());
    const double target = top_p * total;
    double mass = 0.0;
    size_t done = 0;
    size_t chunk = 64;
    while (done < sorted.size()) {
        size_t end = std::min(sorted.size(), done + chunk);
        auto first = sorted.begin() + static_cast<std::ptrdiff_t>(done);
        auto last = sorted.begin() + static_cast<std::ptrdiff_t>(end);
        if (end < sorted.size()) std::nth_element(first, last - 1, sorted.end(), std::greater<double>());
        std::sort(first, last, std::greater<double>());
        for (size_t i = done; i < end; ++i) {
            if (mass >= target) return sorted[i - 1];  // i > 0: the first token always has mass 0 before it
            mass += sorted[i];
        }
        done = end;
        chunk *= 2;
    }
    return 0.0;  // top_p needs every candidate
}

void apply_top_p(double top_p, Workspace& ws) {
    Candidates& c = ws.candidates;
    if (top_p >= 1.0 || c.tokens.size() <= 1) return;
    double cutoff = top_p_cutoff(c.weights, c.total, top_p, ws.double_scratch);
    size_t kept = 0;
    c.total = 0.0;
    for (size_t i = 0; i < c.tokens.size(); ++i) {
        if (c.weights[i] < cutoff) continue;
        c.tokens[kept] = c.tokens[i];
        c.weights[kept] = c.weights[i];
        c.total += c.weights[i];
        ++kept;
    }
    c.tokens.resize(kept);
    c.weights.resize(kept);
}

// Inverse-CDF draw over the candidates in id order.
int64_t draw(const Candidates& c, double uniform) {
    double target = uniform * c.total;
    double cumulative = 0.0;
    for (size_t i = 0; i < c.tokens.size(); ++i) {
        cumulative += c.weights[i];
        if (target < cumulative) return c.tokens[i];
    }
    return c.tokens.back();  // rounding left target at the very top
}

void build_distribution(std::span<const float> processed, const SamplingParams& params, Workspace& ws) {
    collect_candidates(processed, params, ws);
    apply_top_p(params.top_p, ws);
}

}  // namespace

int64_t argmax_token(std::span<const float> logits) {
    DSV4_CHECK(!logits.empty(), "argmax_token: empty logits row");
    size_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i) {
        if (logits[i] > logits[best]) best = i;  // strict: the lowest id wins ties
    }
    DSV4_CHECK(logits[best] != kNegInf, "sample: every token is masked (all logits are -inf), nothing can be sampled");
    return static_cast<int64_t>(best);
}

TokenDistribution sampling_distribution(std::span<const float> processed_logits, const SamplingParams& params) {
    DSV4_CHECK(!is_greedy(params), "sampling_distribution: temperature {} is greedy; use argmax_token",
               params.temperature);
    Workspace& ws = workspace();
    build_distribution(processed_logits, params, ws);
    TokenDistribution result;
    result.tokens = ws.candidates.tokens;
    result.probs.reserve(result.tokens.size());
    for (double weight : ws.candidates.weights) result.probs.push_back(weight / ws.candidates.total);
    return result;
}

SampleResult sample(std::span<const float> logits, const SamplingParams& params, SamplerState& state) {
    check_logits_row(logits, state.vocab_size());
    Workspace& ws = workspace();
    ws.logits.assign(logits.begin(), logits.end());
    apply_logits_processors(ws.logits, params, state);

    SampleResult result;
    if (is_greedy(params)) {
        result.token = argmax_token(ws.logits);
    } else {
        build_distribution(ws.logits, params, ws);
        double uniform = uniform_at(state.seed(), static_cast<uint64_t>(state.num_output_tokens()));
        result.token = draw(ws.candidates, uniform);
    }
    if (params.logprobs) result.logprobs = compute_raw_logprobs(logits, result.token, *params.logprobs);
    state.record_output(result.token);
    return result;
}

}  // namespace dsv4
