// MTP drafter (original V4-Flash, model-spec 3.1; the trained function is tools/train/drafters.py MtpHead).
//
// Row t pairs the target's 4-stream state after its last layer at position t with the embedding of token t + 1:
//   Z_j = h_proj(RMS(H_t,j; hnorm)) + e_proj(RMS(E[x_t+1]; enorm))   (the same e added to every stream j),
//   Z <- Block(Z)   (sliding window, causal over earlier MTP rows, RoPE at position t, its own ring),
//   logits = head(RMS(hc_head(Z); norm))   -> a draft for position t + 2.
// After a target step the final rows of every sequence are absorbed (one substep over all of them, which writes the
// ring); the last row's logits give draft 1. Draft j > 1 recurses: a one-row substep at position t + j - 1 whose H
// is the previous row's block output and whose token is draft j - 1 (its ring row is overwritten when the real
// row of that position is absorbed). Only stage 0 is used, recursively, as in vLLM and drafters.py.
#include <algorithm>
#include <vector>

#include "backend/tensor_reads.h"
#include "core/error.h"
#include "spec/draft_steps.h"
#include "spec/drafter.h"

namespace dsv4 {
namespace {

class MtpDrafter final : public Drafter {
  public:
    MtpDrafter(DeepseekV4& model, DraftWeights weights, const DraftOptions& options)
        : Drafter(options), model_(model), weights_(std::move(weights)) {
        const ModelConfig& c = model_.config();
        hidden_ = {c.num_layers - 1};
        state_layer_ = c.num_layers;
    }

    std::string_view method() const override { return "mtp"; }
    const std::vector<int>& hidden_layers() const override { return hidden_; }
    int state_stages() const override { return 1; }

    std::vector<DraftOutput> step(const ForwardResult& target, std::span<const DraftInput> seqs) override;

  private:
    const MtpStageWeights& stage() const { return weights_.mtp[0]; }
    // The block's input streams for the substep's tokens (E of the step tokens) and states h [N, hc, D].
    Tensor block_input(const Tensor& h);
    // Logits [rows, vocab] of the given rows of the block output.
    Tensor logits(const Tensor& z, std::span<const int32_t> rows);
    int block_tokens() { return model_.backend().state_config().block_tokens; }

    DeepseekV4& model_;
    DraftWeights weights_;
    std::vector<int> hidden_;
    int state_layer_ = 0;
};

Tensor MtpDrafter::block_input(const Tensor& h) {
    Backend& b = model_.backend();
    const ModelConfig& c = model_.config();
    const int64_t n = h.size(0), hc = c.hc_mult, d = c.hidden_size;
    const auto eps = static_cast<float>(c.rms_norm_eps);
    const MtpStageWeights& w = stage();
    Tensor hn = b.alloc(DType::kF32, {n * hc, d});
    b.rms_norm(h.view({n * hc, d}), &w.hnorm, eps, hn);
    Tensor z = b.alloc(DType::kF32, {n, hc, d});
    b.linear(hn, w.h_proj, LinearKind::kQuantized, z.view({n * hc, d}));
    Tensor emb = b.alloc(DType::kF32, {n, 1, d});
    b.embed(model_.weights().embed, emb);
    b.rms_norm(emb.view({n, d}), &w.enorm, eps, emb.view({n, d}));
    Tensor e = b.alloc(DType::kF32, {n, d});
    b.linear(emb.view({n, d}), w.e_proj, LinearKind::kQuantized, e);
    // Z_j += e for every stream: hc_post with post = 1 and comb = identity (X'_k = y + X_k).
    std::vector<float> ones(static_cast<size_t>(n * hc), 1.0f), eye(static_cast<size_t>(n * hc * hc), 0.0f);
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t k = 0; k < hc; ++k) eye[static_cast<size_t>((t * hc + k) * hc + k)] = 1.0f;
    }
    Tensor post = b.alloc(DType::kF32, {n, hc}), comb = b.alloc(DType::kF32, {n, hc, hc});
    b.from_host(post, ones.data());
    b.from_host(comb, eye.data());
    b.hc_post(z, e, post, comb);
    return z;
}

Tensor MtpDrafter::logits(const Tensor& z, std::span<const int32_t> rows) {
    Backend& b = model_.backend();
    const ModelConfig& c = model_.config();
    const auto m = static_cast<int64_t>(rows.size());
    const int64_t hc = c.hc_mult, d = c.hidden_size;
    Tensor picked = b.alloc(DType::kF32, {m, hc, d});
    b.gather_rows(z, rows, picked);
    Tensor y = b.alloc(DType::kF32, {m, d});
    b.hc_head(picked, stage().hc_head, static_cast<float>(c.hc_eps), static_cast<float>(c.rms_norm_eps), y);
    b.rms_norm(y, &stage().norm, static_cast<float>(c.rms_norm_eps), y);
    Tensor out = b.alloc(DType::kF32, {m, c.vocab_size});
    b.linear(y, model_.weights().head, LinearKind::kF32Out, out);
    return out;
}

std::vector<DraftOutput> MtpDrafter::step(const ForwardResult& target, std::span<const DraftInput> seqs) {
    Backend& b = model_.backend();
    const ModelConfig& c = model_.config();
    const int64_t hc = c.hc_mult, d = c.hidden_size, vocab = c.vocab_size;
    DSV4_CHECK(!target.hidden.empty(), "MTP drafter: the target step did not return its last layer's states");
    std::vector<DraftOutput> out(seqs.size());
    // 1. Absorb: one substep over every sequence's final rows (H_t, x_t+1) at positions t.
    StepBatch absorb;
    std::vector<int32_t> src_rows, last_rows, proposing;
    for (size_t i = 0; i < seqs.size(); ++i) {
        const DraftInput& in = seqs[i];
        const auto rows = static_cast<int64_t>(in.next_tokens.size());
        out[i].written_end = in.start + rows;
        if (rows == 0) continue;
        add_draft_sequence(absorb, in, in.start, in.next_tokens, block_tokens());
        for (int64_t r = 0; r < rows; ++r) src_rows.push_back(static_cast<int32_t>(in.row_begin + r));
        if (in.propose && options_.num_speculative_tokens > 0) {
            last_rows.push_back(static_cast<int32_t>(src_rows.size() - 1));
            proposing.push_back(static_cast<int32_t>(i));
        }
    }
    if (src_rows.empty()) return out;
    b.begin_substep(absorb);
    const auto n = static_cast<int64_t>(src_rows.size());
    Tensor h = b.alloc(DType::kF32, {n, hc, d});
    b.gather_rows(target.hidden[0], src_rows, h);
    Tensor z = block_input(h);
    model_.draft_block(stage().block, state_layer_, z, DeepseekV4::BlockAttention::kCausal);
    if (proposing.empty()) return out;

    // 2. Propose: draft 1 from the absorbed last rows, then one recursive row per further draft.
    std::vector<int32_t> rows = last_rows;
    const bool greedy = std::all_of(proposing.begin(), proposing.end(),
                                    [&](int32_t i) { return drafts_greedily(seqs[i], options_.probabilistic); });
    for (int j = 0; j < options_.num_speculative_tokens; ++j) {
        Tensor lg = logits(z, rows);
        if (greedy) {  // the argmax where the logits are: only the ids come to the host
            const std::vector<int32_t> picks = greedy_draft_tokens(b, lg);
            for (size_t p = 0; p < proposing.size(); ++p) out[proposing[p]].proposal.tokens.push_back(picks[p]);
        } else {
            const std::vector<float> host = read_f32(b, lg);
            for (size_t p = 0; p < proposing.size(); ++p) {
                const DraftInput& in = seqs[proposing[p]];
                draw_draft(std::span<const float>(host).subspan(p * vocab, vocab), in, options_.probabilistic, j,
                           out[proposing[p]].proposal);
            }
        }
        if (j + 1 == options_.num_speculative_tokens) break;
        StepBatch next;
        for (int32_t i : proposing) {
            const DraftInput& in = seqs[i];
            const int64_t pos = in.start + static_cast<int64_t>(in.next_tokens.size()) + j;
            const int32_t token = out[i].proposal.tokens.back();
            add_draft_sequence(next, in, pos, std::span(&token, 1), block_tokens());
            out[i].written_end = pos + 1;
        }
        const auto m = static_cast<int64_t>(proposing.size());
        Tensor prev = b.alloc(DType::kF32, {m, hc, d});
        b.gather_rows(z, rows, prev);  // the previous rows' block outputs are the next rows' H
        b.begin_substep(next);
        z = block_input(prev);
        model_.draft_block(stage().block, state_layer_, z, DeepseekV4::BlockAttention::kCausal);
        rows.resize(proposing.size());
        for (size_t p = 0; p < rows.size(); ++p) rows[p] = static_cast<int32_t>(p);
    }
    return out;
}

}  // namespace

std::unique_ptr<Drafter> make_mtp_drafter(DeepseekV4& model, DraftWeights weights, const DraftOptions& options) {
    return std::make_unique<MtpDrafter>(model, std::move(weights), options);
}

}  // namespace dsv4
