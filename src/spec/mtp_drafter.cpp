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
// Where the backend records graphs, both substeps replay a graph recorded for their shape (GraphedRuns): at batch 1 a
// substep is ~60 short kernels, whose eager launches cost more than their work. The recursive substeps differ only
// in their metadata (positions, tokens), so one graph serves all of them; the absorb's gathers read rows uploaded
// with its metadata (StepBatch::source_rows, logit_rows).
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "backend/graphed_runs.h"
#include "backend/tensor_reads.h"
#include "core/error.h"
#include "spec/draft_steps.h"
#include "spec/drafter.h"

namespace dsv4 {
namespace {

// The drafter's graph keys start from these ("mtp-absb", "mtp-drft"): apart from each other and the runner's steps.
constexpr uint64_t kAbsorbKey = 0x6d74702d61627362ull;
constexpr uint64_t kRecursionKey = 0x6d74702d64726674ull;

class MtpDrafter final : public Drafter {
  public:
    MtpDrafter(DeepseekV4& model, DraftWeights weights, const DraftOptions& options)
        : Drafter(options),
          model_(model),
          weights_(std::move(weights)),
          graphs_(options.enforce_eager ? nullptr : model.backend().graph_recorder()) {
        const ModelConfig& c = model_.config();
        hidden_ = {c.num_layers - 1};
        state_layer_ = c.num_layers;
    }

    std::string_view method() const override { return "mtp"; }
    const std::vector<int>& hidden_layers() const override { return hidden_; }
    int state_stages() const override { return 1; }

    std::vector<DraftOutput> step(const ForwardResult& target, std::span<const DraftInput> seqs) override;

  private:
    // A substep's draft logits [m, vocab] and their argmax [m] (i32), in scratch.
    struct DraftRows {
        Tensor logits, ids;
    };
    // Who proposes in a step: the inputs' indices, and whether all of them draft by argmax.
    struct Proposers {
        std::vector<int32_t> seqs;
        bool greedy = true;
    };

    const MtpStageWeights& stage() const { return weights_.mtp[0]; }
    // The block's input streams for the substep's tokens (E of the step tokens) and states h [N, hc, D].
    Tensor block_input(const Tensor& h);
    // The drafts' logits and argmax from block output rows z [m, hc, D].
    DraftRows draft_rows(const Tensor& z);
    // The absorb substep (after its begin_substep): the block over the target's rows batch.source_rows of `hidden`,
    // then the proposers' last rows (batch.logit_rows) into `chain` and their first drafts' rows. Recordable.
    DraftRows absorb_substep(const Tensor& hidden, const StepBatch& batch, Tensor chain);
    // One recursive substep (after its begin_substep): the block over `chain` [m, hc, D] (the previous rows' block
    // outputs), whose output becomes the next substep's chain in place, and the next drafts' rows. Recordable.
    DraftRows recursive_substep(Tensor chain);
    // A substep's graph key (0: eager): `kind`, its shape (token, sequence, tokens-a-sequence and logit-row counts,
    // the recorder's shape key), the scratch offset it starts from and the address of the input it reads.
    uint64_t substep_key(uint64_t kind, const StepBatch& batch, size_t mark, const Tensor& input) const;
    // Appends draft j of every proposer, from their rows (ids when greedy, else the logits on the host).
    void take_drafts(const DraftRows& rows, const Proposers& who, int j, std::span<const DraftInput> seqs,
                     std::vector<DraftOutput>& out);
    int block_tokens() { return model_.backend().state_config().block_tokens; }

    DeepseekV4& model_;
    DraftWeights weights_;
    GraphedRuns<DraftRows> graphs_;
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
    b.add_to_streams(z, e);  // Z_j += e for every stream
    return z;
}

MtpDrafter::DraftRows MtpDrafter::draft_rows(const Tensor& z) {
    Backend& b = model_.backend();
    const ModelConfig& c = model_.config();
    const int64_t m = z.size(0), d = c.hidden_size;
    Tensor y = b.alloc(DType::kF32, {m, d});
    b.hc_head(z, stage().hc_head, static_cast<float>(c.hc_eps), static_cast<float>(c.rms_norm_eps), y);
    b.rms_norm(y, &stage().norm, static_cast<float>(c.rms_norm_eps), y);
    DraftRows rows{b.alloc(DType::kF32, {m, c.vocab_size}), b.alloc(DType::kI32, {m})};
    b.linear(y, model_.weights().head, LinearKind::kF32Out, rows.logits);
    b.argmax_rows(rows.logits, rows.ids);
    return rows;
}

MtpDrafter::DraftRows MtpDrafter::absorb_substep(const Tensor& hidden, const StepBatch& batch, Tensor chain) {
    Backend& b = model_.backend();
    const int64_t n = batch.n_tokens(), hc = model_.config().hc_mult, d = model_.config().hidden_size;
    Tensor h = b.alloc(DType::kF32, {n, hc, d});
    b.gather_rows(hidden, batch.source_rows, h);
    Tensor z = block_input(h);
    model_.draft_block(stage().block, state_layer_, z, DeepseekV4::BlockAttention::kCausal);
    if (batch.logit_rows.empty()) return {};
    b.gather_rows(z, batch.logit_rows, chain);
    return draft_rows(chain);
}

MtpDrafter::DraftRows MtpDrafter::recursive_substep(Tensor chain) {
    Tensor z = block_input(chain);
    model_.draft_block(stage().block, state_layer_, z, DeepseekV4::BlockAttention::kCausal);
    model_.backend().copy(z, chain);  // this substep's rows are the next one's H
    return draft_rows(chain);
}

uint64_t MtpDrafter::substep_key(uint64_t kind, const StepBatch& batch, size_t mark, const Tensor& input) const {
    if (!model_.graphable(batch.n_tokens())) return 0;
    const uint64_t extra[] = {mark, reinterpret_cast<uintptr_t>(input.data)};
    return graphs_.key(kind, batch, extra);
}

void MtpDrafter::take_drafts(const DraftRows& rows, const Proposers& who, int j, std::span<const DraftInput> seqs,
                             std::vector<DraftOutput>& out) {
    Backend& b = model_.backend();
    if (who.greedy) {  // only the ids come to the host
        const std::vector<int32_t> picks = read_draft_ids(b, rows.ids);
        for (size_t p = 0; p < who.seqs.size(); ++p) out[who.seqs[p]].proposal.tokens.push_back(picks[p]);
        return;
    }
    const auto vocab = static_cast<size_t>(model_.config().vocab_size);
    const std::vector<float> host = read_f32(b, rows.logits);
    for (size_t p = 0; p < who.seqs.size(); ++p) {
        draw_draft(std::span<const float>(host).subspan(p * vocab, vocab), seqs[who.seqs[p]], options_.probabilistic, j,
                   out[who.seqs[p]].proposal);
    }
}

std::vector<DraftOutput> MtpDrafter::step(const ForwardResult& target, std::span<const DraftInput> seqs) {
    Backend& b = model_.backend();
    const ModelConfig& c = model_.config();
    const int64_t hc = c.hc_mult, d = c.hidden_size;
    DSV4_CHECK(!target.hidden.empty(), "MTP drafter: the target step did not return its last layer's states");
    std::vector<DraftOutput> out(seqs.size());
    // 1. Absorb: one substep over every sequence's final rows (H_t, x_t+1) at positions t.
    StepBatch absorb;
    std::vector<int32_t> src_rows, last_rows;
    Proposers who;
    for (size_t i = 0; i < seqs.size(); ++i) {
        const DraftInput& in = seqs[i];
        const auto rows = static_cast<int64_t>(in.next_tokens.size());
        out[i].written_end = in.start + rows;
        if (rows == 0) continue;
        add_draft_sequence(absorb, in, in.start, in.next_tokens, block_tokens());
        for (int64_t r = 0; r < rows; ++r) src_rows.push_back(static_cast<int32_t>(in.row_begin + r));
        if (in.propose && options_.num_speculative_tokens > 0) {
            last_rows.push_back(static_cast<int32_t>(src_rows.size() - 1));
            who.seqs.push_back(static_cast<int32_t>(i));
            who.greedy = who.greedy && drafts_greedily(in, options_.probabilistic);
        }
    }
    if (src_rows.empty()) return out;
    const auto m = static_cast<int64_t>(who.seqs.size());
    // The proposers' H for the recursive substeps, allocated below everything the absorb allocates: each recursive
    // substep then starts from the same scratch offset (one recorded graph for all of them) and rewrites it in place.
    const Tensor chain = m > 0 ? b.alloc(DType::kF32, {m, hc, d}) : Tensor();
    absorb.source_rows = std::move(src_rows);
    absorb.logit_rows = std::move(last_rows);
    const size_t absorb_mark = b.scratch_mark();
    b.begin_substep(absorb);
    const Tensor& hidden = target.hidden[0];
    const DraftRows first = graphs_.run(substep_key(kAbsorbKey, absorb, absorb_mark, hidden),
                                        [&] { return absorb_substep(hidden, absorb, chain); });
    if (m == 0) return out;

    // 2. Propose: draft 1 from the absorbed last rows, then one recursive row per further draft.
    take_drafts(first, who, 0, seqs, out);
    const size_t chain_mark = b.scratch_mark();
    for (int j = 1; j < options_.num_speculative_tokens; ++j) {
        StepBatch next;
        for (int32_t i : who.seqs) {
            const DraftInput& in = seqs[i];
            const int64_t pos = in.start + static_cast<int64_t>(in.next_tokens.size()) + j - 1;
            const int32_t token = out[i].proposal.tokens.back();
            add_draft_sequence(next, in, pos, std::span(&token, 1), block_tokens());
            out[i].written_end = pos + 1;
        }
        b.scratch_release(chain_mark);  // the previous substep's rows were read (their drafts) or copied (chain)
        b.begin_substep(next);
        const DraftRows rows =
            graphs_.run(substep_key(kRecursionKey, next, chain_mark, chain), [&] { return recursive_substep(chain); });
        take_drafts(rows, who, j, seqs, out);
    }
    return out;
}

}  // namespace

std::unique_ptr<Drafter> make_mtp_drafter(DeepseekV4& model, DraftWeights weights, const DraftOptions& options) {
    return std::make_unique<MtpDrafter>(model, std::move(weights), options);
}

}  // namespace dsv4
