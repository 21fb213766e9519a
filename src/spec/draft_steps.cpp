#include "spec/draft_steps.h"

#include "backend/tensor_reads.h"
#include "core/error.h"
#include "sample/sampling_params.h"

namespace dsv4 {

std::vector<int32_t> covering_table(std::span<const int32_t> table, int64_t end, int block_tokens) {
    DSV4_CHECK(!table.empty(), "draft step: the sequence has no state block");
    std::vector<int32_t> out(table.begin(), table.end());
    while (static_cast<int64_t>(out.size()) * block_tokens < end) out.push_back(out.back());
    return out;
}

void add_draft_sequence(StepBatch& batch, const DraftInput& in, int64_t start, std::span<const int32_t> tokens,
                        int block_tokens) {
    const int64_t end = start + static_cast<int64_t>(tokens.size());
    batch.add_sequence(in.slot, start, tokens, covering_table(in.block_table, end, block_tokens));
}

bool drafts_greedily(const DraftInput& in, bool probabilistic) {
    return !probabilistic || in.temperature < kGreedyTemperature;
}

std::vector<int32_t> read_draft_ids(ModelOps& ops, const Tensor& ids) {
    std::vector<int32_t> picks = read_i32(ops, ids);
    for (size_t r = 0; r < picks.size(); ++r) {
        DSV4_CHECK(picks[r] != kNoArgmax, "draft: logits row {} holds NaN or +inf, or only -inf", r);
    }
    return picks;
}

void draw_draft(std::span<const float> logits, const DraftInput& in, bool probabilistic, int j, DraftProposal& out) {
    const double uniform = draft_uniform(in.seed, in.base, j);
    if (drafts_greedily(in, probabilistic)) {
        out.tokens.push_back(sample_draft_token(logits, 0.0, uniform, {}));
        return;
    }
    const double temperature = in.temperature;
    const size_t vocab = logits.size();
    out.probs.resize(out.probs.size() + vocab);
    std::span<float> q(out.probs.data() + out.probs.size() - vocab, vocab);
    out.tokens.push_back(sample_draft_token(logits, temperature, uniform, q));
}

}  // namespace dsv4
