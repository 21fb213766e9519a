// The per-token mix of manifold-constrained hyper-connections (model-spec 2.3) on the device, shared by the mHC
// kernels (kernels_mhc.cu) and the fused site boundary (kernels_mhc_boundary.cu): pre / post from the RMS-scaled raw
// mixes and the Sinkhorn projection of comb. Acc is the numerics mode's arithmetic (cuda_common.cuh).
#pragma once

#include "backend/cuda/cuda_common.cuh"

namespace dsv4::cuda::mhc {

constexpr int kMaxHc = kMaxHcStreams;

template <typename Acc>
__device__ Acc sigmoid_acc(Acc v) {
    return Acc(1) / (Acc(1) + exp_acc(-v));
}

// Sinkhorn on a hc x hc matrix (exp-normalised rows, then alternating column / row normalisation), by one thread:
// the generic hc_mult (DeepSeek-V4's hc = 4 takes sinkhorn_hc4 below).
template <typename Acc>
__device__ void sinkhorn(Acc* c, int hc, int iters, Acc eps) {
    for (int j = 0; j < hc; ++j) {
        Acc mx = c[j * hc];
        for (int k = 1; k < hc; ++k) mx = c[j * hc + k] > mx ? c[j * hc + k] : mx;
        Acc sum = 0;
        for (int k = 0; k < hc; ++k) sum += (c[j * hc + k] = exp_acc(c[j * hc + k] - mx));
        for (int k = 0; k < hc; ++k) c[j * hc + k] = c[j * hc + k] / sum + eps;
    }
    for (int it = 0; it < iters; ++it) {
        if (it > 0) {
            for (int j = 0; j < hc; ++j) {
                Acc sum = 0;
                for (int k = 0; k < hc; ++k) sum += c[j * hc + k];
                for (int k = 0; k < hc; ++k) c[j * hc + k] /= sum + eps;
            }
        }
        for (int k = 0; k < hc; ++k) {
            Acc sum = 0;
            for (int j = 0; j < hc; ++j) sum += c[j * hc + k];
            for (int j = 0; j < hc; ++j) c[j * hc + k] /= sum + eps;
        }
    }
}

// Sum of v over the 4 lanes whose lane ids differ only in the bits of `first` and 2 * first (first = 1: a row of the
// 4 x 4 matrix held one element per lane; first = 4: a column). Every lane of the group gets the same bits
// ((a + b) + (c + d) and (c + d) + (a + b) are equal).
template <typename Acc>
__device__ __forceinline__ Acc group4_sum(Acc v, int first) {
    v += __shfl_xor_sync(0xffffffffu, v, first);
    return v + __shfl_xor_sync(0xffffffffu, v, 2 * first);
}

// The same Sinkhorn for hc = 4 by a warp, element (j, k) in lane 4 j + k (lanes 16-31 repeat lanes 0-15): the row and
// column sums are shuffles instead of one thread's 20 sequential iterations (which dominated a decode step's hc_pre).
template <typename Acc>
__device__ __forceinline__ Acc sinkhorn_hc4(Acc v, int iters, Acc eps) {
    Acc mx = v;
    for (int o = 1; o <= 2; o *= 2) {
        const Acc other = __shfl_xor_sync(0xffffffffu, mx, o);
        mx = other > mx ? other : mx;
    }
    const Acc e = exp_acc(v - mx);
    v = e / group4_sum(e, 1) + eps;
    for (int it = 0; it < iters; ++it) {
        if (it > 0) v /= group4_sum(v, 1) + eps;  // rows
        v /= group4_sum(v, 4) + eps;              // columns
    }
    return v;
}

// pre / post / Sinkhorn(comb) of one token from its raw mixes, by thread 0 (generic hc).
template <typename Acc>
__device__ void mix_token(const float* mix, Acc inv, int hc, const MhcWeights& w, int iters, float hc_eps, Acc* pre,
                          float* post, float* comb) {
    for (int j = 0; j < hc; ++j) {
        pre[j] = sigmoid_acc(mix[j] * inv * Acc(w.scale.data[0]) + Acc(w.base.data[j])) + Acc(hc_eps);
        post[j] = static_cast<float>(Acc(2) *
                                     sigmoid_acc(mix[hc + j] * inv * Acc(w.scale.data[1]) + Acc(w.base.data[hc + j])));
    }
    Acc c[kMaxHc * kMaxHc];
    for (int i = 0; i < hc * hc; ++i)
        c[i] = mix[2 * hc + i] * inv * Acc(w.scale.data[2]) + Acc(w.base.data[2 * hc + i]);
    sinkhorn(c, hc, iters, Acc(hc_eps));
    for (int i = 0; i < hc * hc; ++i) comb[i] = static_cast<float>(c[i]);
}

// The same for hc = 4 by warp 0 (all 32 lanes call it): lanes 0-3 compute pre and post, the Sinkhorn runs one matrix
// element per lane.
template <typename Acc>
__device__ __forceinline__ void mix_token_hc4(const float* mix, Acc inv, const MhcWeights& w, int iters, float hc_eps,
                                              Acc* pre, float* post, float* comb) {
    constexpr int kHc = 4;
    const int lane = threadIdx.x % 32, i = lane % 16;
    if (lane < kHc) {
        pre[lane] = sigmoid_acc(mix[lane] * inv * Acc(w.scale.data[0]) + Acc(w.base.data[lane])) + Acc(hc_eps);
        post[lane] = static_cast<float>(
            Acc(2) * sigmoid_acc(mix[kHc + lane] * inv * Acc(w.scale.data[1]) + Acc(w.base.data[kHc + lane])));
    }
    const Acc c = mix[2 * kHc + i] * inv * Acc(w.scale.data[2]) + Acc(w.base.data[2 * kHc + i]);
    const Acc v = sinkhorn_hc4(c, iters, Acc(hc_eps));
    if (lane < 16) comb[i] = static_cast<float>(v);
}

}  // namespace dsv4::cuda::mhc
