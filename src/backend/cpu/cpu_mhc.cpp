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

float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// mixes[i] = (fn_i . x) * rsqrt(mean(x^2) + eps) over the flattened streams x [hc * D].
void hc_mixes(const float* x, int64_t width, const VecRef& fn, int n_mix, float eps, float* mixes) {
    const float inv = 1.0f / std::sqrt(dot_f32(x, x, width) / static_cast<float>(width) + eps);
    for (int i = 0; i < n_mix; ++i) mixes[i] = dot_f32(fn.data + i * width, x, width) * inv;
}

// comb [hc, hc] <- Sinkhorn(softmax over rows + eps): columns first, then (rows, columns) iters - 1 more times.
void sinkhorn(float* comb, int hc, int iters, float eps) {
    for (int j = 0; j < hc; ++j) {
        float* row = comb + j * hc;
        float mx = row[0];
        for (int k = 1; k < hc; ++k) mx = std::max(mx, row[k]);
        float sum = 0.0f;
        for (int k = 0; k < hc; ++k) sum += (row[k] = std::exp(row[k] - mx));
        for (int k = 0; k < hc; ++k) row[k] = row[k] / sum + eps;
    }
    auto normalize_columns = [&] {
        for (int k = 0; k < hc; ++k) {
            float sum = 0.0f;
            for (int j = 0; j < hc; ++j) sum += comb[j * hc + k];
            for (int j = 0; j < hc; ++j) comb[j * hc + k] /= sum + eps;
        }
    };
    normalize_columns();
    for (int it = 1; it < iters; ++it) {
        for (int j = 0; j < hc; ++j) {
            float sum = 0.0f;
            for (int k = 0; k < hc; ++k) sum += comb[j * hc + k];
            for (int k = 0; k < hc; ++k) comb[j * hc + k] /= sum + eps;
        }
        normalize_columns();
    }
}

}  // namespace

void CpuBackend::hc_pre(const Tensor& x, const MhcWeights& w, int sinkhorn_iters, float hc_eps, float norm_eps,
                        Tensor u, Tensor post, Tensor comb) {
    const int64_t n = x.size(0);
    const int hc = static_cast<int>(x.size(1));
    const int64_t d = x.size(2);
    const int n_mix = (2 + hc) * hc;
#pragma omp parallel for if (worth_parallel(n * hc * d * n_mix))
    for (int64_t t = 0; t < n; ++t) {
        const float* xs = x.f32() + t * hc * d;
        std::vector<float> mix(n_mix);
        hc_mixes(xs, hc * d, w.fn, n_mix, norm_eps, mix.data());
        std::vector<float> pre(hc);
        for (int j = 0; j < hc; ++j) {
            pre[j] = sigmoid(mix[j] * w.scale.data[0] + w.base.data[j]) + hc_eps;
            post.f32()[t * hc + j] = 2.0f * sigmoid(mix[hc + j] * w.scale.data[1] + w.base.data[hc + j]);
        }
        float* c = comb.f32() + t * hc * hc;
        for (int i = 0; i < hc * hc; ++i) c[i] = mix[2 * hc + i] * w.scale.data[2] + w.base.data[2 * hc + i];
        sinkhorn(c, hc, sinkhorn_iters, hc_eps);
        float* out = u.f32() + t * d;
        for (int64_t i = 0; i < d; ++i) {
            float acc = 0.0f;
            for (int j = 0; j < hc; ++j) acc += pre[j] * xs[j * d + i];
            out[i] = reference() ? cpu::bf(acc) : acc;
        }
    }
}

void CpuBackend::hc_post(Tensor x, const Tensor& y, const Tensor& post, const Tensor& comb) {
    const int64_t n = x.size(0);
    const int hc = static_cast<int>(x.size(1));
    const int64_t d = x.size(2);
#pragma omp parallel for if (worth_parallel(n * hc * hc * d))
    for (int64_t t = 0; t < n; ++t) {
        float* xs = x.f32() + t * hc * d;
        const float* ys = y.f32() + t * d;
        const float* p = post.f32() + t * hc;
        const float* c = comb.f32() + t * hc * hc;
        std::vector<float> old(xs, xs + hc * d);
        for (int k = 0; k < hc; ++k) {
            for (int64_t i = 0; i < d; ++i) {
                float acc = p[k] * ys[i];
                for (int j = 0; j < hc; ++j) acc += c[j * hc + k] * old[j * d + i];  // comb^T: sum over the first index
                xs[k * d + i] = reference() ? cpu::bf(acc) : acc;
            }
        }
    }
}

void CpuBackend::hc_head(const Tensor& x, const HcHeadWeights& w, float hc_eps, float norm_eps, Tensor y) {
    const int64_t n = x.size(0);
    const int hc = static_cast<int>(x.size(1));
    const int64_t d = x.size(2);
#pragma omp parallel for if (worth_parallel(n * hc * hc * d))
    for (int64_t t = 0; t < n; ++t) {
        const float* xs = x.f32() + t * hc * d;
        std::vector<float> mix(hc), pre(hc);
        hc_mixes(xs, hc * d, w.fn, hc, norm_eps, mix.data());
        for (int j = 0; j < hc; ++j) pre[j] = sigmoid(mix[j] * w.scale.data[0] + w.base.data[j]) + hc_eps;
        float* out = y.f32() + t * d;
        for (int64_t i = 0; i < d; ++i) {
            float acc = 0.0f;
            for (int j = 0; j < hc; ++j) acc += pre[j] * xs[j * d + i];
            out[i] = reference() ? cpu::bf(acc) : acc;
        }
    }
}

}  // namespace dsv4
