// Manifold-constrained hyper-connections on the GPU (model-spec 2.3, 2.12): one block per token computes the mixes
// of its hc streams, the Sinkhorn projection of comb (one thread: hc <= 8), and the collapse; hc_post mixes and
// expands element-wise. Acc is the numerics mode's arithmetic (float; double in reference numerics: cuda_common.cuh).
#include "backend/cuda/kernels.h"
#include "backend/cuda/mhc_mix.cuh"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

using mhc::kMaxHc;
using mhc::mix_token;
using mhc::mix_token_hc4;
using mhc::sigmoid_acc;

// Sum of squares of x[0..n) over the block, 4 independent float4 loads in flight per thread (n % 4 == 0 and x
// 16-byte aligned take that path; otherwise a plain loop).
template <typename Acc>
__device__ Acc sum_squares(const float* x, int64_t n, Acc* scratch) {
    Acc sq = 0;
    if (n % 4 == 0 && (reinterpret_cast<uintptr_t>(x) & 15u) == 0) {
        const auto* x4 = reinterpret_cast<const float4*>(x);
        const int64_t n4 = n / 4;
        for (int64_t i = threadIdx.x; i < n4; i += 4 * blockDim.x) {
            float4 v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int64_t k = i + u * blockDim.x;
                v[u] = k < n4 ? x4[k] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                sq += Acc(v[u].x) * v[u].x + Acc(v[u].y) * v[u].y + Acc(v[u].z) * v[u].z + Acc(v[u].w) * v[u].w;
            }
        }
    } else {
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sq += Acc(x[i]) * x[i];
    }
    return block_sum(sq, scratch);
}

// The collapse u = sum_j pre_j X_j of one token over the block's threads.
template <typename Acc>
__device__ void collapse(const float* xs, const Acc* pre, int hc, int64_t d, bool round, float* out) {
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        Acc acc = 0;
        for (int j = 0; j < hc; ++j) acc += pre[j] * xs[j * d + i];
        out[i] = store_acc(acc, round);
    }
}

// Per token: inv rms of the flattened streams (loads in flight across the whole block), mixes = raw * inv
// (raw = fn . x from the GEMV), then pre / post / Sinkhorn(comb) and the collapse u = sum_j pre_j X_j.
template <typename Acc>
__global__ void hc_pre_finish_kernel(const float* x, const float* raw_mixes, int hc, int64_t d, MhcWeights w, int iters,
                                     float hc_eps, float norm_eps, bool round, float* u, float* post, float* comb) {
    pdl_begin();
    __shared__ Acc scratch[32];
    __shared__ Acc pre[kMaxHc];
    const int t = blockIdx.x;
    const int n_mix = (2 + hc) * hc;
    const int64_t width = hc * d;
    const float* xs = x + static_cast<int64_t>(t) * width;
    const Acc inv = Acc(1) / sqrt_acc(sum_squares(xs, width, scratch) / static_cast<Acc>(width) + Acc(norm_eps));
    const float* mix = raw_mixes + static_cast<int64_t>(t) * n_mix;
    float* post_t = post + static_cast<int64_t>(t) * hc;
    float* comb_t = comb + static_cast<int64_t>(t) * hc * hc;
    if (hc == 4) {  // DeepSeek-V4's hc_mult
        if (threadIdx.x < 32) mix_token_hc4(mix, inv, w, iters, hc_eps, pre, post_t, comb_t);
    } else if (threadIdx.x == 0) {
        mix_token(mix, inv, hc, w, iters, hc_eps, pre, post_t, comb_t);
    }
    __syncthreads();
    collapse(xs, pre, hc, d, round, u + static_cast<int64_t>(t) * d);
}

// One thread per (token, channel): new streams X'_k = post_k y + sum_j comb[j][k] X_j.
template <typename Acc>
__global__ void hc_post_kernel(float* x, const float* y, const float* post, const float* comb, int64_t n, int hc,
                               int64_t d, bool round) {
    pdl_begin();
    const int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (id >= n * d) return;
    const int64_t t = id / d, i = id % d;
    float old[kMaxHc];
    float* xs = x + t * hc * d;
    for (int j = 0; j < hc; ++j) old[j] = xs[j * d + i];
    const float* c = comb + t * hc * hc;
    const float yv = y[t * d + i];
    for (int k = 0; k < hc; ++k) {
        Acc acc = Acc(post[t * hc + k]) * yv;
        for (int j = 0; j < hc; ++j) acc += Acc(c[j * hc + k]) * old[j];
        xs[k * d + i] = store_acc(acc, round);
    }
}

// hc_post_kernel at post = 1 and comb = identity: acc = y, then + x_k (the zero terms change nothing).
template <typename Acc>
__global__ void add_to_streams_kernel(float* x, const float* y, int64_t n, int hc, int64_t d, bool round) {
    pdl_begin();
    const int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (id >= n * hc * d) return;
    const int64_t t = id / (hc * d), i = id % d;
    Acc acc = Acc(y[t * d + i]);
    acc += Acc(x[id]);
    x[id] = store_acc(acc, round);
}

template <typename Acc>
__global__ void hc_head_finish_kernel(const float* x, const float* raw_mixes, int hc, int64_t d, HcHeadWeights w,
                                      float hc_eps, float norm_eps, bool round, float* y) {
    pdl_begin();
    __shared__ Acc scratch[32];
    __shared__ Acc pre[kMaxHc];
    const int t = blockIdx.x;
    const int64_t width = hc * d;
    const float* xs = x + static_cast<int64_t>(t) * width;
    const Acc inv = Acc(1) / sqrt_acc(sum_squares(xs, width, scratch) / static_cast<Acc>(width) + Acc(norm_eps));
    if (threadIdx.x < hc) {
        const Acc m = raw_mixes[static_cast<int64_t>(t) * hc + threadIdx.x] * inv;
        pre[threadIdx.x] = sigmoid_acc(m * Acc(w.scale.data[0]) + Acc(w.base.data[threadIdx.x])) + Acc(hc_eps);
    }
    __syncthreads();
    collapse(xs, pre, hc, d, round, y + static_cast<int64_t>(t) * d);
}

}  // namespace

void launch_hc_pre(cudaStream_t s, const float* x, const float* raw_mixes, int64_t n, int hc, int64_t d,
                   const MhcWeights& w, int iters, float hc_eps, float norm_eps, bool reference, float* u, float* post,
                   float* comb) {
    if (n == 0) return;
    const auto blocks = static_cast<unsigned>(n);
    if (reference) {
        launch_kernel(hc_pre_finish_kernel<double>, blocks, 256, 0, s, x, raw_mixes, hc, d, w, iters, hc_eps, norm_eps,
                      true, u, post, comb);
    } else {
        launch_kernel(hc_pre_finish_kernel<float>, blocks, 256, 0, s, x, raw_mixes, hc, d, w, iters, hc_eps, norm_eps,
                      false, u, post, comb);
    }
}

void launch_hc_post(cudaStream_t s, float* x, const float* y, const float* post, const float* comb, int64_t n, int hc,
                    int64_t d, bool reference) {
    if (n == 0) return;
    if (reference) {
        launch_kernel(hc_post_kernel<double>, blocks_for(n * d, 256), 256, 0, s, x, y, post, comb, n, hc, d, true);
    } else {
        launch_kernel(hc_post_kernel<float>, blocks_for(n * d, 256), 256, 0, s, x, y, post, comb, n, hc, d, false);
    }
}

void launch_add_to_streams(cudaStream_t s, float* x, const float* y, int64_t n, int hc, int64_t d, bool reference) {
    if (n == 0) return;
    const unsigned blocks = blocks_for(n * hc * d, 256);
    if (reference) {
        launch_kernel(add_to_streams_kernel<double>, blocks, 256, 0, s, x, y, n, hc, d, true);
    } else {
        launch_kernel(add_to_streams_kernel<float>, blocks, 256, 0, s, x, y, n, hc, d, false);
    }
}

void launch_hc_head(cudaStream_t s, const float* x, const float* raw_mixes, int64_t n, int hc, int64_t d,
                    const HcHeadWeights& w, float hc_eps, float norm_eps, bool reference, float* y) {
    if (n == 0) return;
    const auto blocks = static_cast<unsigned>(n);
    if (reference) {
        launch_kernel(hc_head_finish_kernel<double>, blocks, 256, 0, s, x, raw_mixes, hc, d, w, hc_eps, norm_eps, true,
                      y);
    } else {
        launch_kernel(hc_head_finish_kernel<float>, blocks, 256, 0, s, x, raw_mixes, hc, d, w, hc_eps, norm_eps, false,
                      y);
    }
}

}  // namespace dsv4::cuda
