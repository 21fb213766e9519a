// Per-request sampling state: the request's random stream and the token history that penalties and min_tokens
// need. One SamplerState per completion (n > 1 makes n of them). Not thread-safe; the engine owns it with the
// request. There is no global random generator anywhere in the sampler.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "dsv4/sampling_params.h"
#include "dsv4/token_constraint.h"

namespace dsv4 {

// Counter-based uniform random numbers in [0, 1): the value depends only on (seed, position, lane). The sampler
// uses position = number of output tokens so far and lane 0, so a seeded request yields the same tokens whatever
// shares its batch, after preemption and recompute, and on any thread. Other lanes are free for other consumers
// (e.g. speculative verification) that need more than one number per position.
double uniform_at(uint64_t seed, uint64_t position, uint64_t lane = 0);

// A fresh seed for a request without one. Thread-safe; seeded once from std::random_device.
uint64_t draw_random_seed();

// What the history records about one token id.
struct TokenHistory {
    int32_t output_count = 0;  // occurrences in the output so far
    bool in_prompt = false;    // recorded only when the repetition penalty is on
};

class SamplerState {
  public:
    // prompt_tokens feed the repetition penalty (kept only when it is on); eos_token_ids are the model's end
    // tokens, masked together with params.stop_token_ids while fewer than min_tokens tokens exist. The seed is
    // params.seed + completion_index when a seed is given (vLLM's rule for n > 1), else draw_random_seed().
    // Throws dsv4::Error for token ids outside [0, vocab_size).
    SamplerState(const SamplingParams& params, std::span<const int64_t> prompt_tokens,
                 std::span<const int64_t> eos_token_ids, int64_t vocab_size, int completion_index = 0);

    uint64_t seed() const { return seed_; }
    int64_t vocab_size() const { return vocab_size_; }
    int64_t num_output_tokens() const { return num_output_tokens_; }

    // Appends a generated token (sample() does this itself; call it for tokens decided elsewhere). With a
    // constraint, a token it does not allow throws dsv4::Error.
    void record_output(int64_t token);

    // Structured output (params.constraint): this completion's state and the mask of its next token.
    bool has_constraint() const { return constraint_ != nullptr; }
    // Computes the next token's mask now, if not done yet (the model runner calls it while the forward pass runs;
    // sample() calls it otherwise). The mask stays valid until the next record_output().
    void prepare_constraint_mask();
    // Bit t of word t / 64: token t may come next. Valid after prepare_constraint_mask().
    std::span<const uint64_t> constraint_mask() const { return mask_; }
    // The constraint is complete: only an end token may follow (min_tokens cannot hold the end back then).
    bool constraint_requires_end() const { return constraint_ != nullptr && mask_ready_ && !mask_summary_.any_token; }

    // Undoes the record_output of `tokens`, the last outputs recorded, in order (a probe along speculative drafts:
    // the history, the output count and the constraint return to where they were before them).
    void unrecord_outputs(std::span<const int64_t> tokens);

    // Tokens seen in the output (and in the prompt when tracked), for the penalties.
    const std::unordered_map<int64_t, TokenHistory>& history() const { return history_; }
    bool tracks_prompt() const { return tracks_prompt_; }

    // EOS ids and stop_token_ids, deduplicated: masked to -inf while num_output_tokens() < min_tokens.
    const std::vector<int64_t>& min_tokens_masked_ids() const { return masked_ids_; }

  private:
    void check_token(int64_t token, const char* what) const;

    uint64_t seed_ = 0;
    int64_t vocab_size_ = 0;
    int64_t num_output_tokens_ = 0;
    bool tracks_prompt_ = false;
    std::unordered_map<int64_t, TokenHistory> history_;
    std::vector<int64_t> masked_ids_;
    std::unique_ptr<TokenConstraintState> constraint_;
    std::vector<uint64_t> mask_;
    bool mask_ready_ = false;
    TokenMaskSummary mask_summary_;
};

}  // namespace dsv4
