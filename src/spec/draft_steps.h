// Helpers shared by the drafters: their substeps' batches and the draw of one draft from a logits row.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "spec/drafter.h"

namespace dsv4 {

// The sequence's block table, extended with copies of its last block until it covers [0, end): draft stages are
// sliding-window layers and never read paged blocks, but a step must cover the positions it feeds, and draft rows
// may run past what the target has allocated.
std::vector<int32_t> covering_table(std::span<const int32_t> table, int64_t end, int block_tokens);

// Appends a sequence's substep of `tokens` at positions start.. to `batch`.
void add_draft_sequence(StepBatch& batch, const DraftInput& in, int64_t start, std::span<const int32_t> tokens,
                        int block_tokens);

// Draws draft j of `in` from its logits row into `out` (argmax when the request is greedy or drafts are not
// probabilistic; else a draw from softmax(logits / T) with the request's draft stream, q appended to out.probs).
void draw_draft(std::span<const float> logits, const DraftInput& in, bool probabilistic, int j, DraftProposal& out);

// Whether draw_draft takes the argmax for `in` (then the logits need not come to the host: read_draft_ids).
bool drafts_greedily(const DraftInput& in, bool probabilistic);
// The rows' argmax ids that ModelOps::argmax_rows wrote into `ids` [rows] i32, where the logits are: only the ids
// come to the host, not [rows, vocab] floats (33 MB a step at batch 64). Throws dsv4::Error when a row had no choice
// (NaN, +inf, only -inf): a drafter fault, which costs the step's proposals (ModelRunner), never a request.
std::vector<int32_t> read_draft_ids(ModelOps& ops, const Tensor& ids);

}  // namespace dsv4
