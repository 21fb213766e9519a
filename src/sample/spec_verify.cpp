#include "sample/spec_verify.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "sample/logits_processors.h"
#include "sample/sampling_params.h"

namespace dsv4 {
namespace {

// The k verify rows, the drafts and their distributions, validated once.
struct VerifyRows {
    std::span<const float> logits;  // [(k + 1) * vocab]
    const DraftProposal& draft;
    int64_t vocab;

    int k() const { return static_cast<int>(draft.tokens.size()); }
    std::span<const float> row(int i) const {
        return logits.subspan(static_cast<size_t>(i * vocab), static_cast<size_t>(vocab));
    }
    // q_i(token): the draft distribution of row i (one-hot at the draft when the drafter picked greedily).
    double q(int i, int64_t token) const {
        if (draft.probs.empty()) return token == draft.tokens[i] ? 1.0 : 0.0;
        return draft.probs[static_cast<size_t>(i * vocab + token)];
    }
};

// A verify step's random numbers are keyed by its first output position (strictly increasing from step to step)
// and a lane: block verification looks at every coin of a step, so a coin keyed by its own position could be read
// again, already conditioned, by the next step.
double verify_uniform(uint64_t seed, uint64_t base, uint64_t lane) {
    return uniform_at(seed, base, lane);
}

void check_draft_tokens(std::span<const int32_t> drafts, int64_t vocab) {
    DSV4_CHECK(static_cast<int64_t>(drafts.size()) <= kMaxVerifyDrafts, "verify: {} drafts, at most {} are supported",
               drafts.size(), kMaxVerifyDrafts);
    for (int32_t t : drafts) {
        DSV4_CHECK(t >= 0 && t < vocab, "verify: draft token {} is outside the vocabulary [0, {})", t, vocab);
    }
}

void check_input(const VerifyRows& rows, const SamplerState& state) {
    const auto k = static_cast<int64_t>(rows.draft.tokens.size());
    check_draft_tokens(rows.draft.tokens, rows.vocab);
    DSV4_CHECK(rows.vocab == state.vocab_size(), "verify: vocabulary {} differs from the sampler state's {}",
               rows.vocab, state.vocab_size());
    DSV4_CHECK(static_cast<int64_t>(rows.logits.size()) == (k + 1) * rows.vocab,
               "verify: {} target logits for {} drafts over a vocabulary of {} (want {} rows)", rows.logits.size(), k,
               rows.vocab, k + 1);
    if (rows.draft.probs.empty()) return;
    DSV4_CHECK(static_cast<int64_t>(rows.draft.probs.size()) == k * rows.vocab,
               "verify: {} draft probabilities for {} drafts over a vocabulary of {}", rows.draft.probs.size(), k,
               rows.vocab);
    for (float q : rows.draft.probs) {
        DSV4_CHECK(std::isfinite(q) && q >= 0.0f, "verify: a draft probability is {} (want finite, >= 0)", q);
    }
}

// The processed target distribution of a row, dense over the vocabulary, given the history in `state`.
std::vector<double> target_probs(std::span<const float> raw, const SamplingParams& params, SamplerState& state) {
    std::vector<float> processed(raw.begin(), raw.end());
    apply_logits_processors(processed, params, state);
    const TokenDistribution dist = sampling_distribution(processed, params);
    std::vector<double> p(raw.size(), 0.0);
    for (size_t i = 0; i < dist.tokens.size(); ++i) p[static_cast<size_t>(dist.tokens[i])] = dist.probs[i];
    return p;
}

SampleResult emitted(std::span<const float> raw, int64_t token, const SamplingParams& params, SamplerState& state) {
    SampleResult r;
    r.token = token;
    if (params.logprobs) r.logprobs = compute_raw_logprobs(raw, token, *params.logprobs);
    state.record_output(token);
    return r;
}

// Inverse-CDF draw, in id order, from weights max(w * p(x) - q(x), 0) (the residual of row i); falls back to p when
// rounding left no mass (p and q then agree, and a rejection had probability 0).
int64_t draw_residual(const std::vector<double>& p, double w, const VerifyRows& rows, int i, double uniform) {
    std::vector<double> r(p.size());
    double total = 0.0;
    for (size_t x = 0; x < p.size(); ++x)
        total += (r[x] = std::max(w * p[x] - rows.q(i, static_cast<int64_t>(x)), 0.0));
    if (!(total > 0.0)) {
        r = p;
        total = 1.0;
    }
    const double target = uniform * total;
    double cumulative = 0.0;
    int64_t last = -1;
    for (size_t x = 0; x < r.size(); ++x) {
        if (r[x] <= 0.0) continue;
        cumulative += r[x];
        last = static_cast<int64_t>(x);
        if (target < cumulative) return last;
    }
    DSV4_CHECK(last >= 0, "verify: the residual distribution is empty");
    return last;  // rounding left target at the very top
}

// Greedy verification's walk: choose(i) records and returns row i's greedy token; drafts are kept while they equal
// it, and the first that does not (or row k) gives the last token.
template <typename Choose>
VerifyOutcome walk_greedy(std::span<const int32_t> drafts, Choose&& choose) {
    VerifyOutcome out;
    for (size_t i = 0; i <= drafts.size(); ++i) {
        SampleResult r = choose(i);
        const bool match = i < drafts.size() && r.token == drafts[i];
        out.tokens.push_back(std::move(r));
        if (!match) break;
        ++out.accepted;
    }
    return out;
}

VerifyOutcome verify_greedy(const VerifyRows& rows, const SamplingParams& params, SamplerState& state) {
    // The argmax of each processed row, recorded (the history of accepted drafts feeds the next row's processors).
    return walk_greedy(rows.draft.tokens,
                       [&](size_t i) { return sample(rows.row(static_cast<int>(i)), params, state); });
}

VerifyOutcome verify_standard(const VerifyRows& rows, const SamplingParams& params, SamplerState& state) {
    VerifyOutcome out;
    const auto base = static_cast<uint64_t>(state.num_output_tokens());
    for (int i = 0; i < rows.k(); ++i) {
        const std::vector<double> p = target_probs(rows.row(i), params, state);
        const int32_t d = rows.draft.tokens[i];
        const double q = rows.q(i, d);
        const double ratio = q > 0.0 ? p[d] / q : (p[d] > 0.0 ? 1.0 : 0.0);
        if (verify_uniform(state.seed(), base, kAcceptLane + static_cast<uint64_t>(i)) < std::min(1.0, ratio)) {
            out.tokens.push_back(emitted(rows.row(i), d, params, state));
            ++out.accepted;
            continue;
        }
        const int64_t token = draw_residual(p, 1.0, rows, i, verify_uniform(state.seed(), base, kResidualLane));
        out.tokens.push_back(emitted(rows.row(i), token, params, state));
        return out;
    }
    out.tokens.push_back(sample(rows.row(rows.k()), params, state));  // bonus: exactly a normal draw
    return out;
}

// Block verification (Sun et al., Algorithm 2). With P_i, Q_i the target and draft distributions of draft i
// (1-based) and the weights p_0 = 1, p_i = min(1, p_{i-1} P_i(X_i) / Q_i(X_i)):
//   h_i = Z_i / (Z_i + 1 - p_i), Z_i = sum_x max(p_i P_{i+1}(x) - Q_{i+1}(x), 0)   (i < k),   h_k = p_k;
// tau = the largest i with coin_i <= h_i (0 if none); emit X_1..X_tau, then a draw from P_{k+1} when tau = k, else
// from max(p_tau P_{tau+1} - Q_{tau+1}, 0) normalised.
VerifyOutcome verify_block(const VerifyRows& rows, const SamplingParams& params, SamplerState& state) {
    const int k = rows.k();
    const auto base = static_cast<uint64_t>(state.num_output_tokens());
    // P[i]: row i's target distribution (row i follows drafts 0..i-1), computed by walking the state along the
    // drafts and back. The walk stops at a draft the target gives no mass (e.g. one a structured-output constraint
    // forbids, which the state could not record): from there on every weight is 0, so no later P is ever read.
    std::vector<std::vector<double>> P;
    std::vector<int64_t> walked;
    for (int i = 0; i < k; ++i) {
        P.push_back(target_probs(rows.row(i), params, state));
        const int32_t d = rows.draft.tokens[i];
        if (!(P.back()[d] > 0.0)) break;
        state.record_output(d);
        walked.push_back(d);
    }
    state.unrecord_outputs(walked);
    P.resize(static_cast<size_t>(k), std::vector<double>(static_cast<size_t>(rows.vocab), 0.0));
    std::vector<double> weight(k + 1, 1.0);
    int tau = 0;
    for (int i = 1; i <= k; ++i) {
        const int32_t x = rows.draft.tokens[i - 1];
        const double q = rows.q(i - 1, x);
        const double ratio = q > 0.0 ? P[i - 1][x] / q : (P[i - 1][x] > 0.0 ? 1.0 : 0.0);
        weight[i] = std::min(1.0, weight[i - 1] * ratio);
        double h = weight[i];
        if (i < k) {
            double z = 0.0;
            for (size_t v = 0; v < P[i].size(); ++v) {
                z += std::max(weight[i] * P[i][v] - rows.q(i, static_cast<int64_t>(v)), 0.0);
            }
            const double denom = z + 1.0 - weight[i];
            h = denom > 0.0 ? z / denom : 1.0;  // 0 / 0: p_i = 1 and Q_{i+1} = P_{i+1}: nothing to correct
        }
        if (h > 0.0 && verify_uniform(state.seed(), base, kAcceptLane + static_cast<uint64_t>(i - 1)) <= h) tau = i;
    }
    VerifyOutcome out;
    for (int i = 0; i < tau; ++i) out.tokens.push_back(emitted(rows.row(i), rows.draft.tokens[i], params, state));
    out.accepted = tau;
    if (tau == k) {
        out.tokens.push_back(sample(rows.row(k), params, state));
        return out;
    }
    const double uniform = verify_uniform(state.seed(), base, kResidualLane);
    const int64_t token = draw_residual(P[tau], weight[tau], rows, tau, uniform);
    out.tokens.push_back(emitted(rows.row(tau), token, params, state));
    return out;
}

// Row i's correction or the bonus draw, recorded after the accepted drafts.
VerifyOutcome emit_device_rows(std::span<const int32_t> drafts, int accepted, int32_t last, SamplerState& state) {
    VerifyOutcome out;
    for (int i = 0; i < accepted; ++i) out.tokens.push_back(record_chosen(drafts[static_cast<size_t>(i)], state));
    out.tokens.push_back(record_chosen(last, state));
    out.accepted = accepted;
    return out;
}

}  // namespace

VerifyOutcome verify_device_rows(std::span<const DeviceDraftRow> rows, int32_t bonus, std::span<const int32_t> drafts,
                                 SamplerState& state, VerifyMethod method) {
    const int k = static_cast<int>(drafts.size());
    DSV4_CHECK(static_cast<int>(rows.size()) == k, "verify: {} device rows for {} drafts", rows.size(), k);
    check_draft_tokens(drafts, state.vocab_size());
    for (const DeviceDraftRow& r : rows) {
        DSV4_CHECK(r.p_draft >= 0.0 && r.p_draft <= 1.0, "verify: a draft probability of {} from the device",
                   r.p_draft);
    }
    const auto base = static_cast<uint64_t>(state.num_output_tokens());
    const auto coin = [&](int i) { return verify_uniform(state.seed(), base, kAcceptLane + static_cast<uint64_t>(i)); };
    if (method == VerifyMethod::kStandard) {
        for (int i = 0; i < k; ++i) {
            if (!(coin(i) < rows[i].p_draft)) return emit_device_rows(drafts, i, rows[i].residual, state);
        }
        return emit_device_rows(drafts, k, bonus, state);
    }
    double weight = 1.0;  // w_i = w_{i-1} p_{i-1}(d_{i-1}): min(1, .) never binds for a one-hot q
    int tau = 0;
    for (int i = 1; i <= k; ++i) {
        weight *= rows[i - 1].p_draft;
        double h = weight;
        if (i < k) {
            const double z = weight * (1.0 - rows[i].p_draft);
            const double denom = z + 1.0 - weight;
            h = denom > 0.0 ? z / denom : 1.0;
        }
        if (h > 0.0 && coin(i - 1) <= h) tau = i;
    }
    return emit_device_rows(drafts, tau, tau == k ? bonus : rows[tau].residual, state);
}

std::string_view verify_method_name(VerifyMethod method) {
    return method == VerifyMethod::kBlock ? "block" : "standard";
}

VerifyMethod parse_verify_method(std::string_view name) {
    if (name == "standard") return VerifyMethod::kStandard;
    if (name == "block") return VerifyMethod::kBlock;
    fail("unknown verification method '{}' (want standard or block)", name);
}

uint64_t draft_seed(uint64_t seed) {
    // A fixed odd salt, then SplitMix64's mixer: the draft stream shares no (seed, counter) input with the
    // request's own stream, so uniform_at(draft_seed(s), ...) is unrelated to uniform_at(s, ...).
    uint64_t z = seed ^ 0x5be0cd19137e2179ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

VerifyOutcome verify_drafts(std::span<const float> target_logits, const DraftProposal& draft,
                            const SamplingParams& params, SamplerState& state, VerifyMethod method) {
    const VerifyRows rows{target_logits, draft, state.vocab_size()};
    check_input(rows, state);
    if (is_greedy(params)) return verify_greedy(rows, params, state);
    return method == VerifyMethod::kBlock ? verify_block(rows, params, state) : verify_standard(rows, params, state);
}

VerifyOutcome verify_greedy_argmax(std::span<const int32_t> row_argmax, std::span<const int32_t> drafts,
                                   SamplerState& state) {
    DSV4_CHECK(row_argmax.size() == drafts.size() + 1, "verify: {} argmax rows for {} drafts", row_argmax.size(),
               drafts.size());
    check_draft_tokens(drafts, state.vocab_size());
    return walk_greedy(drafts, [&](size_t i) { return record_chosen(row_argmax[i], state); });
}

int32_t sample_draft_token(std::span<const float> logits, double temperature, double uniform, std::span<float> probs) {
    DSV4_CHECK(!logits.empty(), "draft: empty logits row");
    if (temperature < kGreedyTemperature) return static_cast<int32_t>(argmax_token(logits));
    DSV4_CHECK(probs.size() == logits.size(), "draft: {} probabilities for {} logits", probs.size(), logits.size());
    double best = -std::numeric_limits<double>::infinity();
    for (float x : logits) {
        DSV4_CHECK(!std::isnan(x) && x != std::numeric_limits<float>::infinity(), "draft: a logit is {}", x);
        best = std::max(best, static_cast<double>(x));
    }
    DSV4_CHECK(std::isfinite(best), "draft: every logit is -inf");
    double total = 0.0;
    std::vector<double> w(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) total += (w[i] = std::exp((logits[i] - best) / temperature));
    const double target = uniform * total;
    double cumulative = 0.0;
    int32_t token = -1;
    for (size_t i = 0; i < w.size(); ++i) {
        probs[i] = static_cast<float>(w[i] / total);
        cumulative += w[i];
        if (token < 0 && target < cumulative && w[i] > 0.0) token = static_cast<int32_t>(i);
    }
    return token >= 0 ? token : static_cast<int32_t>(argmax_token(logits));
}

double oracle_acceptance_rate(double length, int k) {
    DSV4_CHECK(k >= 1 && length >= 1.0 && length <= k + 1.0,
               "oracle acceptance length {} is outside [1, {}] for {} drafts", length, k + 1, k);
    auto expected = [k](double alpha) {
        double sum = 0.0, p = 1.0;
        for (int i = 0; i <= k; ++i, p *= alpha) sum += p;
        return sum;
    };
    double lo = 0.0, hi = 1.0;
    for (int it = 0; it < 100; ++it) {  // expected() increases with alpha: bisection
        const double mid = 0.5 * (lo + hi);
        (expected(mid) < length ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

int oracle_accepted_drafts(double alpha, int drafts, uint64_t seed, uint64_t position) {
    int n = 0;
    while (n < drafts && uniform_at(seed, position, kAcceptLane + static_cast<uint64_t>(n)) < alpha) ++n;
    return n;
}

}  // namespace dsv4
