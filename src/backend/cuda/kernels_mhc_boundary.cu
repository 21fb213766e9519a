// The boundary between two mHC sites in one launch (ModelOps::hc_post_pre, fast numerics): the previous site's
// hc_post X'_k = post_k y + sum_j comb[j][k] X_j (when there is one), this site's raw mixes fn . X' with the sum of
// squares for their RMS, and then, in the last block of each token to arrive, pre / post / Sinkhorn(comb), the
// collapse u = sum_j pre_j X'_j and the sub-layer's input RMSNorm. Five launches before (hc_post, two for the
// mixes, hc_pre's finish, rms_norm).
//
// Each block owns kChannels channels of all hc streams of one token, a thread per channel: the same split at any
// batch size, so a token's results do not depend on its batch. Block partials are summed in channel-chunk order by
// the token's last block, found by a per-token arrival counter that block resets (graphs replay the launch).
#include "backend/cuda/kernels.h"
#include "backend/cuda/mhc_mix.cuh"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kChannels = 256;  // channels per block, one per thread: 16 blocks a token at D = 4096
constexpr int kWarps = kChannels / 32;
constexpr int kCollapseUnroll = 4;  // channels whose loads are in flight together in the last block's collapse

template <int kHc>
constexpr int mix_rows() {
    return (2 + kHc) * kHc;
}

// Blocks a token: its channels in kChannels chunks.
__host__ __device__ inline int64_t hc_boundary_chunks(int64_t d) {
    return (d + kChannels - 1) / kChannels;
}

// Mix rows whose fn loads are in flight together: ~96 loads a thread (all 24 rows at hc = 4: one round trip).
template <int kHc>
constexpr int row_group() {
    return mix_rows<kHc>() < 96 / kHc ? mix_rows<kHc>() : 96 / kHc;
}

// The new streams of one channel (hc_post of the previous site; X unchanged when there is none), written back.
template <int kHc>
__device__ void post_mix_channel(const HcBoundaryParams& p, int64_t t, int64_t ch, float* xs, float (&x)[kHc]) {
#pragma unroll
    for (int j = 0; j < kHc; ++j) x[j] = xs[j * p.d + ch];
    if (p.prev_y == nullptr) return;
    const float* c = p.prev_comb + t * kHc * kHc;
    const float y = p.prev_y[t * p.d + ch];
    float out[kHc];
#pragma unroll
    for (int k = 0; k < kHc; ++k) {
        float acc = p.prev_post[t * kHc + k] * y;
#pragma unroll
        for (int j = 0; j < kHc; ++j) acc += c[j * kHc + k] * x[j];
        out[k] = acc;
    }
#pragma unroll
    for (int k = 0; k < kHc; ++k) {
        x[k] = out[k];
        xs[k * p.d + ch] = out[k];
    }
}

// This block's partial of every mix row (fn . X' over its channels) and of the sum of squares, reduced over the
// block into red[r] (r = mix_rows() for the squares).
template <int kHc>
__device__ void block_partials(const HcBoundaryParams& p, int64_t ch, bool live, const float (&x)[kHc],
                               float (*red)[mix_rows<kHc>() + 1]) {
    constexpr int kRows = mix_rows<kHc>();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    constexpr int kRowGroup = row_group<kHc>();
    const int64_t width = kHc * p.d;
    for (int r0 = 0; r0 < kRows; r0 += kRowGroup) {
        float f[kRowGroup][kHc];
#pragma unroll
        for (int g = 0; g < kRowGroup; ++g) {
#pragma unroll
            for (int j = 0; j < kHc; ++j) {
                f[g][j] = live && r0 + g < kRows ? __ldg(p.w.fn.data + (r0 + g) * width + j * p.d + ch) : 0.0f;
            }
        }
#pragma unroll
        for (int g = 0; g < kRowGroup; ++g) {
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < kHc; ++j) s += f[g][j] * x[j];
            s = warp_sum(s);
            if (lane == 0 && r0 + g < kRows) red[warp][r0 + g] = s;
        }
    }
    float sq = 0.0f;
#pragma unroll
    for (int j = 0; j < kHc; ++j) sq += x[j] * x[j];
    sq = warp_sum(sq);
    if (lane == 0) red[warp][kRows] = sq;
}

// Last block of a token: u = sum_j pre_j X'_j, then u = u * rsqrt(mean(u^2) + eps) * norm (rms_norm's arithmetic).
template <int kHc>
__device__ void collapse_and_norm(const HcBoundaryParams& p, int64_t t, const float* pre, float* scratch) {
    const float* xs = p.x + t * kHc * p.d;
    float* u = p.u + t * p.d;
    float sq = 0.0f;
    for (int64_t i0 = threadIdx.x; i0 < p.d; i0 += kCollapseUnroll * kChannels) {
        float v[kCollapseUnroll][kHc];
#pragma unroll
        for (int k = 0; k < kCollapseUnroll; ++k) {
            const int64_t i = i0 + k * kChannels;
#pragma unroll
            for (int j = 0; j < kHc; ++j) v[k][j] = i < p.d ? __ldcg(xs + j * p.d + i) : 0.0f;  // X' of other blocks
        }
#pragma unroll
        for (int k = 0; k < kCollapseUnroll; ++k) {
            const int64_t i = i0 + k * kChannels;
            float acc = 0.0f;
#pragma unroll
            for (int j = 0; j < kHc; ++j) acc += pre[j] * v[k][j];
            if (i < p.d) u[i] = acc;
            sq += acc * acc;
        }
    }
    sq = block_sum(sq, scratch);
    const float inv = 1.0f / sqrtf(sq / static_cast<float>(p.d) + p.norm_eps);
    // The norm pass with kCollapseUnroll channels' loads in flight (one at a time it was a round trip a channel).
    batched_loads<kCollapseUnroll>(
        int64_t{threadIdx.x}, p.d, int64_t{kChannels}, [&](int64_t i) { return make_float2(u[i], p.norm_weight[i]); },
        [&](int64_t i, float2 v) { u[i] = v.x * inv * v.y; });
}

// The token's mix rows and sum of squares: the blocks' partials added in chunk order, eight chunks' loads in flight
// at once (a chunk at a time, 16 dependent round trips at D = 4096).
template <int kRows>
__device__ void sum_partials(const float* partial, int chunks, float* mix) {
    for (int r = threadIdx.x; r <= kRows; r += blockDim.x) {
        float s = 0.0f;
        batched_loads<8>(
            0, chunks, 1, [&](int c) { return __ldcg(partial + static_cast<int64_t>(c) * (kRows + 1) + r); },
            [&](int, float v) { s += v; });
        mix[r] = s;
    }
}

template <int kHc>
__global__ void __launch_bounds__(kChannels) hc_boundary_kernel(HcBoundaryParams p) {
    pdl_begin();
    constexpr int kRows = mix_rows<kHc>();
    __shared__ float red[kWarps][kRows + 1];
    __shared__ float mix[kRows + 1];
    __shared__ float pre[kHc];
    __shared__ float scratch[32];
    __shared__ bool last;
    const int chunks = static_cast<int>(hc_boundary_chunks(p.d));
    const int64_t t = blockIdx.x / chunks;
    const int chunk = static_cast<int>(blockIdx.x % chunks);
    const int64_t ch = static_cast<int64_t>(chunk) * kChannels + threadIdx.x;
    const bool live = ch < p.d;
    float x[kHc] = {};
    if (live) post_mix_channel<kHc>(p, t, ch, p.x + t * kHc * p.d, x);
    block_partials<kHc>(p, ch, live, x, red);
    __syncthreads();
    float* partial = p.partial + (t * chunks + chunk) * (kRows + 1);
    for (int r = threadIdx.x; r <= kRows; r += blockDim.x) {
        float s = 0.0f;
        for (int w = 0; w < kWarps; ++w) s += red[w][r];
        partial[r] = s;
    }
    __threadfence();  // this block's X' and partials are visible device-wide before it counts itself in
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(p.arrivals + t, 1u) == static_cast<unsigned>(chunks - 1);
    __syncthreads();
    if (!last) return;
    __threadfence();
    sum_partials<kRows>(p.partial + t * chunks * (kRows + 1), chunks, mix);
    __syncthreads();
    const float inv = 1.0f / sqrtf(mix[kRows] / static_cast<float>(kHc * p.d) + p.norm_eps);
    float* post_t = p.post + t * kHc;
    float* comb_t = p.comb + t * kHc * kHc;
    if constexpr (kHc == 4) {  // DeepSeek-V4's hc_mult
        if (threadIdx.x < 32) mhc::mix_token_hc4<float>(mix, inv, p.w, p.iters, p.hc_eps, pre, post_t, comb_t);
    } else if (threadIdx.x == 0) {
        mhc::mix_token<float>(mix, inv, kHc, p.w, p.iters, p.hc_eps, pre, post_t, comb_t);
    }
    __syncthreads();
    collapse_and_norm<kHc>(p, t, pre, scratch);
    if (threadIdx.x == 0) p.arrivals[t] = 0;  // ready for the next launch
}

template <int kHc>
void launch_boundary(cudaStream_t s, const HcBoundaryParams& p) {
    const auto blocks = static_cast<unsigned>(p.n * hc_boundary_chunks(p.d));
    launch_kernel(hc_boundary_kernel<kHc>, blocks, kChannels, 0, s, p);
}

}  // namespace

int64_t hc_boundary_partials(int64_t n, int hc, int64_t d) {
    return n * hc_boundary_chunks(d) * ((2 + hc) * hc + 1);
}

void launch_hc_boundary(cudaStream_t s, const HcBoundaryParams& p) {
    using Launch = void (*)(cudaStream_t, const HcBoundaryParams&);
    constexpr Launch kByHc[kMaxHcStreams] = {launch_boundary<1>, launch_boundary<2>, launch_boundary<3>,
                                             launch_boundary<4>, launch_boundary<5>, launch_boundary<6>,
                                             launch_boundary<7>, launch_boundary<8>};
    // hc > kMaxHcStreams: CudaBackend::hc_post_pre refuses it first.
    if (p.n > 0 && p.hc >= 1 && p.hc <= kMaxHcStreams) kByHc[p.hc - 1](s, p);
}

}  // namespace dsv4::cuda
