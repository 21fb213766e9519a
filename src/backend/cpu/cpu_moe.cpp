// Mixture of experts on the CPU (model-spec 2.11): router (sqrtsoftplus scores, bias for selection only, hash
// routing from tid2eid), routed experts grouped by expert so each expert's weights are decoded once per step,
// SwiGLU with the clamp, the shared expert, and the weighted sum in a fixed order (batch invariant).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_numerics.h"

namespace dsv4 {
namespace {

template <typename Acc>
Acc softplus(Acc x) {
    return x > Acc(20) ? x : std::log1p(std::exp(x));  // PyTorch's threshold
}

// Router scores from the gate logits, in place (stored as float: the selection compares floats).
template <typename Acc>
void score(const std::string& func, float* logits, int64_t n) {
    if (func == "sqrtsoftplus") {
        for (int64_t i = 0; i < n; ++i) logits[i] = static_cast<float>(std::sqrt(softplus(Acc(logits[i]))));
    } else if (func == "sigmoid") {
        for (int64_t i = 0; i < n; ++i) logits[i] = static_cast<float>(Acc(1) / (Acc(1) + std::exp(-Acc(logits[i]))));
    } else {  // softmax
        const float mx = *std::max_element(logits, logits + n);
        Acc sum = 0;
        for (int64_t i = 0; i < n; ++i) sum += std::exp(Acc(logits[i]) - Acc(mx));
        for (int64_t i = 0; i < n; ++i) logits[i] = static_cast<float>(std::exp(Acc(logits[i]) - Acc(mx)) / sum);
    }
}

// Routing weights of the k selected experts: their scores, normalised to sum 1 when asked, times the scale.
template <typename Acc>
void selected_weights(const float* s, const int32_t* sel, int64_t k, bool normalize, double route_scale, float* out) {
    Acc sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += s[sel[j]];
    for (int64_t j = 0; j < k; ++j) {
        Acc v = s[sel[j]];
        if (normalize) v /= sum + Acc(1e-20f);
        out[j] = static_cast<float>(v * static_cast<Acc>(static_cast<float>(route_scale)));
    }
}

// act = silu(min(g, limit)) * clamp(u, -limit, limit) (limit 0 = no clamp), times an optional per-row weight.
template <typename Acc>
void swiglu(const float* g, const float* u, int64_t n, float limit, float weight, bool round, float* out) {
    for (int64_t i = 0; i < n; ++i) {
        float gv = g[i], uv = u[i];
        if (limit > 0.0f) {
            gv = std::min(gv, limit);
            uv = std::clamp(uv, -limit, limit);
        }
        const Acc v = Acc(gv) / (Acc(1) + std::exp(-Acc(gv))) * uv * weight;
        out[i] = cpu::store(v, round);
    }
}

// y = sum_j routed_j + shared, in that order.
template <typename Acc>
void combine_row(const float* routed, const float* shared, int64_t k, int64_t d, bool round, float* y) {
    for (int64_t c = 0; c < d; ++c) {
        Acc acc = 0;
        for (int64_t j = 0; j < k; ++j) acc += routed[j * d + c];
        acc += shared[c];
        y[c] = cpu::store(acc, round);
    }
}

}  // namespace

void CpuBackend::route(const Tensor& h, const MoeWeights& w, const ModelConfig& c, RoutingType routing, Tensor weights,
                       Tensor ids) {
    const int64_t n = h.size(0), experts = c.n_routed_experts, k = c.n_experts_per_tok;
    const bool ref = reference();
    Tensor logits = alloc(DType::kF32, {n, experts});
    linear(h, w.gate, LinearKind::kF32Out, logits);
    for (int64_t t = 0; t < n; ++t) {
        float* s = logits.f32() + t * experts;
        cpu::with_acc(ref, [&](auto acc) { score<decltype(acc)>(c.scoring_func, s, experts); });
        int32_t* sel = ids.i32() + t * k;
        if (routing == RoutingType::kHash) {
            const int32_t token = step_.tokens[t];
            std::copy_n(w.tid2eid.data + static_cast<int64_t>(token) * k, k, sel);
        } else {
            std::vector<int32_t> order(experts);
            std::iota(order.begin(), order.end(), 0);
            auto biased = [&](int32_t e) { return s[e] + (w.bias.valid() ? w.bias.data[e] : 0.0f); };
            std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
                return biased(a) > biased(b) || (biased(a) == biased(b) && a < b);
            });
            std::copy_n(order.begin(), k, sel);
        }
        float* wt = weights.f32() + t * k;
        cpu::with_acc(ref, [&](auto acc) {
            selected_weights<decltype(acc)>(s, sel, k, c.norm_topk_prob, c.routed_scaling_factor, wt);
        });
    }
}

void CpuBackend::moe(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
                     Tensor y) {
    const int64_t n = h.size(0), d = h.size(1), k = ids.size(1);
    Tensor routed = alloc(DType::kF32, {n * k, d});
    moe_routed(h, w, weights, ids, limit, routed);
    Tensor shared = alloc(DType::kF32, {n, d});
    if (w.shared) moe_shared(h, *w.shared, limit, shared);
    moe_combine(routed, static_cast<int>(k), w.shared ? &shared : nullptr, y);
}

void CpuBackend::moe_routed(const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids, float limit,
                            Tensor routed) {
    const int64_t d = h.size(1), k = ids.size(1), pairs = ids.numel();
    DSV4_CHECK(routed.numel() == pairs * d && weights.numel() == pairs && pairs / std::max<int64_t>(k, 1) <= h.size(0),
               "moe_routed: {} pairs of {} rows do not fit routed [{}] / weights [{}]", pairs, h.size(0),
               routed.numel(), weights.numel());
    const bool ref = reference();
    // Per expert, the pairs that chose it.
    std::vector<std::vector<int64_t>> users(w.experts.size());
    for (int64_t i = 0; i < pairs; ++i) {
        const int32_t e = ids.i32()[i];
        DSV4_CHECK(e >= 0 && e < static_cast<int32_t>(w.experts.size()), "moe: expert id {} is outside [0, {})", e,
                   w.experts.size());
        DSV4_CHECK(w.experts[e].w1.valid(), "moe: expert {} is not resident on this backend", e);
        users[e].push_back(i);
    }
    for (size_t e = 0; e < users.size(); ++e) {
        const auto& list = users[e];
        if (list.empty()) continue;
        const auto m = static_cast<int64_t>(list.size());
        const ExpertWeights& ex = w.experts[e];
        const int64_t inter = ex.w1.rows;
        const size_t mark = scratch_mark();
        Tensor xe = alloc(DType::kF32, {m, d}), ge = alloc(DType::kF32, {m, inter}),
               ue = alloc(DType::kF32, {m, inter});
        Tensor act = alloc(DType::kF32, {m, inter}), ye = alloc(DType::kF32, {m, d});
        for (int64_t i = 0; i < m; ++i) std::memcpy(xe.f32() + i * d, h.f32() + (list[i] / k) * d, d * sizeof(float));
        linear(xe, ex.w1, LinearKind::kQuantized, ge);
        linear(xe, ex.w3, LinearKind::kQuantized, ue);
        // Reference multiplies the routing weight in before W2 (DeepSeek); exact applies it after (HF).
        for (int64_t i = 0; i < m; ++i) {
            const float wt = ref ? weights.f32()[list[i]] : 1.0f;
            cpu::with_acc(ref, [&](auto acc) {
                swiglu<decltype(acc)>(ge.f32() + i * inter, ue.f32() + i * inter, inter, limit, wt, ref,
                                      act.f32() + i * inter);
            });
        }
        linear(act, ex.w2, LinearKind::kQuantized, ye);
        for (int64_t i = 0; i < m; ++i) {
            const float wt = ref ? 1.0f : weights.f32()[list[i]];
            float* dst = routed.f32() + list[i] * d;
            for (int64_t c = 0; c < d; ++c) dst[c] = ye.f32()[i * d + c] * wt;
        }
        scratch_release(mark);
    }
}

void CpuBackend::moe_shared(const Tensor& h, const ExpertWeights& shared, float limit, Tensor y) {
    const int64_t n = h.size(0), inter = shared.w1.rows;
    const bool ref = reference();
    const size_t mark = scratch_mark();
    Tensor gs = alloc(DType::kF32, {n, inter}), us = alloc(DType::kF32, {n, inter}),
           as = alloc(DType::kF32, {n, inter});
    linear(h, shared.w1, LinearKind::kQuantized, gs);
    linear(h, shared.w3, LinearKind::kQuantized, us);
    for (int64_t t = 0; t < n; ++t) {
        cpu::with_acc(ref, [&](auto acc) {
            swiglu<decltype(acc)>(gs.f32() + t * inter, us.f32() + t * inter, inter, limit, 1.0f, ref,
                                  as.f32() + t * inter);
        });
    }
    linear(as, shared.w2, LinearKind::kQuantized, y);
    scratch_release(mark);
}

void CpuBackend::moe_combine(const Tensor& routed, int k, const Tensor* shared, Tensor y) {
    const int64_t d = y.size(-1), n = y.numel() / std::max<int64_t>(d, 1);
    DSV4_CHECK(routed.numel() == n * k * d && (shared == nullptr || shared->numel() == n * d),
               "moe_combine: routed has {} elements for {} rows of top-{}", routed.numel(), n, k);
    const bool ref = reference();
    const std::vector<float> zeros(shared == nullptr ? d : 0, 0.0f);
    for (int64_t t = 0; t < n; ++t) {
        const float* r = routed.f32() + t * k * d;
        const float* sh = shared != nullptr ? shared->f32() + t * d : zeros.data();
        cpu::with_acc(ref, [&](auto acc) { combine_row<decltype(acc)>(r, sh, k, d, ref, y.f32() + t * d); });
    }
}

void CpuBackend::kv_cache_sim(Tensor kv, int nope_dims) {
    if (!reference()) return;
    const int64_t dim = kv.size(-1), rows = kv.numel() / dim;
    for (int64_t r = 0; r < rows; ++r) cpu::fp8_sim(kv.f32() + r * dim, nope_dims, 64, fp8_.kv_rows);
}

void CpuBackend::indexer_query_sim(Tensor q) {
    if (!reference()) return;
    const int64_t dim = q.size(-1), rows = q.numel() / dim;
    for (int64_t r = 0; r < rows; ++r) {
        cpu::hadamard(q.f32() + r * dim, dim);
        cpu::fp4_sim(q.f32() + r * dim, dim, 32);
    }
}

}  // namespace dsv4
