// Sampling where the logits are (ModelOps::sample_rows): each draw takes one logits row, applies its request's logits
// processors as sparse edits (and its structured-output mask), then temperature, min_p, top_k and top_p, and draws
// one token with the uniform number the host sampler would use. Only the ids come back to the host.
//
// The algorithm is the host sampler's (src/sample/sampler.h) with one change that makes it deterministic on any
// device: the probability mass of a candidate is a fixed-point integer, round(exp((x - max) / T) * 2^46), so every sum
// is exact and independent of the order of additions. The top_p cutoff is the largest logit c such that the
// candidates with logit >= c hold at least top_p of the mass; the draw walks the kept candidates in id order to
// floor(u * kept mass). Tokens differ from the host sampler's only where u falls within ~2^-46 of a boundary, or
// where distinct logits round to the same mass at the top_p boundary.
// sample_row_reference below is the definition; every backend's kernel is tested against it. Plain data and
// std::span only: the CUDA kernels include this header.
#pragma once

#include <cstdint>
#include <span>

namespace dsv4 {

// One token's processed logit, merged from every processor that touches it (order as the host's
// apply_logits_processors: mask, then bias, then the penalties). Each token appears at most once in a draw's edits.
struct LogitEdit {
    int32_t token = 0;
    bool masked = false;     // -> -inf (structured output handled by the mask words, min_tokens here)
    bool has_bias = false;   // x = to_logit(x + bias)
    bool penalized = false;  // x = to_logit(penalties(x)); only for tokens in the penalty history
    bool repeat = false;     // penalties: x > 0 ? x / repetition : x * repetition
    float bias = 0.0f;
    double repetition = 1.0;
    double frequency = 0.0;  // penalties: subtracted (frequency_penalty * output count), then presence
    double presence = 0.0;
};

// One draw: which row, how to shape its distribution, and its edits and mask.
struct RowDraw {
    int64_t row = 0;
    bool greedy = false;  // argmax of the processed row (ties: the lowest id); the rest below is ignored
    double temperature = 1.0;
    int32_t top_k = 0;  // <= 0 or >= the row width: off
    double top_p = 1.0;
    double min_p = 0.0;
    double uniform = 0.0;  // in [0, 1)
    int64_t edit_begin = 0, edit_count = 0;
    int64_t mask = -1;  // index of its mask in SampleRowsArgs::masks (mask_words words each; bit t: token t allowed)
    int32_t logprobs =
        -1;  // raw logprobs to report with the token: that many top tokens (<= kMaxDrawLogprobs); -1: none
    // A speculative verify row's draft (spec_verify.h, a one-hot draft): the draw leaves it out of the candidates (the
    // residual max(p - q, 0) of a one-hot q is p without the draft) and reports its kept mass (ProbeMasses), whose
    // share of the row's kept mass is p(draft). When the draft holds all the kept mass the draw returns the draft
    // (a rejection then had probability 0). -1: none. Not with greedy.
    int32_t probe = -1;
};

// A probing draw's masses (RowDraw::probe): the probe's kept mass and the row's whole kept mass, probe included, in
// the fixed-point units of kSampleMassBits (exact integers: p(probe) = probe / kept).
struct ProbeMasses {
    uint64_t probe = 0;
    uint64_t kept = 0;
};
// ProbeMasses in 32-bit words (sample_rows' probes output is an i32 tensor [draws, kProbeMassWords]).
inline constexpr int64_t kProbeMassWords = sizeof(ProbeMasses) / 4;
static_assert(sizeof(ProbeMasses) % 4 == 0);

// The raw logprobs of a draw that asks for them (core/logprobs.h's compute_raw_logprobs of the raw row at the drawn
// token: its logprob and rank, and the `count` most likely tokens, most likely first, ties: the lower id first).
inline constexpr int kMaxDrawLogprobs = 20;
struct DrawLogprobs {
    float logprob = 0.0f;
    int32_t rank = 0;
    int32_t count = 0;
    int32_t top_tokens[kMaxDrawLogprobs] = {};
    float top_logprobs[kMaxDrawLogprobs] = {};
};
// DrawLogprobs in 32-bit words (sample_rows' logprobs output is an i32 tensor [draws, kDrawLogprobsWords]).
inline constexpr int64_t kDrawLogprobsWords = sizeof(DrawLogprobs) / 4;
static_assert(sizeof(DrawLogprobs) % 4 == 0);

struct SampleRowsArgs {
    std::span<const RowDraw> draws;
    std::span<const LogitEdit> edits;
    std::span<const uint64_t> masks;
};

// Some draw asks for logprobs: sample_rows then needs its logprobs output.
inline bool wants_logprobs(const SampleRowsArgs& args) {
    for (const RowDraw& d : args.draws) {
        if (d.logprobs >= 0) return true;
    }
    return false;
}

// Some draw probes a token: sample_rows then needs its probes output.
inline bool wants_probes(const SampleRowsArgs& args) {
    for (const RowDraw& d : args.draws) {
        if (d.probe >= 0) return true;
    }
    return false;
}

// A draw's answer when the row has no choice: the raw row holds NaN or +inf, or every processed logit is -inf (the
// caller reads the row and lets the host sampler report why).
inline constexpr int32_t kNoSample = -1;
// Fixed-point mass: 46 fraction bits keep the sum of a 2^17-entry vocabulary below 2^63 (the largest vocabulary
// sample_rows takes).
inline constexpr int kSampleMassBits = 46;
inline constexpr int64_t kMaxSampleVocab = int64_t{1} << 17;

// Words of one mask for `vocab` tokens.
constexpr int64_t sample_mask_words(int64_t vocab) {
    return (vocab + 63) / 64;
}

// The definition: one draw from `row` (the raw logits row); with draw.logprobs >= 0 and a token drawn, its raw
// logprobs in *logprobs (when given); with draw.probe >= 0 and a token drawn, the probe's masses in *probe (when
// given).
int32_t sample_row_reference(std::span<const float> row, const RowDraw& draw, std::span<const LogitEdit> edits,
                             std::span<const uint64_t> mask, DrawLogprobs* logprobs = nullptr,
                             ProbeMasses* probe = nullptr);

}  // namespace dsv4
