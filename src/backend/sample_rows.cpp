#include "backend/sample_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/model_ops.h"
#include "backend/sample_rows_math.h"
#include "backend/tensor_reads.h"
#include "core/error.h"
#include "core/logprobs.h"

namespace dsv4 {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void check_draw(const RowDraw& d, size_t index, int64_t rows, int64_t vocab, const SampleRowsArgs& args) {
    DSV4_CHECK(d.row >= 0 && d.row < rows, "sample_rows: draw {} reads row {} of {}", index, d.row, rows);
    DSV4_CHECK(d.edit_begin >= 0 && d.edit_count >= 0 && d.edit_begin + d.edit_count <= std::ssize(args.edits),
               "sample_rows: draw {}'s edits [{}, +{}) are outside the {} given", index, d.edit_begin, d.edit_count,
               args.edits.size());
    const int64_t words = sample_mask_words(vocab);
    DSV4_CHECK(d.mask >= -1 && (d.mask + 1) * words <= std::ssize(args.masks),
               "sample_rows: draw {}'s mask {} is outside the {} words given", index, d.mask, args.masks.size());
    DSV4_CHECK(d.uniform >= 0.0 && d.uniform < 1.0, "sample_rows: draw {}'s uniform {} is outside [0, 1)", index,
               d.uniform);
    DSV4_CHECK(d.logprobs >= -1 && d.logprobs <= kMaxDrawLogprobs,
               "sample_rows: draw {} asks for {} logprobs; at most {} are reported", index, d.logprobs,
               kMaxDrawLogprobs);
    DSV4_CHECK(d.probe >= -1 && d.probe < vocab, "sample_rows: draw {} probes token {} outside [0, {})", index, d.probe,
               vocab);
    DSV4_CHECK(d.probe < 0 || !d.greedy, "sample_rows: draw {} probes a token but is greedy", index);
    if (d.greedy) return;
    DSV4_CHECK(d.temperature > 0.0 && std::isfinite(d.temperature), "sample_rows: draw {}'s temperature is {}", index,
               d.temperature);
    DSV4_CHECK(d.top_p > 0.0 && d.top_p <= 1.0, "sample_rows: draw {}'s top_p {} is outside (0, 1]", index, d.top_p);
    DSV4_CHECK(d.min_p >= 0.0 && d.min_p <= 1.0, "sample_rows: draw {}'s min_p {} is outside [0, 1]", index, d.min_p);
}

// Each token at most once in a draw's edits (the kernel edits tokens in parallel).
void check_edits(const RowDraw& d, size_t index, int64_t vocab, const SampleRowsArgs& args) {
    std::vector<int32_t> tokens;
    tokens.reserve(static_cast<size_t>(d.edit_count));
    for (const LogitEdit& e :
         args.edits.subspan(static_cast<size_t>(d.edit_begin), static_cast<size_t>(d.edit_count))) {
        DSV4_CHECK(e.token >= 0 && e.token < vocab, "sample_rows: draw {} edits token {} outside [0, {})", index,
                   e.token, vocab);
        tokens.push_back(e.token);
    }
    std::sort(tokens.begin(), tokens.end());
    const auto twice = std::adjacent_find(tokens.begin(), tokens.end());
    DSV4_CHECK(twice == tokens.end(), "sample_rows: draw {} edits token {} twice", index,
               twice == tokens.end() ? 0 : *twice);
}

// An optional per-draw output of `words` i32 words a draw (logprobs, probes): given when some draw needs it, and
// of the right size when given.
void check_draw_words(const Tensor* output, bool needed, size_t draws, int64_t words, const char* what) {
    DSV4_CHECK(!needed || output != nullptr, "sample_rows: draws need {} but no output was given for them", what);
    if (output == nullptr) return;
    DSV4_CHECK(output->dtype == DType::kI32 && output->numel() == static_cast<int64_t>(draws) * words,
               "sample_rows: the {} output holds {} words, not {} draws of {}", what, output->numel(), draws, words);
}

// The processed row: the mask's banned tokens at -inf, then the edits.
std::vector<float> processed_row(std::span<const float> row, const RowDraw& draw, std::span<const LogitEdit> edits,
                                 std::span<const uint64_t> mask) {
    std::vector<float> x(row.begin(), row.end());
    if (!mask.empty()) {
        for (size_t i = 0; i < x.size(); ++i) {
            if (((mask[i / 64] >> (i % 64)) & 1) == 0) x[i] = kNegInf;
        }
    }
    for (const LogitEdit& e :
         edits.subspan(static_cast<size_t>(draw.edit_begin), static_cast<size_t>(draw.edit_count))) {
        x[static_cast<size_t>(e.token)] = apply_logit_edit(x[static_cast<size_t>(e.token)], e);
    }
    return x;
}

// The k-th largest logit when top_k removes anything, else -inf.
float top_k_floor(const std::vector<float>& x, int32_t top_k) {
    if (top_k <= 0 || static_cast<size_t>(top_k) >= x.size()) return kNegInf;
    std::vector<float> sorted = x;
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<float>());
    return sorted[static_cast<size_t>(top_k - 1)];
}

struct Candidate {
    float logit;
    uint64_t mass;
    int32_t id;
};

// The largest logit c such that the candidates with logit >= c hold at least top_p of the mass; -inf keeps them all.
float top_p_cutoff(std::vector<Candidate> candidates, double top_p) {
    if (top_p >= 1.0 || candidates.size() <= 1) return kNegInf;
    uint64_t total = 0;
    for (const Candidate& c : candidates) total += c.mass;
    const double target = top_p * static_cast<double>(total);
    std::sort(candidates.begin(), candidates.end(),
              [](const Candidate& a, const Candidate& b) { return a.logit > b.logit; });
    uint64_t mass = 0;
    for (const Candidate& c : candidates) {
        mass += c.mass;
        if (static_cast<double>(mass) >= target) return c.logit;
    }
    return kNegInf;  // rounding: top_p needs every candidate
}

int32_t greedy_choice(const std::vector<float>& x) {
    const auto best = std::max_element(x.begin(), x.end());  // the first of equal maxima: the lowest id
    return *best == kNegInf ? kNoSample : static_cast<int32_t>(best - x.begin());
}

// The raw logprobs of the drawn token (core/logprobs.h) as a DrawLogprobs.
DrawLogprobs draw_logprobs(std::span<const float> row, int32_t token, int32_t count) {
    const SampledLogprobs raw = compute_raw_logprobs(row, token, count);
    DrawLogprobs out;
    out.logprob = raw.logprob;
    out.rank = static_cast<int32_t>(raw.rank);
    out.count = static_cast<int32_t>(raw.top.size());
    for (size_t i = 0; i < raw.top.size(); ++i) {
        out.top_tokens[i] = static_cast<int32_t>(raw.top[i].token);
        out.top_logprobs[i] = raw.top[i].logprob;
    }
    return out;
}

// The draw itself (sample_row_reference without the logprobs); a probing draw's masses in *probe.
int32_t choose_token(std::span<const float> row, const RowDraw& draw, std::span<const LogitEdit> edits,
                     std::span<const uint64_t> mask, ProbeMasses& probe) {
    for (float v : row) {
        if (!(v < std::numeric_limits<float>::infinity())) return kNoSample;  // NaN or +inf: a model fault
    }
    const std::vector<float> x = processed_row(row, draw, edits, mask);
    const int32_t best_id = greedy_choice(x);
    if (draw.greedy || best_id == kNoSample) return best_id;
    SampleShape shape;
    shape.best = x[static_cast<size_t>(best_id)];
    shape.floor = top_k_floor(x, draw.top_k);
    shape.inv_temperature = 1.0 / draw.temperature;
    shape.min_p = draw.min_p;
    std::vector<Candidate> candidates;  // in id order
    for (size_t i = 0; i < x.size(); ++i) {
        if (const uint64_t m = candidate_mass(x[i], shape); m != 0)
            candidates.push_back({x[i], m, static_cast<int32_t>(i)});
    }
    const float cutoff = top_p_cutoff(candidates, draw.top_p);
    uint64_t kept = 0;
    for (const Candidate& c : candidates) {
        if (c.logit < cutoff) continue;
        kept += c.mass;
        if (c.id == draw.probe) probe.probe = c.mass;
    }
    probe.kept = kept;
    if (draw.probe >= 0 && probe.probe == kept) return draw.probe;  // nothing left beside the probe
    const uint64_t target = draw_target(draw.uniform, kept - probe.probe);
    uint64_t mass = 0;
    for (const Candidate& c : candidates) {
        if (c.logit < cutoff || c.id == draw.probe) continue;
        mass += c.mass;
        if (mass > target) return c.id;
    }
    fail("sample_rows: the draw found no token (kept mass {}, target {})", kept, target);  // unreachable: kept > 0
}

}  // namespace

int64_t check_sample_rows(const Tensor& logits, const SampleRowsArgs& args, const Tensor& out, const Tensor* logprobs,
                          const Tensor* probes) {
    DSV4_CHECK(logits.dtype == DType::kF32 && logits.rank == 2 && logits.size(0) > 0 && logits.size(1) > 0,
               "sample_rows: logits must be [rows, vocab] f32 with rows, vocab >= 1");
    DSV4_CHECK(out.dtype == DType::kI32 && out.numel() == std::ssize(args.draws),
               "sample_rows: out [{}] i32 does not hold one id for each of the {} draws", out.numel(),
               args.draws.size());
    const int64_t vocab = logits.size(1);
    DSV4_CHECK(vocab <= kMaxSampleVocab, "sample_rows: a vocabulary of {} exceeds the {} it takes", vocab,
               kMaxSampleVocab);
    for (size_t i = 0; i < args.draws.size(); ++i) {
        check_draw(args.draws[i], i, logits.size(0), vocab, args);
        check_edits(args.draws[i], i, vocab, args);
    }
    check_draw_words(logprobs, wants_logprobs(args), args.draws.size(), kDrawLogprobsWords, "logprobs");
    check_draw_words(probes, wants_probes(args), args.draws.size(), kProbeMassWords, "probes");
    return vocab;
}

int32_t sample_row_reference(std::span<const float> row, const RowDraw& draw, std::span<const LogitEdit> edits,
                             std::span<const uint64_t> mask, DrawLogprobs* logprobs, ProbeMasses* probe) {
    ProbeMasses masses;
    const int32_t token = choose_token(row, draw, edits, mask, masses);
    if (logprobs != nullptr && draw.logprobs >= 0 && token != kNoSample)
        *logprobs = draw_logprobs(row, token, draw.logprobs);
    if (probe != nullptr && draw.probe >= 0 && token != kNoSample) *probe = masses;
    return token;
}

void ModelOps::sample_rows(const Tensor& logits, const SampleRowsArgs& args, Tensor out, const Tensor* logprobs,
                           const Tensor* probes) {
    const int64_t vocab = check_sample_rows(logits, args, out, logprobs, probes);
    if (args.draws.empty()) return;
    const std::vector<float> host = read_f32(*this, logits);
    const auto words = static_cast<size_t>(sample_mask_words(vocab));
    std::vector<int32_t> ids;
    std::vector<DrawLogprobs> reported(logprobs != nullptr ? args.draws.size() : 0);
    std::vector<ProbeMasses> probed(probes != nullptr ? args.draws.size() : 0);
    ids.reserve(args.draws.size());
    for (size_t i = 0; i < args.draws.size(); ++i) {
        const RowDraw& d = args.draws[i];
        const auto row =
            std::span<const float>(host).subspan(static_cast<size_t>(d.row * vocab), static_cast<size_t>(vocab));
        const auto mask = d.mask < 0 ? std::span<const uint64_t>() : args.masks.subspan(d.mask * words, words);
        ids.push_back(sample_row_reference(row, d, args.edits, mask, reported.empty() ? nullptr : &reported[i],
                                           probed.empty() ? nullptr : &probed[i]));
    }
    from_host(out, ids.data());
    if (logprobs != nullptr) from_host(*logprobs, reported.data());
    if (probes != nullptr) from_host(*probes, probed.data());
}

}  // namespace dsv4
