// Drafters for speculative decoding (model-spec 3): MTP (original V4-Flash, mtp_drafter.h) and DSpark (-0731,
// dspark_drafter.h), written against the backend's ModelOps like the forward pass, so every backend runs them.
//
// A drafter follows the target step by step. After each target step (a prefill chunk, a decode step or a k + 1-token
// verify step) and its verification, step() is called with the target's hidden states and, per scheduled sequence, the
// rows that are final (accepted). It then
//   1. absorbs them into its own state: MTP runs its block over the rows (H_t, x_{t+1}) of those positions, DSpark
//      stores each stage's context row c_T, both in the draft stages' rings of the sequence's slot (state layers
//      num_layers .. num_layers + stages - 1: config_with_draft_state), which are reset, forked, snapshotted and
//      rewound with the target's; rows of rejected positions are never absorbed;
//   2. proposes the next step's drafts for the sequences that ask: MTP recursively (k block steps of one row), DSpark
//      with one block [y, N, ..., N] and its sequential Markov head.
// Its own steps are ModelOps substeps (begin_substep): they read the target step's hidden states in place.
// Drafts are drawn from the request's draft stream (sample/spec_verify.h: draft_uniform), independent of the
// verifier's; a greedy request (or draft_sample_method = greedy) drafts by argmax.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "model/deepseek_v4.h"
#include "model/draft_weights.h"
#include "sample/spec_verify.h"

namespace dsv4 {

struct DraftOptions {
    int num_speculative_tokens = 1;  // k: drafts per step (DSpark: also the draft block's rows)
    bool probabilistic = true;       // draft_sample_method: sample from softmax(logits / T) (false: argmax)
    // DSpark confidence scheduling: a sequence's drafts stop at the first j whose survival prod_{i <= j}
    // sigmoid(kappa_i) falls below this (0: always k drafts).
    double confidence_threshold = 0.0;
    bool enforce_eager = false;  // never record the drafter's substeps in graphs (--enforce-eager)
};

// One scheduled sequence's part of the target step, after verification.
struct DraftInput {
    int32_t slot = 0;
    std::span<const int32_t> block_table;
    int32_t row_begin = 0;  // its first row in the target step (hidden state rows)
    int64_t start = 0;      // position of that row
    // Rows [row_begin, row_begin + next_tokens.size()) are final; next_tokens[i] is the token at position
    // start + i + 1 (the prompt's next token, an accepted draft, or the token sampled after the last final row).
    std::vector<int32_t> next_tokens;
    bool propose = false;  // draft for the next step (the last next_token was sampled and the request goes on)
    uint64_t seed = 0;     // the request's sampling seed (its draft stream: draft_uniform)
    uint64_t base = 0;     // output position of the next step's first token (the draft stream's key)
    double temperature = 0.0;
};

struct DraftOutput {
    DraftProposal proposal;         // empty unless DraftInput::propose
    std::vector<float> confidence;  // DSpark: sigmoid(kappa) of each draft; MTP: empty
    int64_t written_end = 0;        // positions below this are the only ones this step wrote into the draft rings
};

class Drafter {
  public:
    virtual ~Drafter() = default;
    virtual std::string_view method() const = 0;  // "mtp" | "dspark"
    // Target layers whose output streams step() needs (ForwardRequest::hidden_layers, in this order).
    virtual const std::vector<int>& hidden_layers() const = 0;
    // Draft-stage rings the drafter keeps per slot (config_with_draft_state(config, state_stages())).
    virtual int state_stages() const = 0;
    const DraftOptions& options() const { return options_; }

    // target: the step's results (hidden_layers() among them), valid until the next begin_step. One output per input.
    virtual std::vector<DraftOutput> step(const ForwardResult& target, std::span<const DraftInput> seqs) = 0;

  protected:
    explicit Drafter(DraftOptions options) : options_(options) {}
    DraftOptions options_;
};

// "mtp" needs the original V4's MTP stage (mtp.0.e_proj ...), "dspark" the -0731 DSpark stages; anything else, or a
// model without those weights, is a dsv4::Error that says what the checkpoint has.
std::unique_ptr<Drafter> make_drafter(std::string_view method, DeepseekV4& model, DraftWeights weights,
                                      const DraftOptions& options);

// Draft-stage rings `method` keeps per slot, known before the model is loaded (the state plan, the weight loader's
// DraftLoad): MTP runs its one stage recursively, DSpark has its stages. A method the model's config has no stages
// for, or an unknown one, is a dsv4::Error that says what the config has.
int draft_state_stages(std::string_view method, const ModelConfig& model);

}  // namespace dsv4
