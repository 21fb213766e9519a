// Element-wise and row-wise ops: embedding, RMSNorm, RoPE, scaling, row gathers, and the reference-numerics
// roundings of the K=V rows and indexer queries.
#include <cmath>

#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_sim.cuh"

namespace dsv4::cuda {
namespace {

__global__ void embed_kernel(StepMeta m, const uint16_t* table, int64_t d, int hc, float* x) {
    const int t = blockIdx.x;
    const uint16_t* row = table + static_cast<int64_t>(m.tokens[t]) * d;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        const float v = bf16_bits_to_float(row[i]);
        for (int s = 0; s < hc; ++s) x[(static_cast<int64_t>(t) * hc + s) * d + i] = v;
    }
}

// Acc: the numerics mode's arithmetic (cuda_common.cuh); `round`: bf16 outputs (reference numerics).
template <typename Acc>
__global__ void rms_norm_kernel(const float* x, const float* weight, int64_t k, float eps, bool round, float* y) {
    __shared__ Acc scratch[32];
    const float* in = x + blockIdx.x * k;
    float* out = y + blockIdx.x * k;
    Acc sum = 0;
    for (int64_t i = threadIdx.x; i < k; i += blockDim.x) sum += Acc(in[i]) * in[i];
    sum = block_sum(sum, scratch);
    const Acc inv = Acc(1) / sqrt_acc(sum / static_cast<Acc>(k) + Acc(eps));
    for (int64_t i = threadIdx.x; i < k; i += blockDim.x) {
        Acc v = in[i] * inv;
        if (weight != nullptr) v *= weight[i];
        out[i] = store_acc(v, round);
    }
}

// One thread per (token, head, pair): interleaved pairs on the trailing rope_dim dims.
template <typename Acc>
__global__ void rope_kernel(StepMeta m, float* x, int heads, int dim, int rope_dim, const float* inv_freq, bool inverse,
                            bool round) {
    const int pairs = rope_dim / 2;
    const int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    const int64_t total = static_cast<int64_t>(m.n_tokens) * heads * pairs;
    if (id >= total) return;
    const int i = static_cast<int>(id % pairs);
    const int64_t th = id / pairs;
    const int t = static_cast<int>(th / heads);
    const float angle = static_cast<float>(m.positions[t]) * inv_freq[i];  // float32 product, as the reference
    const float c = static_cast<float>(cos(static_cast<double>(angle)));
    float s = static_cast<float>(sin(static_cast<double>(angle)));
    if (inverse) s = -s;
    float* v = x + th * dim + (dim - rope_dim) + 2 * i;
    const Acc a = v[0], b = v[1];
    v[0] = store_acc(a * c - b * s, round);
    v[1] = store_acc(b * c + a * s, round);
}

__global__ void scale_kernel(float* x, int64_t n, float factor) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < n) x[i] *= factor;
}

__global__ void round_bf16_kernel(float* x, int64_t n) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < n) x[i] = to_bf16(x[i]);
}

__global__ void gather_rows_kernel(const float* x, const int32_t* rows, int64_t width, float* y) {
    const float* src = x + static_cast<int64_t>(rows[blockIdx.x]) * width;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) y[blockIdx.x * width + i] = src[i];
}

// One block per row: each thread scans a strided slice, then the block reduces (value, index) pairs; a row holding
// NaN or +inf, or only -inf, has no choice (kNoArgmax), as on the host.
__global__ void argmax_rows_kernel(const float* x, int64_t cols, int32_t* out) {
    const float* row = x + static_cast<int64_t>(blockIdx.x) * cols;
    float best = -INFINITY;
    int32_t best_i = 0;
    bool fault = false;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
        const float v = row[i];
        fault |= !(v < INFINITY);  // NaN or +inf
        if (argmax_better(v, static_cast<int32_t>(i), best, best_i)) best = v, best_i = static_cast<int32_t>(i);
    }
    fault = __syncthreads_or(fault);
    for (int offset = 16; offset > 0; offset /= 2) {
        const float v = __shfl_down_sync(0xffffffffu, best, offset);
        const int32_t i = __shfl_down_sync(0xffffffffu, best_i, offset);
        if (argmax_better(v, i, best, best_i)) best = v, best_i = i;
    }
    __shared__ float warp_best[32];
    __shared__ int32_t warp_index[32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) warp_best[warp] = best, warp_index[warp] = best_i;
    __syncthreads();
    if (threadIdx.x != 0) return;
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) {
        if (argmax_better(warp_best[w], warp_index[w], best, best_i)) best = warp_best[w], best_i = warp_index[w];
    }
    out[blockIdx.x] = fault || best == -INFINITY ? kArgmaxNoChoice : best_i;
}

// One warp per row: FP8-sim of the first `nope` dims in blocks of 64.
__global__ void kv_cache_sim_kernel(float* kv, int64_t rows, int dim, int nope, Fp8QuantDev quant) {
    const int64_t row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    warp_block_sim(kv + row * dim, nope, 64, 0, true, quant);
}

// One warp per (token, head) row: Hadamard rotation, then FP4-sim in blocks of 32.
__global__ void indexer_query_sim_kernel(float* q, int64_t rows, int dim) {
    const int64_t row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    warp_hadamard(q + row * dim, dim);
    warp_block_sim(q + row * dim, dim, 32, 1, true);
}

}  // namespace

void launch_embed(cudaStream_t s, const StepMeta& m, const uint16_t* table, int64_t d, int hc, float* x) {
    if (m.n_tokens > 0) embed_kernel<<<static_cast<unsigned>(m.n_tokens), 256, 0, s>>>(m, table, d, hc, x);
}

void launch_rms_norm(cudaStream_t s, const float* x, const float* weight, int64_t rows, int64_t k, float eps,
                     bool reference, float* y) {
    if (rows == 0) return;
    if (reference) {
        rms_norm_kernel<double><<<static_cast<unsigned>(rows), 256, 0, s>>>(x, weight, k, eps, true, y);
    } else {
        rms_norm_kernel<float><<<static_cast<unsigned>(rows), 256, 0, s>>>(x, weight, k, eps, false, y);
    }
}

void launch_rope(cudaStream_t s, const StepMeta& m, float* x, int heads, int dim, int rope_dim, const float* inv_freq,
                 bool inverse, bool reference) {
    const int64_t total = static_cast<int64_t>(m.n_tokens) * heads * (rope_dim / 2);
    if (total == 0) return;
    const unsigned blocks = blocks_for(total, 256);
    if (reference) {
        rope_kernel<double><<<blocks, 256, 0, s>>>(m, x, heads, dim, rope_dim, inv_freq, inverse, true);
    } else {
        rope_kernel<float><<<blocks, 256, 0, s>>>(m, x, heads, dim, rope_dim, inv_freq, inverse, false);
    }
}

void launch_scale(cudaStream_t s, float* x, int64_t n, float factor) {
    if (n > 0) scale_kernel<<<blocks_for(n, 256), 256, 0, s>>>(x, n, factor);
}

void launch_round_bf16(cudaStream_t s, float* x, int64_t n) {
    if (n > 0) round_bf16_kernel<<<blocks_for(n, 256), 256, 0, s>>>(x, n);
}

void launch_gather_rows(cudaStream_t s, const float* x, const int32_t* rows, int64_t n_rows, int64_t width, float* y) {
    if (n_rows > 0) gather_rows_kernel<<<static_cast<unsigned>(n_rows), 256, 0, s>>>(x, rows, width, y);
}

void launch_argmax_rows(cudaStream_t s, const float* x, int64_t rows, int64_t cols, int32_t* out) {
    if (rows > 0) argmax_rows_kernel<<<static_cast<unsigned>(rows), 256, 0, s>>>(x, cols, out);
}

void launch_kv_cache_sim(cudaStream_t s, float* kv, int64_t rows, int dim, int nope, Fp8QuantDev quant) {
    if (rows > 0) kv_cache_sim_kernel<<<blocks_for(rows, 4), 128, 0, s>>>(kv, rows, dim, nope, quant);
}

void launch_indexer_query_sim(cudaStream_t s, float* q, int64_t rows, int dim) {
    if (rows > 0) indexer_query_sim_kernel<<<blocks_for(rows, 4), 128, 0, s>>>(q, rows, dim);
}

}  // namespace dsv4::cuda
