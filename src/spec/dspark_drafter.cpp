// DSpark drafter (-0731, model-spec 3.2; the trained function is tools/train/drafters.py DsparkHead).
//
// Context: for every final target position T, c_T = RMS(main_proj(concat_l mean_j X^(l)_T,j); main_norm) over the
// target layers l; each stage s stores RoPE(kv_norm(wkv_s(c_T)), T) in its own ring (state layer num_layers + s).
// Only accepted positions are absorbed, so the rings never hold a rejected draft's row.
// Block: after the target emitted y at position p + 1, the K rows [y, N, ..., N] (N = the noise token) at positions
// p + 1 .. p + K run through the stages; each query attends to its stage's ring rows of p - W + 1 .. p and to all K
// block rows (ModelOps::block_attention), plus the sink. Row k: h_k = hc_head(Z_k), U_k = head(RMS(h_k; norm)).
// Markov head, sequentially: d_0 = y, m_k = W1[d_k], logits_k = U_k + W2 m_k, d_k+1 drawn from logits_k;
// confidence kappa_k = proj([h_k ; m_k]) (the drafts' acceptance estimate, sigmoid(kappa_k)).
// K = num_speculative_tokens (vLLM's anchor-as-first block: the trained block size when K equals it).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/tensor_reads.h"
#include "core/error.h"
#include "spec/draft_steps.h"
#include "spec/drafter.h"

namespace dsv4 {
namespace {

class DsparkDrafter final : public Drafter {
  public:
    DsparkDrafter(DeepseekV4& model, DraftWeights weights, const DraftOptions& options)
        : Drafter(options), model_(model), weights_(std::move(weights)) {
        hidden_ = model_.config().dspark->target_layer_ids;
    }

    std::string_view method() const override { return "dspark"; }
    const std::vector<int>& hidden_layers() const override { return hidden_; }
    int state_stages() const override { return static_cast<int>(w().stages.size()); }

    std::vector<DraftOutput> step(const ForwardResult& target, std::span<const DraftInput> seqs) override;

  private:
    const DsparkWeights& w() const { return *weights_.dspark; }
    int block_tokens() { return model_.backend().state_config().block_tokens; }
    int state_layer(int stage) const { return model_.config().num_layers + stage; }
    // c_T [M, D] of the given target rows.
    Tensor context(const ForwardResult& target, std::span<const int32_t> rows);
    // Absorbs the final rows of every sequence into the stages' rings.
    void absorb(const ForwardResult& target, std::span<const DraftInput> seqs);
    // The Markov head over the block's rows: drafts and confidences of every proposing sequence.
    void markov(const Tensor& h, const std::vector<float>& base, std::span<const DraftInput> seqs,
                const std::vector<int32_t>& proposing, std::vector<DraftOutput>& out);

    DeepseekV4& model_;
    DraftWeights weights_;
    std::vector<int> hidden_;
};

Tensor DsparkDrafter::context(const ForwardResult& target, std::span<const int32_t> rows) {
    Backend& b = model_.backend();
    const ModelConfig& c = model_.config();
    const auto m = static_cast<int64_t>(rows.size()), layers = static_cast<int64_t>(hidden_.size());
    const int64_t hc = c.hc_mult, d = c.hidden_size;
    DSV4_CHECK(static_cast<int64_t>(target.hidden.size()) == layers,
               "DSpark drafter: the target step returned {} hidden states, {} target layers", target.hidden.size(),
               layers);
    // Stream means, layer-major [layers * M, D], then regrouped token-major: row t of [M, layers * D] is the concat.
    Tensor means = b.alloc(DType::kF32, {layers * m, d});
    Tensor picked = b.alloc(DType::kF32, {m, hc, d});
    for (int64_t l = 0; l < layers; ++l) {
        b.gather_rows(target.hidden[l], rows, picked);
        // moe_combine sums each group of hc consecutive rows: the hc streams of one token.
        b.moe_combine(picked.view({m * hc, d}), static_cast<int>(hc), nullptr, means.rows(l * m, m));
    }
    b.scale(means, 1.0f / static_cast<float>(hc));
    std::vector<int32_t> order(static_cast<size_t>(layers * m));
    for (int64_t t = 0; t < m; ++t) {
        for (int64_t l = 0; l < layers; ++l)
            order[static_cast<size_t>(t * layers + l)] = static_cast<int32_t>(l * m + t);
    }
    Tensor mainhid = b.alloc(DType::kF32, {m * layers, d});
    b.gather_rows(means, order, mainhid);
    Tensor ctx = b.alloc(DType::kF32, {m, d});
    b.linear(mainhid.view({m, layers * d}), w().main_proj, LinearKind::kQuantized, ctx);
    b.rms_norm(ctx, &w().main_norm, static_cast<float>(c.rms_norm_eps), ctx);
    return ctx;
}

void DsparkDrafter::absorb(const ForwardResult& target, std::span<const DraftInput> seqs) {
    Backend& b = model_.backend();
    const ModelConfig& c = model_.config();
    StepBatch batch;
    std::vector<int32_t> rows;
    for (const DraftInput& in : seqs) {
        const auto n = static_cast<int64_t>(in.next_tokens.size());
        if (n == 0) continue;
        add_draft_sequence(batch, in, in.start, in.next_tokens, block_tokens());  // tokens unused: valid ids
        for (int64_t r = 0; r < n; ++r) rows.push_back(static_cast<int32_t>(in.row_begin + r));
    }
    if (rows.empty()) return;
    b.begin_substep(batch);
    const Tensor ctx = context(target, rows);
    const auto m = static_cast<int64_t>(rows.size());
    const LayerConfig lc = draft_layer_config(c);
    const auto eps = static_cast<float>(c.rms_norm_eps);
    for (int s = 0; s < state_stages(); ++s) {
        const AttentionWeights& a = w().stages[s].attn;
        Tensor kv = b.alloc(DType::kF32, {m, c.head_dim});
        b.linear(ctx, a.wkv, LinearKind::kQuantized, kv);
        b.rms_norm(kv, &a.kv_norm, eps, kv);
        b.rope(kv.view({m, 1, c.head_dim}), lc.rope, false);
        b.kv_cache_sim(kv, c.nope_head_dim());
        b.store_window(state_layer(s), kv);
    }
}

void DsparkDrafter::markov(const Tensor& h, const std::vector<float>& base, std::span<const DraftInput> seqs,
                           const std::vector<int32_t>& proposing, std::vector<DraftOutput>& out) {
    Backend& b = model_.backend();
    const ModelConfig& c = model_.config();
    const int k = options_.num_speculative_tokens;
    const int64_t vocab = c.vocab_size, rank = c.dspark->markov_rank, d = c.hidden_size;
    const auto s = static_cast<int64_t>(proposing.size());
    std::vector<double> survival(static_cast<size_t>(s), 1.0);
    std::vector<bool> stopped(static_cast<size_t>(s), false);
    for (int j = 0; j < k; ++j) {
        // m_j = W1[d_j] through the embedding op: a substep whose tokens are the sequences' d_j.
        StepBatch batch;
        std::vector<int32_t> h_rows;
        for (int64_t p = 0; p < s; ++p) {
            const DraftInput& in = seqs[proposing[p]];
            const DraftProposal& prop = out[proposing[p]].proposal;
            const int32_t token = j == 0 ? in.next_tokens.back() : prop.tokens.back();
            add_draft_sequence(batch, in, in.start + static_cast<int64_t>(in.next_tokens.size()) + j,
                               std::span(&token, 1), block_tokens());
            h_rows.push_back(static_cast<int32_t>(p * k + j));
        }
        b.begin_substep(batch);
        Tensor mj = b.alloc(DType::kF32, {s, 1, rank});
        b.embed(w().markov_w1, mj);
        Tensor shift = b.alloc(DType::kF32, {s, vocab});
        b.linear(mj.view({s, rank}), w().markov_w2, LinearKind::kF32Out, shift);
        Tensor hj = b.alloc(DType::kF32, {s, d});
        b.gather_rows(h, h_rows, hj);
        Tensor kh = b.alloc(DType::kF32, {s, 1}), km = b.alloc(DType::kF32, {s, 1});
        b.linear(hj, w().confidence_h, LinearKind::kF32Out, kh);
        b.linear(mj.view({s, rank}), w().confidence_m, LinearKind::kF32Out, km);
        std::vector<float> logits = read_f32(b, shift);
        const std::vector<float> kappa_h = read_f32(b, kh), kappa_m = read_f32(b, km);
        for (int64_t p = 0; p < s; ++p) {
            if (stopped[p]) continue;
            std::span<float> row(logits.data() + p * vocab, static_cast<size_t>(vocab));
            const float* u = base.data() + (p * k + j) * vocab;
            for (int64_t v = 0; v < vocab; ++v) row[v] += u[v];
            DraftOutput& o = out[proposing[p]];
            const double confidence = 1.0 / (1.0 + std::exp(-static_cast<double>(kappa_h[p] + kappa_m[p])));
            survival[p] *= confidence;
            if (options_.confidence_threshold > 0.0 && survival[p] < options_.confidence_threshold) {
                stopped[p] = true;  // confidence scheduling: this sequence drafts no further
                continue;
            }
            draw_draft(row, seqs[proposing[p]], options_.probabilistic, j, o.proposal);
            o.confidence.push_back(static_cast<float>(confidence));
        }
    }
}

std::vector<DraftOutput> DsparkDrafter::step(const ForwardResult& target, std::span<const DraftInput> seqs) {
    Backend& b = model_.backend();
    const ModelConfig& c = model_.config();
    std::vector<DraftOutput> out(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
        out[i].written_end = seqs[i].start + static_cast<int64_t>(seqs[i].next_tokens.size());
    }
    absorb(target, seqs);
    const int k = options_.num_speculative_tokens;
    std::vector<int32_t> proposing;
    StepBatch block;
    std::vector<int32_t> tokens(static_cast<size_t>(k), static_cast<int32_t>(c.dspark->noise_token_id));
    for (size_t i = 0; i < seqs.size(); ++i) {
        const DraftInput& in = seqs[i];
        if (!in.propose || in.next_tokens.empty() || k == 0) continue;
        tokens[0] = in.next_tokens.back();
        add_draft_sequence(block, in, in.start + static_cast<int64_t>(in.next_tokens.size()), tokens, block_tokens());
        proposing.push_back(static_cast<int32_t>(i));
    }
    if (proposing.empty()) return out;
    b.begin_substep(block);
    const int64_t n = block.n_tokens(), hc = c.hc_mult, d = c.hidden_size;
    Tensor z = b.alloc(DType::kF32, {n, hc, d});
    b.embed(model_.weights().embed, z);
    for (int s = 0; s < state_stages(); ++s) {
        model_.draft_block(w().stages[s], state_layer(s), z, DeepseekV4::BlockAttention::kDraftBlock);
    }
    Tensor h = b.alloc(DType::kF32, {n, d});
    b.hc_head(z, w().hc_head, static_cast<float>(c.hc_eps), static_cast<float>(c.rms_norm_eps), h);
    Tensor hn = b.alloc(DType::kF32, {n, d});
    b.rms_norm(h, &w().norm, static_cast<float>(c.rms_norm_eps), hn);
    Tensor base = b.alloc(DType::kF32, {n, c.vocab_size});
    b.linear(hn, model_.weights().head, LinearKind::kF32Out, base);
    markov(h, read_f32(b, base), seqs, proposing, out);
    return out;
}

}  // namespace

std::unique_ptr<Drafter> make_dspark_drafter(DeepseekV4& model, DraftWeights weights, const DraftOptions& options) {
    return std::make_unique<DsparkDrafter>(model, std::move(weights), options);
}

}  // namespace dsv4
