#include "backend/backend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/tensor_reads.h"
#include "core/error.h"

namespace dsv4 {

std::string_view numerics_name(Numerics n) {
    switch (n) {
        case Numerics::kExact:
            return "exact";
        case Numerics::kReference:
            return "reference";
        case Numerics::kFast:
            return "fast";
    }
    return "?";
}

Numerics parse_numerics(std::string_view name) {
    if (name == "exact") return Numerics::kExact;
    if (name == "reference") return Numerics::kReference;
    if (name == "fast") return Numerics::kFast;
    fail("unknown numerics '{}' (exact, reference or fast)", name);
}

int32_t StepBatch::uniform_tokens_per_seq() const {
    if (seqs.empty()) return 0;
    for (const SequenceSlice& s : seqs) {
        if (s.n_tokens != seqs.front().n_tokens) return 0;
    }
    return seqs.front().n_tokens;
}

void StepBatch::add_sequence(int32_t slot, int64_t start_pos, std::span<const int32_t> token_ids,
                             std::vector<int32_t> block_table) {
    SequenceSlice s;
    s.slot = slot;
    s.token_begin = static_cast<int32_t>(tokens.size());
    s.n_tokens = static_cast<int32_t>(token_ids.size());
    s.start_pos = start_pos;
    s.block_table = std::move(block_table);
    const auto index = static_cast<int32_t>(seqs.size());
    for (size_t i = 0; i < token_ids.size(); ++i) {
        tokens.push_back(token_ids[i]);
        positions.push_back(static_cast<int32_t>(start_pos + static_cast<int64_t>(i)));
        seq_index.push_back(index);
    }
    seqs.push_back(std::move(s));
}

WeightRef WeightStore::synthetic_linear(WeightFormat, int64_t, int64_t, float, uint64_t) {
    fail("this backend does not make synthetic weights (use dsv4 make-model for a checkpoint)");
}
VecRef WeightStore::synthetic_vector(int64_t, float, float, uint64_t) {
    fail("this backend does not make synthetic weights (use dsv4 make-model for a checkpoint)");
}
TableRef WeightStore::synthetic_table(int64_t, int64_t, int64_t, uint64_t) {
    fail("this backend does not make synthetic weights (use dsv4 make-model for a checkpoint)");
}
void StateStore::synthetic_context(int32_t, int64_t, std::span<const int32_t>, uint64_t) {
    fail("this backend does not make synthetic contexts");
}

void StateStore::offload_block(int32_t, std::span<std::byte>) {
    fail("this backend has no host tier for the prefix cache (--host-kv-cache-gib)");
}
void StateStore::load_block(std::span<const std::byte>, int32_t) {
    fail("this backend has no host tier for the prefix cache (--host-kv-cache-gib)");
}
void StateStore::offload_snapshot(int32_t, std::span<std::byte>) {
    fail("this backend has no host tier for the prefix cache (--host-kv-cache-gib)");
}
void StateStore::load_snapshot(std::span<const std::byte>, int32_t) {
    fail("this backend has no host tier for the prefix cache (--host-kv-cache-gib)");
}
HostBuffer StateStore::allocate_host_buffer(int64_t bytes) {
    DSV4_CHECK(bytes >= 0, "allocate_host_buffer: {} bytes", bytes);
    HostBuffer b;
    b.memory = std::shared_ptr<std::byte>(new std::byte[static_cast<size_t>(std::max<int64_t>(bytes, 1))](),
                                          std::default_delete<std::byte[]>());
    b.bytes = bytes;
    return b;
}

int32_t argmax_of_row(std::span<const float> row) {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    int32_t best = 0;
    for (size_t i = 0; i < row.size(); ++i) {
        const float v = row[i];
        if (!(v < kInf)) return kNoArgmax;  // NaN or +inf: a model fault, not a choice
        if (v > row[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);  // strict: the lowest index wins ties
    }
    return row.empty() || row[static_cast<size_t>(best)] == -kInf ? kNoArgmax : best;
}

int64_t argmax_row_width(const Tensor& x, const Tensor& out) {
    DSV4_CHECK(x.dtype == DType::kF32 && out.dtype == DType::kI32 && x.numel() > 0 && out.numel() == x.size(0),
               "argmax_rows: x [{}] f32 and out [{}] i32 do not match", x.numel(), out.numel());
    return x.numel() / x.size(0);
}

void ModelOps::add_to_streams(Tensor x, const Tensor& y) {
    const int64_t n = x.size(0), hc = x.size(1);
    std::vector<float> ones(static_cast<size_t>(n * hc), 1.0f), eye(static_cast<size_t>(n * hc * hc), 0.0f);
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t k = 0; k < hc; ++k) eye[static_cast<size_t>((t * hc + k) * hc + k)] = 1.0f;
    }
    Tensor post = alloc(DType::kF32, {n, hc}), comb = alloc(DType::kF32, {n, hc, hc});
    from_host(post, ones.data());
    from_host(comb, eye.data());
    hc_post(x, y, post, comb);
}

void ModelOps::hc_post_pre(Tensor x, const HcPostInputs* prev, const MhcWeights& w, const VecRef& norm,
                           int sinkhorn_iters, float hc_eps, float norm_eps, Tensor u, Tensor post, Tensor comb) {
    if (prev != nullptr) hc_post(x, prev->y, prev->post, prev->comb);
    hc_pre(x, w, sinkhorn_iters, hc_eps, norm_eps, u, post, comb);
    rms_norm(u, &norm, norm_eps, u);
}

void ModelOps::linears(const Tensor& x, std::span<const LinearTarget> targets) {
    for (const LinearTarget& t : targets) linear(x, *t.w, t.kind, t.y);
}

void ModelOps::norm_rope(Tensor x, const VecRef* weight, float eps, const RopeParams& rope) {
    rms_norm(x, weight, eps, x);
    this->rope(x, rope, false);
}

void ModelOps::norm_ropes(std::span<const NormRopeTarget> targets, float eps) {
    for (const NormRopeTarget& t : targets) {
        if (t.rope != nullptr) {
            norm_rope(t.x, t.weight, eps, *t.rope);
        } else {
            rms_norm(t.x, t.weight, eps, t.x);
        }
    }
}

void ModelOps::compressors(int layer, const Tensor& x, std::span<const CompressTarget> targets, const RopeParams& rope,
                           float norm_eps) {
    std::vector<LinearTarget> projections;
    for (const CompressTarget& t : targets) {
        projections.push_back({&t.w->wkv, LinearKind::kF32Out, t.a});
        projections.push_back({&t.w->wgate, LinearKind::kF32Out, t.g});
    }
    linears(x, projections);
    for (const CompressTarget& t : targets) compress(layer, t.role, t.a, t.g, *t.w, rope, norm_eps);
}

bool ModelOps::indexer_picks_all(int ratio, int k) const {
    (void)ratio;
    (void)k;
    return false;
}

void ModelOps::indexer_picks(int layer, const Tensor& x, const Tensor& q_residual, const IndexerWeights& w,
                             const RopeParams& rope, int ratio, int heads, Tensor topk) {
    const int64_t n = q_residual.size(0), dim = w.wq_b.rows / heads;
    Tensor weights = alloc(DType::kF32, {n, heads});
    linear(x, w.weights_proj, LinearKind::kF32Out, weights);
    Tensor q = alloc(DType::kF32, {n, heads, dim});
    linear(q_residual, w.wq_b, LinearKind::kQuantized, q);
    this->rope(q, rope, false);
    indexer_query_sim(q);
    scale(weights, 1.0f / std::sqrt(static_cast<float>(dim) * static_cast<float>(heads)));
    indexer_topk(layer, q, weights, ratio, topk);
}

void ModelOps::attention_unrotated(int layer, const LayerConfig& lc, const Tensor& q, const Tensor& kv,
                                   const VecRef& sinks, const Tensor* topk, float scale, Tensor out) {
    attention(layer, lc, q, kv, sinks, topk, scale, out);
    rope(out, lc.rope, true);
}

void ModelOps::normed_attention_unrotated(int layer, const LayerConfig& lc, Tensor q, const Tensor& kv,
                                          const VecRef& sinks, const Tensor* topk, float scale, float norm_eps,
                                          Tensor out) {
    norm_rope(q, nullptr, norm_eps, lc.rope);
    attention_unrotated(layer, lc, q, kv, sinks, topk, scale, out);
}

void ModelOps::normed_attention_projected(int layer, const LayerConfig& lc, Tensor q, const Tensor& kv,
                                          const VecRef& sinks, const Tensor* topk, float scale, float norm_eps,
                                          Tensor out, const WeightRef& wo_a, int groups, Tensor z) {
    normed_attention_unrotated(layer, lc, q, kv, sinks, topk, scale, norm_eps, out);
    grouped_linear(out.view({out.size(0), groups, out.size(1) * out.size(2) / groups}), wo_a, groups, z);
}

void ModelOps::argmax_rows(const Tensor& x, Tensor out) {
    const int64_t n = x.size(0), v = argmax_row_width(x, out);
    const std::vector<float> host = read_f32(*this, x);
    std::vector<int32_t> picks(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) picks[i] = argmax_of_row(std::span<const float>(host).subspan(i * v, v));
    from_host(out, picks.data());
}

WeightRef WeightStore::upload_host_linear(const TensorView&, const TensorView*, WeightFormat, int64_t, int64_t, int,
                                          int) {
    fail("this backend has no expert tier (--gpu-experts)");
}
WeightRef WeightStore::synthetic_host_linear(WeightFormat, int64_t, int64_t, float, uint64_t) {
    fail("this backend has no expert tier for synthetic models (--gpu-experts)");
}
void WeightStore::create_expert_cache(int, int, const ExpertWeights&) {
    fail("this backend has no expert tier (--gpu-experts)");
}
ExpertWeights WeightStore::fetch_expert(int, int, const ExpertWeights&) {
    fail("this backend has no expert tier (--gpu-experts)");
}
void WeightStore::store_expert(int, int, const ExpertWeights&) {
    fail("this backend has no expert tier (--gpu-experts)");
}
void WeightStore::release_host_expert(const ExpertWeights&) {
    fail("this backend has no expert tier (--gpu-experts)");
}
void WeightStore::create_expert_pair_counters(int, int) {
    fail("this backend has no expert tier (--gpu-experts)");
}
std::vector<int64_t> WeightStore::take_expert_pair_counts() {
    fail("this backend has no expert tier (--gpu-experts)");
}
void ModelOps::count_expert_pairs(int, const Tensor&) {
    fail("this backend has no expert tier (--gpu-experts)");
}

}  // namespace dsv4
