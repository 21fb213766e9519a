// The boundary between two mHC sites in one launch (ModelOps::hc_post_pre, fast numerics): the previous site's
// hc_post X'_k = post_k y + sum_j comb[j][k] X_j (when there is one), this site's raw mixes fn . X' with the sum of
// squares for their RMS and the Gram matrix G_jk = X'_j . X'_k, then, once a token's blocks have all arrived, pre /
// post / Sinkhorn(comb), and the collapse u = sum_j pre_j X'_j with the sub-layer's input RMSNorm. The norm's sum of
// squares is sum_jk pre_j pre_k G_jk, known with pre: the collapse and the norm are one pass.
//
// Each block owns kChannels channels of all hc streams of one token, a thread per channel: the same split at any
// batch size, so a token's results do not depend on its batch. Block partials are summed in channel-chunk order by
// the token's last block, found by a per-token arrival counter. Where the whole grid fits on the device at once
// (decode: a few tokens), every block waits for the token's others, then sums the partials, mixes, and collapses its
// own channels from registers (grid-wide); otherwise the last block collapses the token alone, and at prefill sizes a
// block takes a tile of tokens (the weights loaded once for all of them). All give the same bits. The counter goes
// back to zero within the launch (graphs replay it).
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

// A block's partial row: the mix rows, the sum of squares of X', the Gram entries.
__host__ __device__ constexpr int partial_width(int hc) {
    return (2 + hc) * hc + 1 + hc * (hc + 1) / 2;
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

// The fn weights of one channel for the first row group. They are weights, not written by any kernel, so they are
// loaded before pdl_begin(): their round trip overlaps the previous kernel's tail.
template <int kHc>
struct FnRows {
    float f[row_group<kHc>()][kHc];
};

template <int kHc>
__device__ void load_fn_rows(const HcBoundaryParams& p, int64_t ch, bool live, int r0, FnRows<kHc>& rows) {
    constexpr int kRows = mix_rows<kHc>();
    const int64_t width = kHc * p.d;
#pragma unroll
    for (int g = 0; g < row_group<kHc>(); ++g) {
#pragma unroll
        for (int j = 0; j < kHc; ++j) {
            rows.f[g][j] = live && r0 + g < kRows ? __ldg(p.w.fn.data + (r0 + g) * width + j * p.d + ch) : 0.0f;
        }
    }
}

// One channel's inputs of token t: its streams X and the previous site's output y (0 when there is none).
template <int kHc>
struct ChannelInputs {
    float x[kHc];
    float y;
};

template <int kHc>
__device__ ChannelInputs<kHc> load_channel(const HcBoundaryParams& p, int64_t t, int64_t ch) {
    ChannelInputs<kHc> in;
    const float* xs = p.x + t * kHc * p.d;
#pragma unroll
    for (int j = 0; j < kHc; ++j) in.x[j] = xs[j * p.d + ch];
    in.y = p.prev_y != nullptr ? p.prev_y[t * p.d + ch] : 0.0f;
    return in;
}

// The new streams of one channel from its inputs (hc_post of the previous site; X unchanged when there is none),
// written back.
template <int kHc>
__device__ void post_mix_inputs(const HcBoundaryParams& p, int64_t t, int64_t ch, const ChannelInputs<kHc>& in,
                                float (&x)[kHc]) {
#pragma unroll
    for (int j = 0; j < kHc; ++j) x[j] = in.x[j];
    if (p.prev_y == nullptr) return;
    float* xs = p.x + t * kHc * p.d;
    const float* c = p.prev_comb + t * kHc * kHc;
    const float y = in.y;
    float out[kHc];
#pragma unroll
    for (int k = 0; k < kHc; ++k) {
        // Explicit roundings: post * y + c * x could be contracted into either fma, and the kernels that inline this
        // must all give the same bits (tiles and single tokens).
        float acc = __fmul_rn(p.prev_post[t * kHc + k], y);
#pragma unroll
        for (int j = 0; j < kHc; ++j) acc = __fmaf_rn(c[j * kHc + k], x[j], acc);
        out[k] = acc;
    }
#pragma unroll
    for (int k = 0; k < kHc; ++k) {
        x[k] = out[k];
        xs[k * p.d + ch] = out[k];
    }
}

template <int kHc>
__device__ void post_mix_channel(const HcBoundaryParams& p, int64_t t, int64_t ch, float (&x)[kHc]) {
    post_mix_inputs<kHc>(p, t, ch, load_channel<kHc>(p, t, ch), x);
}

// Warp sums of one row group's products fn_r . x into red[warp][r].
template <int kHc, int kWidth>
__device__ void row_group_sums(const FnRows<kHc>& rows, int r0, const float (&x)[kHc], float (*red)[kWidth]) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
    for (int g = 0; g < row_group<kHc>(); ++g) {
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < kHc; ++j) s = __fmaf_rn(rows.f[g][j], x[j], s);
        s = warp_sum(s);
        if (lane == 0 && r0 + g < mix_rows<kHc>()) red[warp][r0 + g] = s;
    }
}

// Warp sums of 32 values a lane, lane l ending with the sum of v[l]: each step halves the values a lane holds and
// sends the half its partner keeps (31 shuffles for the 32 sums instead of 160). The additions form warp_sum's tree
// (partners lane ^ 16, then ^ 8, ...), so each sum has warp_sum's bits.
__device__ __forceinline__ float warp_sums_scattered(float (&v)[32]) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int step = 0; step < 5; ++step) {
        const int o = 16 >> step;
        const bool upper = (lane & o) != 0;
#pragma unroll
        for (int i = 0; i < 16; ++i) {  // a constant trip count, so that v stays in registers
            if (i >= o) break;
            const float send = upper ? v[i] : v[i + o];
            const float keep = upper ? v[i + o] : v[i];
            v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
    }
    return v[0];
}

// block_partials where every mix row is in the first row group and there are at least 32 partials (hc = 4): the
// lane's products, then the first 32 warp sums scattered over the lanes. The same products and trees: the same bits.
template <int kHc, int kWidth>
__device__ void block_partials_scattered(const float (&x)[kHc], const FnRows<kHc>& first, float (*red)[kWidth]) {
    constexpr int kRows = mix_rows<kHc>();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v[kWidth];
#pragma unroll
    for (int g = 0; g < kRows; ++g) {
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < kHc; ++j) s = __fmaf_rn(first.f[g][j], x[j], s);
        v[g] = s;
    }
    float sq = 0.0f;
#pragma unroll
    for (int j = 0; j < kHc; ++j) sq = __fmaf_rn(x[j], x[j], sq);
    v[kRows] = sq;
    int e = kRows + 1;
#pragma unroll
    for (int j = 0; j < kHc; ++j) {
#pragma unroll
        for (int k = j; k < kHc; ++k, ++e) v[e] = x[j] * x[k];
    }
    float low[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) low[i] = v[i];
    red[warp][lane] = warp_sums_scattered(low);
#pragma unroll
    for (int i = 32; i < kWidth; ++i) {
        const float total = warp_sum(v[i]);
        if (lane == 0) red[warp][i] = total;
    }
}

// This block's partial of every mix row (fn . X' over its channels), of the sum of squares and of the Gram entries,
// reduced over each warp into red[warp][.]. `first` holds the first row group's weights, loaded already.
template <int kHc, int kWidth>
__device__ void block_partials(const HcBoundaryParams& p, int64_t ch, bool live, const float (&x)[kHc],
                               const FnRows<kHc>& first, float (*red)[kWidth]) {
    constexpr int kRows = mix_rows<kHc>();
    if constexpr (kRows <= row_group<kHc>() && kWidth >= 32) {
        block_partials_scattered<kHc, kWidth>(x, first, red);
        return;
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    row_group_sums<kHc, kWidth>(first, 0, x, red);
    for (int r0 = row_group<kHc>(); r0 < kRows; r0 += row_group<kHc>()) {
        FnRows<kHc> rows;
        load_fn_rows<kHc>(p, ch, live, r0, rows);
        row_group_sums<kHc, kWidth>(rows, r0, x, red);
    }
    float sq = 0.0f;
#pragma unroll
    for (int j = 0; j < kHc; ++j) sq = __fmaf_rn(x[j], x[j], sq);
    sq = warp_sum(sq);
    if (lane == 0) red[warp][kRows] = sq;
    int e = kRows + 1;
#pragma unroll
    for (int j = 0; j < kHc; ++j) {
#pragma unroll
        for (int k = j; k < kHc; ++k, ++e) {
            const float g = warp_sum(x[j] * x[k]);
            if (lane == 0) red[warp][e] = g;
        }
    }
}

// The block's partial row: the warps' sums added in warp order.
template <int kWidth>
__device__ void store_block_partial(const float (*red)[kWidth], float* partial) {
    for (int r = threadIdx.x; r < kWidth; r += blockDim.x) {
        float s = 0.0f;
        for (int w = 0; w < kWarps; ++w) s += red[w][r];
        partial[r] = s;
    }
}

// Entry r of a token's partial rows added in chunk order, sixteen chunks' loads in flight at once (all of them at
// D = 4096: this is on the critical path, the other blocks of the token wait for it).
template <int kWidth>
__device__ __forceinline__ float partial_sum(const float* partial, int chunks, int r) {
    float s = 0.0f;
    batched_loads<16>(
        0, chunks, 1, [&](int c) { return __ldcg(partial + static_cast<int64_t>(c) * kWidth + r); },
        [&](int, float v) { s += v; });
    return s;
}

// Every entry of the token's partial rows summed (partial_sum).
template <int kWidth>
__device__ void sum_partials(const float* partial, int chunks, float* mix) {
    for (int r = threadIdx.x; r < kWidth; r += blockDim.x) mix[r] = partial_sum<kWidth>(partial, chunks, r);
}

// 1 / RMS(u) for u = sum_j pre_j X'_j: |u|^2 = sum_jk pre_j pre_k G_jk (in double: the terms can cancel; clamped at 0).
template <int kHc>
__device__ float collapsed_inv_rms(const float* gram, const float* pre, int64_t d, float eps) {
    double ss = 0.0;
    int e = 0;
#pragma unroll
    for (int j = 0; j < kHc; ++j) {
#pragma unroll
        for (int k = j; k < kHc; ++k, ++e) {
            const double term = static_cast<double>(pre[j]) * pre[k] * gram[e];
            ss += j == k ? term : 2.0 * term;
        }
    }
    const float mean = static_cast<float>(fmax(ss, 0.0)) / static_cast<float>(d);
    return 1.0f / sqrtf(mean + eps);
}

// u's channel: (sum_j pre_j X'_j) * inv * norm, the same arithmetic on both paths.
template <int kHc>
__device__ __forceinline__ float collapsed_channel(const float* pre, const float (&x)[kHc], float inv, float norm) {
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kHc; ++j) acc = __fmaf_rn(pre[j], x[j], acc);
    return acc * inv * norm;
}

// Last block of a token, when the grid does not fit: every channel's collapse and norm, kCollapseUnroll channels'
// loads in flight at once.
template <int kHc>
__device__ void collapse_all(const HcBoundaryParams& p, int64_t t, const float* pre, float inv) {
    const float* xs = p.x + t * kHc * p.d;
    float* u = p.u + t * p.d;
    for (int64_t i0 = threadIdx.x; i0 < p.d; i0 += kCollapseUnroll * kChannels) {
        float v[kCollapseUnroll][kHc], w[kCollapseUnroll];
#pragma unroll
        for (int k = 0; k < kCollapseUnroll; ++k) {
            const int64_t i = i0 + k * kChannels;
#pragma unroll
            for (int j = 0; j < kHc; ++j) v[k][j] = i < p.d ? __ldcg(xs + j * p.d + i) : 0.0f;  // X' of other blocks
            w[k] = i < p.d ? __ldg(p.norm_weight + i) : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < kCollapseUnroll; ++k) {
            const int64_t i = i0 + k * kChannels;
            if (i < p.d) u[i] = collapsed_channel<kHc>(pre, v[k], inv, w[k]);
        }
    }
}

// The mix weights' base and scale in shared memory: loaded by every block before pdl_begin() (weights), so that the
// token's last block does not wait a memory round trip for them.
template <int kHc>
struct MixVectors {
    float base[mix_rows<kHc>()];
    float scale[3];
};

template <int kHc>
__device__ void load_mix_vectors(const MhcWeights& w, MixVectors<kHc>& v) {
    for (int i = threadIdx.x; i < mix_rows<kHc>() + 3; i += blockDim.x) {
        if (i < mix_rows<kHc>()) {
            v.base[i] = __ldg(w.base.data + i);
        } else {
            v.scale[i - mix_rows<kHc>()] = __ldg(w.scale.data + i - mix_rows<kHc>());
        }
    }
}

// One warp (all its lanes call): pre / post / comb from a token's summed mixes and the norm's scale, pre[0..hc) =
// pre, pre[hc] = the scale (shared memory); post and comb into post_t / comb_t.
template <int kHc>
__device__ void finish_token_warp(const HcBoundaryParams& p, const float* mix, const MixVectors<kHc>& vectors,
                                  float* pre, float* post_t, float* comb_t) {
    MhcWeights w = p.w;
    w.base.data = vectors.base;
    w.scale.data = vectors.scale;
    constexpr int kRows = mix_rows<kHc>();
    const float inv = 1.0f / sqrtf(mix[kRows] / static_cast<float>(kHc * p.d) + p.norm_eps);
    const int lane = static_cast<int>(threadIdx.x % 32);
    if constexpr (kHc == 4) {  // DeepSeek-V4's hc_mult
        mhc::mix_token_hc4<float>(mix, inv, w, p.iters, p.hc_eps, pre, post_t, comb_t);
    } else if (lane == 0) {
        mhc::mix_token<float>(mix, inv, kHc, w, p.iters, p.hc_eps, pre, post_t, comb_t);
    }
    __syncwarp();
    if (lane == 0) pre[kHc] = collapsed_inv_rms<kHc>(mix + kRows + 1, pre, p.d, p.norm_eps);
}

// The token's finish (finish_token_warp) by warp 0, then a block barrier. `store`: this block writes post and comb
// (blocks that compute them too keep theirs in shared memory).
template <int kHc>
__device__ void finish_token(const HcBoundaryParams& p, int64_t t, const float* mix, const MixVectors<kHc>& vectors,
                             bool store, float* pre) {
    __shared__ float discarded[kHc + kHc * kHc];
    if (threadIdx.x < 32) {
        finish_token_warp<kHc>(p, mix, vectors, pre, store ? p.post + t * kHc : discarded,
                               store ? p.comb + t * kHc * kHc : discarded + kHc);
    }
    __syncthreads();
}

// Grid-wide path: counts this block in, then waits until the token's every block has (its partials are then visible).
__device__ void await_all_blocks(unsigned* arrivals, int chunks) {
    if (threadIdx.x == 0) {
        atomicAdd(arrivals, 1u);
        const volatile unsigned* counter = arrivals;
        while (*counter < static_cast<unsigned>(chunks)) {
        }
        __threadfence();
    }
    __syncthreads();
}

template <int kHc, bool kGridWide>
__global__ void __launch_bounds__(kChannels) hc_boundary_kernel(HcBoundaryParams p) {
    constexpr int kWidth = partial_width(kHc);
    __shared__ float red[kWarps][kWidth];
    __shared__ float mix[kWidth];
    __shared__ float pre[kHc + 1];  // pre, then the norm's scale
    __shared__ MixVectors<kHc> vectors;
    __shared__ bool last;
    const int chunks = static_cast<int>(hc_boundary_chunks(p.d));
    const int64_t t = blockIdx.x / chunks;
    const int chunk = static_cast<int>(blockIdx.x % chunks);
    const int64_t ch = static_cast<int64_t>(chunk) * kChannels + threadIdx.x;
    const bool live = ch < p.d;
    FnRows<kHc> first;
    load_fn_rows<kHc>(p, ch, live, 0, first);
    const float norm = kGridWide && live ? __ldg(p.norm_weight + ch) : 0.0f;
    load_mix_vectors<kHc>(p.w, vectors);
    pdl_begin();
    float x[kHc] = {};
    if (live) post_mix_channel<kHc>(p, t, ch, x);
    block_partials<kHc, kWidth>(p, ch, live, x, first, red);
    __syncthreads();
    store_block_partial<kWidth>(red, p.partial + (t * chunks + chunk) * kWidth);
    __threadfence();  // this block's X' and partials are visible device-wide before it counts itself in
    __syncthreads();
    unsigned* arrivals = p.arrivals + t;
    const float* partials = p.partial + t * chunks * kWidth;
    if constexpr (kGridWide) {
        // Every block sums the partials and mixes (the same bits in each) once all have arrived: nobody waits for
        // another block to publish. The last to leave resets the counter (it has passed `chunks` by then).
        await_all_blocks(arrivals, chunks);
        sum_partials<kWidth>(partials, chunks, mix);
        __syncthreads();
        finish_token<kHc>(p, t, mix, vectors, chunk == 0, pre);
        if (threadIdx.x == 0 && atomicAdd(arrivals, 1u) == 2u * static_cast<unsigned>(chunks) - 1u) *arrivals = 0;
        if (live) p.u[t * p.d + ch] = collapsed_channel<kHc>(pre, x, pre[kHc], norm);
    } else {
        if (threadIdx.x == 0) last = atomicAdd(arrivals, 1u) == static_cast<unsigned>(chunks - 1);
        __syncthreads();
        if (!last) return;
        __threadfence();
        sum_partials<kWidth>(partials, chunks, mix);
        __syncthreads();
        finish_token<kHc>(p, t, mix, vectors, true, pre);
        collapse_all<kHc>(p, t, pre, pre[kHc]);
        if (threadIdx.x == 0) *arrivals = 0;  // ready for the next launch
    }
}

constexpr int kTileTokens = 8;  // tokens a block of the tiled kernel takes (below)
static_assert(kTileTokens == kWarps, "finish_tile: a warp a tile token");

// The tile tokens a block is last for (bits of `last`), all at once: their partials summed (a thread per token and
// row), each token's pre / post / comb by its own warp (warp i: tile token i) and its norm scale, then the collapses.
// Token by token, the last block's single warp ran Sinkhorn for up to eight tokens in turn while the others idled.
// Each token's arithmetic is finish_token's: the same bits.
template <int kHc>
__device__ void finish_tile(const HcBoundaryParams& p, int64_t t0, unsigned last, int chunks,
                            const MixVectors<kHc>& vectors) {
    constexpr int kWidth = partial_width(kHc);
    __shared__ float mix[kTileTokens][kWidth];
    __shared__ float pre[kTileTokens][kHc + 1];  // pre, then the norm's scale
    __threadfence();
    for (int f = static_cast<int>(threadIdx.x); f < kTileTokens * kWidth; f += static_cast<int>(blockDim.x)) {
        const int i = f / kWidth, r = f % kWidth;
        if ((last >> i & 1u) == 0) continue;
        mix[i][r] = partial_sum<kWidth>(p.partial + (t0 + i) * chunks * kWidth, chunks, r);
    }
    __syncthreads();
    const int warp = static_cast<int>(threadIdx.x / 32);
    if ((last >> warp & 1u) != 0) {
        const int64_t t = t0 + warp;
        finish_token_warp<kHc>(p, mix[warp], vectors, pre[warp], p.post + t * kHc, p.comb + t * kHc * kHc);
    }
    __syncthreads();
    for (int i = 0; i < kTileTokens; ++i) {
        if ((last >> i & 1u) == 0) continue;
        collapse_all<kHc>(p, t0 + i, pre[i], pre[i][kHc]);
        if (threadIdx.x == 0) p.arrivals[t0 + i] = 0;  // ready for the next launch
    }
}

// Steps of many tokens (prefill): a block takes kTileTokens tokens of its channel chunk, so each fn weight is loaded
// once for the tile rather than once a token (at 2K-8K tokens the weights' reloads were most of the boundary's memory
// traffic: 96 KB a block and token). Each token's arithmetic and summation order are the per-token path's, so the bits
// are the same; the last block to finish any token of the tile finishes and collapses it (finish_tile).
template <int kHc>
__global__ void __launch_bounds__(kChannels, kHc <= 4 ? 2 : 1) hc_boundary_tiled_kernel(HcBoundaryParams p) {
    constexpr int kWidth = partial_width(kHc);
    __shared__ float red[kWarps][kWidth];
    __shared__ MixVectors<kHc> vectors;
    __shared__ unsigned last_of;  // bit i: this block is the last of tile token i
    const int chunks = static_cast<int>(hc_boundary_chunks(p.d));
    const int64_t t0 = static_cast<int64_t>(blockIdx.x / chunks) * kTileTokens;
    const int chunk = static_cast<int>(blockIdx.x % chunks);
    const int64_t ch = static_cast<int64_t>(chunk) * kChannels + threadIdx.x;
    const bool live = ch < p.d;
    const int tokens = static_cast<int>(min64(kTileTokens, p.n - t0));
    FnRows<kHc> first;
    load_fn_rows<kHc>(p, ch, live, 0, first);
    load_mix_vectors<kHc>(p.w, vectors);
    if (threadIdx.x == 0) last_of = 0;
    pdl_begin();
    ChannelInputs<kHc> next{};
    if (live) next = load_channel<kHc>(p, t0, ch);
    for (int i = 0; i < tokens; ++i) {
        const int64_t t = t0 + i;
        const ChannelInputs<kHc> in = next;
        if (live && i + 1 < tokens) next = load_channel<kHc>(p, t + 1, ch);  // in flight while this token reduces
        float x[kHc] = {};
        if (live) post_mix_inputs<kHc>(p, t, ch, in, x);
        block_partials<kHc, kWidth>(p, ch, live, x, first, red);
        __syncthreads();
        store_block_partial<kWidth>(red, p.partial + (t * chunks + chunk) * kWidth);
        __syncthreads();  // red is the next token's
    }
    __threadfence();  // this block's X' and partials are visible device-wide before it counts itself in
    __syncthreads();
    if (threadIdx.x < tokens && atomicAdd(p.arrivals + t0 + threadIdx.x, 1u) == static_cast<unsigned>(chunks - 1)) {
        atomicOr(&last_of, 1u << threadIdx.x);
    }
    __syncthreads();
    if (last_of != 0) finish_tile<kHc>(p, t0, last_of, chunks, vectors);
}

// Blocks of the grid-wide kernel that can be resident at once (where a launch fits, its waits always end): the
// kernel's occupancy times the SMs, looked up once per hc.
template <int kHc>
int64_t resident_blocks() {
    static const int64_t capacity = [] {
        int device = 0, sms = 0, per_sm = 0;
        if (cudaGetDevice(&device) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, hc_boundary_kernel<kHc, true>, kChannels, 0) !=
                cudaSuccess) {
            cudaGetLastError();
            return int64_t{0};
        }
        return static_cast<int64_t>(sms) * per_sm;
    }();
    return capacity;
}

// Grid-wide where the grid fits (decode); token tiles where they still fill the device once (prefill); otherwise a
// block per token and chunk.
template <int kHc>
void launch_boundary(cudaStream_t s, const HcBoundaryParams& p) {
    const int64_t chunks = hc_boundary_chunks(p.d), blocks = p.n * chunks;
    const int64_t tiled = (p.n + kTileTokens - 1) / kTileTokens * chunks;
    if (blocks <= resident_blocks<kHc>()) {
        launch_kernel(hc_boundary_kernel<kHc, true>, static_cast<unsigned>(blocks), kChannels, 0, s, p);
    } else if (tiled >= resident_blocks<kHc>()) {
        launch_kernel(hc_boundary_tiled_kernel<kHc>, static_cast<unsigned>(tiled), kChannels, 0, s, p);
    } else {
        launch_kernel(hc_boundary_kernel<kHc, false>, static_cast<unsigned>(blocks), kChannels, 0, s, p);
    }
}

}  // namespace

int64_t hc_boundary_partials(int64_t n, int hc, int64_t d) {
    return n * hc_boundary_chunks(d) * partial_width(hc);
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
