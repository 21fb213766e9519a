// Manifold-constrained hyper-connections on the CPU (model-spec 2.3, 2.12): the mixes of the hc_mult residual
// streams, Sinkhorn projection of the comb matrix, the collapse (pre), and the expand + mix (post, comb^T).
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_numerics.h"
#include "core/block_dequant.h"
#include "core/parallel.h"

namespace dsv4 {
namespace {

// Acc: float in exact numerics, double in reference numerics (cpu_numerics.h).
template <typename Acc>
Acc sigmoid(Acc v) {
    return Acc(1) / (Acc(1) + std::exp(-v));
}

// 1 / rms of the flattened streams x [hc * D].
template <typename Acc>
Acc inv_rms(const float* x, int64_t width, float eps) {
    return Acc(1) / std::sqrt(cpu::dot_acc<Acc>(x, x, width) / static_cast<Acc>(width) + Acc(eps));
}

// raw[i] = fn_i . x, stored as float (the CUDA backend keeps the raw mixes in a float buffer).
template <typename Acc>
void raw_mixes(const float* x, int64_t width, const VecRef& fn, int n_mix, float* raw) {
    for (int i = 0; i < n_mix; ++i) raw[i] = static_cast<float>(cpu::dot_acc<Acc>(fn.data + i * width, x, width));
}

// comb [hc, hc] <- Sinkhorn(softmax over rows + eps): columns first, then (rows, columns) iters - 1 more times.
template <typename Acc>
void sinkhorn(Acc* comb, int hc, int iters, Acc eps) {
    for (int j = 0; j < hc; ++j) {
        Acc* row = comb + j * hc;
        Acc mx = row[0];
        for (int k = 1; k < hc; ++k) mx = std::max(mx, row[k]);
        Acc sum = 0;
        for (int k = 0; k < hc; ++k) sum += (row[k] = std::exp(row[k] - mx));
        for (int k = 0; k < hc; ++k) row[k] = row[k] / sum + eps;
    }
    auto normalize_columns = [&] {
        for (int k = 0; k < hc; ++k) {
            Acc sum = 0;
            for (int j = 0; j < hc; ++j) sum += comb[j * hc + k];
            for (int j = 0; j < hc; ++j) comb[j * hc + k] /= sum + eps;
        }
    };
    normalize_columns();
    for (int it = 1; it < iters; ++it) {
        for (int j = 0; j < hc; ++j) {
            Acc sum = 0;
            for (int k = 0; k < hc; ++k) sum += comb[j * hc + k];
            for (int k = 0; k < hc; ++k) comb[j * hc + k] /= sum + eps;
        }
        normalize_columns();
    }
}

// out[i] = sum_j pre_j X_j[i] (bf16 in reference numerics).
template <typename Acc>
void collapse(const float* xs, const Acc* pre, int hc, int64_t d, bool round, float* out) {
    for (int64_t i = 0; i < d; ++i) {
        Acc acc = 0;
        for (int j = 0; j < hc; ++j) acc += pre[j] * xs[j * d + i];
        out[i] = round ? cpu::bf(static_cast<float>(acc)) : static_cast<float>(acc);
    }
}

template <typename Acc>
void hc_pre_token(const float* xs, int hc, int64_t d, const MhcWeights& w, int iters, float hc_eps, float norm_eps,
                  bool round, float* u, float* post, float* comb) {
    const int n_mix = (2 + hc) * hc;
    std::vector<float> raw(n_mix);
    raw_mixes<Acc>(xs, hc * d, w.fn, n_mix, raw.data());
    const Acc inv = inv_rms<Acc>(xs, hc * d, norm_eps);
    auto mix = [&](int i, int group) { return raw[i] * inv * Acc(w.scale.data[group]) + Acc(w.base.data[i]); };
    std::vector<Acc> pre(hc), c(hc * hc);
    for (int j = 0; j < hc; ++j) {
        pre[j] = sigmoid(mix(j, 0)) + Acc(hc_eps);
        post[j] = static_cast<float>(Acc(2) * sigmoid(mix(hc + j, 1)));
    }
    for (int i = 0; i < hc * hc; ++i) c[i] = mix(2 * hc + i, 2);
    sinkhorn(c.data(), hc, iters, Acc(hc_eps));
    for (int i = 0; i < hc * hc; ++i) comb[i] = static_cast<float>(c[i]);
    collapse(xs, pre.data(), hc, d, round, u);
}

// New streams X'_k = post_k y + sum_j comb[j][k] X_j (comb^T: sum over the first index), of one token.
template <typename Acc>
void hc_post_token(float* xs, const float* ys, const float* p, const float* c, int hc, int64_t d, bool round) {
    std::vector<float> old(xs, xs + hc * d);
    for (int k = 0; k < hc; ++k) {
        for (int64_t i = 0; i < d; ++i) {
            Acc acc = Acc(p[k]) * ys[i];
            for (int j = 0; j < hc; ++j) acc += Acc(c[j * hc + k]) * old[j * d + i];
            xs[k * d + i] = round ? cpu::bf(static_cast<float>(acc)) : static_cast<float>(acc);
        }
    }
}

template <typename Acc>
void hc_head_token(const float* xs, int hc, int64_t d, const HcHeadWeights& w, float hc_eps, float norm_eps, bool round,
                   float* y) {
    std::vector<float> raw(hc);
    raw_mixes<Acc>(xs, hc * d, w.fn, hc, raw.data());
    const Acc inv = inv_rms<Acc>(xs, hc * d, norm_eps);
    std::vector<Acc> pre(hc);
    for (int j = 0; j < hc; ++j) {
        pre[j] = sigmoid(raw[j] * inv * Acc(w.scale.data[0]) + Acc(w.base.data[j])) + Acc(hc_eps);
    }
    collapse(xs, pre.data(), hc, d, round, y);
}

}  // namespace

void CpuBackend::hc_pre(const Tensor& x, const MhcWeights& w, int sinkhorn_iters, float hc_eps, float norm_eps,
                        Tensor u, Tensor post, Tensor comb) {
    const int64_t n = x.size(0);
    const int hc = static_cast<int>(x.size(1));
    const int64_t d = x.size(2);
    const int n_mix = (2 + hc) * hc;
    const bool ref = reference();
#pragma omp parallel for if (worth_parallel(n * hc * d * n_mix))
    for (int64_t t = 0; t < n; ++t) {
        const float* xs = x.f32() + t * hc * d;
        float* u_t = u.f32() + t * d;
        float* post_t = post.f32() + t * hc;
        float* comb_t = comb.f32() + t * hc * hc;
        cpu::with_acc(ref, [&](auto acc) {
            hc_pre_token<decltype(acc)>(xs, hc, d, w, sinkhorn_iters, hc_eps, norm_eps, ref, u_t, post_t, comb_t);
        });
    }
}

void CpuBackend::hc_post(Tensor x, const Tensor& y, const Tensor& post, const Tensor& comb) {
    const int64_t n = x.size(0);
    const int hc = static_cast<int>(x.size(1));
    const int64_t d = x.size(2);
    const bool ref = reference();
#pragma omp parallel for if (worth_parallel(n * hc * hc * d))
    for (int64_t t = 0; t < n; ++t) {
        float* xs = x.f32() + t * hc * d;
        const float* ys = y.f32() + t * d;
        const float* p = post.f32() + t * hc;
        const float* c = comb.f32() + t * hc * hc;
        cpu::with_acc(ref, [&](auto acc) { hc_post_token<decltype(acc)>(xs, ys, p, c, hc, d, ref); });
    }
}

void CpuBackend::hc_head(const Tensor& x, const HcHeadWeights& w, float hc_eps, float norm_eps, Tensor y) {
    const int64_t n = x.size(0);
    const int hc = static_cast<int>(x.size(1));
    const int64_t d = x.size(2);
    const bool ref = reference();
#pragma omp parallel for if (worth_parallel(n * hc * hc * d))
    for (int64_t t = 0; t < n; ++t) {
        const float* xs = x.f32() + t * hc * d;
        cpu::with_acc(
            ref, [&](auto acc) { hc_head_token<decltype(acc)>(xs, hc, d, w, hc_eps, norm_eps, ref, y.f32() + t * d); });
    }
}

}  // namespace dsv4
