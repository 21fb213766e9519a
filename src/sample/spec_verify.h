// Speculative verification: given the target's logits for the k + 1 positions of a verify step (the last accepted
// token followed by k drafts) and what the drafter proposed, decide which drafts to keep and the one token that
// follows them, so that the emitted tokens are distributed exactly as if the target had sampled them one by one.
//
// The target distribution p_i of row i is the normal sampler's (sampler.h): logits processors (min_tokens, logit
// bias, penalties) over the history including drafts 0 .. i-1, then temperature, min_p, top_k, top_p.
//   greedy requests: accept while the draft equals the processed argmax; the first mismatch (or, when every draft
//     matched, row k) gives the target's own argmax. Bit for bit what non-speculative greedy decoding emits.
//   kStandard: rejection sampling (Leviathan et al.): accept draft i with probability min(1, p_i(d_i) / q_i(d_i));
//     at the first rejection draw from max(0, p_i - q_i) normalised; when all pass, draw the bonus token from p_k.
//   kBlock: block verification (Sun et al., ICLR 2025, Algorithm 2): the accepted length is the largest i whose
//     coin passes h_i, a rule that looks at the whole block (never fewer tokens on average, same distribution).
//
// Random numbers: a verify step whose first output position is b reads uniform_at(state.seed(), b, lane) on lanes
// kAcceptLane + i (coin of draft i) and kResidualLane (the correction draw); the bonus token is a normal sample()
// (lane 0 at its own position). b grows with every step, so no number is read twice, even by block verification,
// which looks at every coin of its block. Drafters draw from draft_uniform(): another stream, keyed the same way.
// Sharing one stream between drafter and verifier biases the output (tested).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "dsv4/sampling_params.h"
#include "sample/sampler.h"
#include "sample/sampler_state.h"

namespace dsv4 {

enum class VerifyMethod : uint8_t { kStandard, kBlock };

std::string_view verify_method_name(VerifyMethod method);
// "standard" | "block" (vLLM's rejection_sample_method spellings); anything else is a dsv4::Error.
VerifyMethod parse_verify_method(std::string_view name);

inline constexpr int kMaxVerifyDrafts = 32;
inline constexpr uint64_t kAcceptLane = 1;  // .. kAcceptLane + kMaxVerifyDrafts - 1
inline constexpr uint64_t kResidualLane = kAcceptLane + kMaxVerifyDrafts;

// The seed of a request's draft stream: unrelated to every (seed, position, lane) the sampler and verifier read.
uint64_t draft_seed(uint64_t seed);
// The drafter's uniform number for draft i of the step whose first output position is `base`.
inline double draft_uniform(uint64_t seed, uint64_t base, int i) {
    return uniform_at(draft_seed(seed), base, static_cast<uint64_t>(i));
}

// What a drafter proposed for one sequence.
struct DraftProposal {
    std::vector<int32_t> tokens;  // k drafts
    // The distributions the drafts were drawn from, [k * vocab] row-major; empty when each draft was the drafter's
    // argmax (q_i is then one-hot at the draft: still lossless, the target probability is the acceptance chance).
    std::vector<float> probs;
};

struct VerifyOutcome {
    std::vector<SampleResult> tokens;  // the accepted drafts, then the correction or bonus token
    int accepted = 0;                  // drafts kept (tokens.size() - 1)
};

// target_logits: [(k + 1) * vocab] raw logits of the verify rows. Records the emitted tokens in `state` (like
// sample()). Throws dsv4::Error on malformed input (lengths, draft ids outside the vocabulary, non-finite logits).
VerifyOutcome verify_drafts(std::span<const float> target_logits, const DraftProposal& draft,
                            const SamplingParams& params, SamplerState& state, VerifyMethod method);

// What a device computed for one draft row of a verify step (ModelOps::sample_rows with RowDraw::probe at the draft,
// one-hot drafts only): the draft's probability under the row's processed target distribution, p_i(d_i) (its
// probe mass over the kept mass), and a draw from that distribution without the draft, made with the residual lane's
// uniform (uniform_at(seed, base, kResidualLane)) and the edits of the history up to the row.
struct DeviceDraftRow {
    double p_draft = 0.0;
    int32_t residual = 0;
};

// verify_drafts for one-hot drafts (an empty DraftProposal::probs) from the device's rows: rows[i] for draft i and
// `bonus`, row k's normal draw at output position base + k. The decisions are verify_drafts' on p_i(d_i) alone: for a
// one-hot q the standard rule accepts draft i when its coin is below p_i(d_i) and corrects from p_i without d_i;
// block verification's Z_i = w_i (1 - p_i(d_i)) and its residual is the same draw. Records the emitted tokens in
// `state`; the same random numbers as verify_drafts, so the same tokens but where a device's fixed-point masses and
// the host's doubles round across a boundary. Not for greedy requests (verify_greedy_argmax).
VerifyOutcome verify_device_rows(std::span<const DeviceDraftRow> rows, int32_t bonus, std::span<const int32_t> drafts,
                                 SamplerState& state, VerifyMethod method);

// verify_drafts for a samples_raw_argmax request (sampler.h) from the argmax of each of its k + 1 verify rows, chosen
// where the logits are: the same tokens, accepted count and records as verify_drafts on the rows themselves.
VerifyOutcome verify_greedy_argmax(std::span<const int32_t> row_argmax, std::span<const int32_t> drafts,
                                   SamplerState& state);

// Oracle acceptance (a benchmark mode for drafters that accept nothing, e.g. random weights; SpeculativeConfig's
// oracle_acceptance_length): each draft is accepted with probability alpha while the drafts before it were, whatever
// the logits say, so a verify step emits 1 + alpha + ... + alpha^k tokens on average.
// The alpha whose expected tokens per verify step with k drafts is `length` (in [1, k + 1]).
double oracle_acceptance_rate(double length, int k);
// How many of `drafts` drafts the oracle accepts for the step at output position `position` (the verifier's accept
// lanes of uniform_at, so a seeded request repeats its steps).
int oracle_accepted_drafts(double alpha, int drafts, uint64_t seed, uint64_t position);

// A drafter's token from its logits row: the argmax when `temperature` is greedy (q one-hot: probs left empty),
// else a draw from softmax(logits / temperature) with `uniform`, whose probabilities are written to `probs`
// (length vocab) for the verifier.
int32_t sample_draft_token(std::span<const float> logits, double temperature, double uniform, std::span<float> probs);

}  // namespace dsv4
