#include "sample/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>

#include "core/error.h"
#include "sample/logits_processors.h"
#include "sample/sampling_params.h"

namespace dsv4 {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr size_t kHeapTopK = 1024;  // top_k up to this uses a heap, larger k nth_element

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
    std::vector<double> bucket_mass;
    Candidates candidates;
};

Workspace& workspace() {
    thread_local Workspace ws;
    return ws;
}

// Rejects NaN and +inf (a model bug would otherwise poison the softmax); -inf is a legitimate mask.
void check_finite_or_masked(std::span<const float> logits) {
    // Branch-free scan (vectorizes); only a bad row pays for finding the culprit.
    constexpr float kInf = std::numeric_limits<float>::infinity();
    bool bad = false;
    for (float x : logits) bad |= !(x < kInf);
    if (!bad) return;
    for (size_t i = 0; i < logits.size(); ++i) {
        if (!(logits[i] < kInf)) {
            fail("sample: logit for token {} is {}; the model produced a non-finite value", i, logits[i]);
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
// Small k (the common case) keeps a min-heap of the k best in one pass; large k uses nth_element.
float top_k_floor(std::span<const float> logits, int top_k, std::vector<float>& scratch) {
    if (top_k <= 0 || static_cast<size_t>(top_k) >= logits.size()) return kNegInf;
    const size_t k = static_cast<size_t>(top_k);
    if (k <= kHeapTopK) {
        scratch.assign(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(k));
        std::make_heap(scratch.begin(), scratch.end(), std::greater<float>());
        for (size_t i = k; i < logits.size(); ++i) {
            if (logits[i] <= scratch.front()) continue;
            std::pop_heap(scratch.begin(), scratch.end(), std::greater<float>());
            scratch.back() = logits[i];
            std::push_heap(scratch.begin(), scratch.end(), std::greater<float>());
        }
        return scratch.front();
    }
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
    out.tokens.resize(logits.size());
    out.weights.resize(logits.size());
    out.total = 0.0;
    const double inv_temperature = 1.0 / params.temperature;
    size_t count = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
        float x = logits[i];
        if (x == kNegInf || x < floor) continue;
        double weight = std::exp((static_cast<double>(x) - best) * inv_temperature);
        if (weight < params.min_p || weight == 0.0) continue;  // underflowed tokens have probability 0
        out.tokens[count] = static_cast<int64_t>(i);
        out.weights[count] = weight;
        out.total += weight;
        ++count;
    }
    out.tokens.resize(count);
    out.weights.resize(count);
}

// top_p buckets weights in (0, 1] by the bits of their double representation, which order positive doubles:
// 64 buckets per octave (exponent plus the top 6 mantissa bits) over 64 octaves, and one last bucket for the rest.
constexpr int kSubBucketBits = 6;
constexpr uint64_t kTopPBuckets = (uint64_t{64} << kSubBucketBits) + 1;

// Bucket of a weight in (0, 1]: 0 for the largest weights, increasing as the weight decreases.
uint64_t top_p_bucket(double weight) {
    constexpr uint64_t kOneBits = 0x3ff0000000000000ULL;  // bit pattern of 1.0
    uint64_t distance = (kOneBits - std::bit_cast<uint64_t>(weight)) >> (52 - kSubBucketBits);
    return std::min(distance, kTopPBuckets - 1);
}

// Smallest weight top_p keeps: walking tokens from most to least likely, a token is kept while the mass before it
// is below top_p * total. One pass builds a mass histogram over the buckets; the walk over buckets finds the one
// holding the boundary, and only that bucket's weights are sorted. O(candidates) with no large sort.
double top_p_cutoff(const std::vector<double>& weights, double total, double top_p, Workspace& ws) {
    const double target = top_p * total;
    ws.bucket_mass.assign(kTopPBuckets, 0.0);
    for (double w : weights) ws.bucket_mass[top_p_bucket(w)] += w;
    double mass_before = 0.0;
    uint64_t boundary = 0;
    while (boundary < kTopPBuckets && mass_before + ws.bucket_mass[boundary] < target) {
        mass_before += ws.bucket_mass[boundary++];
    }
    if (boundary == kTopPBuckets) return 0.0;  // rounding: top_p needs every candidate
    std::vector<double>& tied = ws.double_scratch;
    tied.clear();
    for (double w : weights) {
        if (top_p_bucket(w) == boundary) tied.push_back(w);
    }
    std::sort(tied.begin(), tied.end(), std::greater<double>());
    for (size_t i = 0; i < tied.size(); ++i) {
        if (mass_before >= target) return tied[i - 1];  // i > 0: mass_before < target on entry
        mass_before += tied[i];
    }
    return tied.back();
}

void apply_top_p(double top_p, Workspace& ws) {
    Candidates& c = ws.candidates;
    if (top_p >= 1.0 || c.tokens.size() <= 1) return;
    double cutoff = top_p_cutoff(c.weights, c.total, top_p, ws);
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
    check_finite_or_masked(processed_logits);
    Workspace& ws = workspace();
    build_distribution(processed_logits, params, ws);
    TokenDistribution result;
    result.tokens = ws.candidates.tokens;
    result.probs.reserve(result.tokens.size());
    for (double weight : ws.candidates.weights) result.probs.push_back(weight / ws.candidates.total);
    return result;
}

bool samples_raw_argmax(const SamplingParams& params, const SamplerState& state) {
    return is_greedy(params) && !params.logprobs && logits_processors_are_identity(params, state);
}

SampleResult record_chosen(int64_t token, SamplerState& state) {
    DSV4_CHECK(token >= 0 && token < state.vocab_size(), "sample: argmax token {} outside the vocabulary of {}", token,
               state.vocab_size());
    state.record_output(token);
    SampleResult result;
    result.token = token;
    return result;
}

SampleResult sample(std::span<const float> logits, const SamplingParams& params, SamplerState& state) {
    DSV4_CHECK(static_cast<int64_t>(logits.size()) == state.vocab_size(),
               "sample: logits row has {} entries, vocabulary has {}", logits.size(), state.vocab_size());
    check_finite_or_masked(logits);
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
