// Element-wise and row-wise ops: embedding, RMSNorm, RoPE, scaling, row gathers, and the reference-numerics
// roundings of the K=V rows and indexer queries.
#include <cuda_bf16.h>

#include <cmath>

#include "backend/cuda/kernels.h"
#include "backend/cuda/norm_rope_row.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quant_sim.cuh"
#include "backend/cuda/state_codec.cuh"

namespace dsv4::cuda {
namespace {

__global__ void embed_kernel(StepMeta m, const uint16_t* table, int64_t d, int hc, float* x) {
    pdl_begin();
    const int t = blockIdx.x;
    const uint16_t* row = table + static_cast<int64_t>(m.tokens[t]) * d;
    batched_loads<8>(
        int64_t{threadIdx.x}, d, int64_t{blockDim.x}, [&](int64_t i) { return bf16_bits_to_float(row[i]); },
        [&](int64_t i, float v) {
            for (int s = 0; s < hc; ++s) x[(static_cast<int64_t>(t) * hc + s) * d + i] = v;
        });
}

// The lines of k floats (null: none) asked into this SM's L1 before the wait for the previous kernel: the norm
// weights and RoPE frequencies its later passes read (constants, never written by a kernel: pdl.cuh), which they then
// find there instead of waiting a DRAM round trip after the norm's reduction. A hint: it changes no value.
__device__ __forceinline__ void prefetch_lines(const float* p, int64_t k) {
    if (p == nullptr) return;
    for (int64_t i = threadIdx.x * 32; i < k; i += blockDim.x * 32)
        asm volatile("prefetch.global.L1 [%0];" ::"l"(p + i));
}

// Acc: the numerics mode's arithmetic (cuda_common.cuh); `round`: bf16 outputs (reference numerics). The row sums'
// order and add_square / rms_inverse: norm_rope_row.cuh.
// One row of RMSNorm by the block: out = in * rsqrt(mean(in^2) + eps) (* weight).
template <typename Acc>
__device__ void rms_norm_row(const float* in, const float* weight, int64_t k, float eps, bool round, float* out,
                             Acc* scratch) {
    Acc sum = 0;
#pragma unroll 4  // the loads of four steps in flight; the sum keeps its order
    for (int64_t i = threadIdx.x; i < k; i += blockDim.x) sum = add_square(sum, in[i]);
    sum = block_sum(sum, scratch);
    const Acc inv = rms_inverse(sum, k, eps);
    for (int64_t i = threadIdx.x; i < k; i += blockDim.x) {
        Acc v = in[i] * inv;
        if (weight != nullptr) v *= weight[i];
        out[i] = store_acc(v, round);
    }
}

template <typename Acc>
__global__ void rms_norm_kernel(const float* x, const float* weight, int64_t k, float eps, bool round, float* y) {
    prefetch_lines(weight, k);
    pdl_begin();
    __shared__ Acc scratch[32];
    rms_norm_row(x + blockIdx.x * k, weight, k, eps, round, y + blockIdx.x * k, &scratch[0]);
}

// One thread per (token, head, pair): interleaved pairs on the trailing rope_dim dims.
template <typename Acc>
__global__ void rope_kernel(StepMeta m, float* x, int heads, int dim, int rope_dim, const float* inv_freq, bool inverse,
                            bool round) {
    pdl_begin();
    const int pairs = rope_dim / 2;
    const int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    const int64_t total = static_cast<int64_t>(m.n_tokens) * heads * pairs;
    if (id >= total) return;
    const int i = static_cast<int>(id % pairs);
    const int64_t th = id / pairs;
    rope_pair<Acc>(m, static_cast<int>(th / heads), i, inv_freq, inverse, round,
                   x + th * dim + (dim - rope_dim) + 2 * i);
}

// rms_norm then rope of one (token, head) row per block, in place: the two kernels' arithmetic in one launch.
template <typename Acc>
__global__ void norm_rope_kernel(StepMeta m, float* x, const float* weight, int heads, int dim, int rope_dim, float eps,
                                 const float* inv_freq, bool round) {
    prefetch_lines(weight, dim);
    prefetch_lines(inv_freq, rope_dim / 2);
    pdl_begin();
    __shared__ Acc scratch[32];
    float* row = x + static_cast<int64_t>(blockIdx.x) * dim;
    rms_norm_row(row, weight, dim, eps, round, row, &scratch[0]);
    __syncthreads();  // the normed row (global memory) is visible to the whole block
    for (int i = threadIdx.x; i < rope_dim / 2; i += blockDim.x) {
        rope_pair<Acc>(m, static_cast<int>(blockIdx.x / heads), i, inv_freq, false, round,
                       row + (dim - rope_dim) + 2 * i);
    }
}

// norm_rope_kernel with a warp a row (kRowsPerBlock rows a block): at prefill a block a 512-float row spent more on
// its barriers and scheduling than on its 4 KB of traffic. The arithmetic is the 256-thread block's, repeated lane by
// lane (norm_rope_row_warp): the same bits.
constexpr int kRowsPerBlock = 8;

template <typename Acc>
__global__ void norm_rope_rows_kernel(StepMeta m, float* x, int64_t rows, const float* weight, int heads, int dim,
                                      int rope_dim, float eps, const float* inv_freq, bool round) {
    prefetch_lines(weight, dim);
    prefetch_lines(inv_freq, rope_dim / 2);
    pdl_begin();
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
    if (r >= rows) return;
    float* row = x + r * dim;
    const int t = static_cast<int>(r / heads);
    norm_rope_row_warp<Acc>(
        row, weight, dim, rope_dim, eps, round, [&](int p) { return rope_cos_sin(m, t, p, inv_freq, false); },
        [&](int i, float v) { row[i] = v; });
}

// norm_rope_kernel over the rows of several targets: block b is row b - (the targets' rows before it) of its target.
template <typename Acc>
__global__ void norm_ropes_kernel(StepMeta m, NormRopesParams p, bool round) {
    __shared__ Acc scratch[32];
    int i = 0;
    while (i < p.n - 1 && static_cast<int>(blockIdx.x) >= p.block_end[i]) ++i;
    const NormRopeRows& t = p.targets[i];
    prefetch_lines(t.weight, t.dim);
    if (t.rope_dim > 0) prefetch_lines(t.inv_freq, t.rope_dim / 2);
    pdl_begin();
    const int r = static_cast<int>(blockIdx.x) - (i == 0 ? 0 : p.block_end[i - 1]);
    float* row = t.x + static_cast<int64_t>(r) * t.dim;
    rms_norm_row(row, t.weight, t.dim, p.eps, round, row, &scratch[0]);
    if (t.rope_dim > 0) {  // uniform over the block
        __syncthreads();   // the normed row (global memory) is visible to the whole block
        for (int j = threadIdx.x; j < t.rope_dim / 2; j += blockDim.x) {
            rope_pair<Acc>(m, r / t.heads, j, t.inv_freq, false, round, row + (t.dim - t.rope_dim) + 2 * j);
        }
    }
    if (t.ring == nullptr) return;
    __syncthreads();  // the finished row is visible to the encoding warp
    uint8_t* dst = ring_row(m, r / t.heads, t.ring_rows, t.ring, t.ring_format.bytes);
    if (threadIdx.x < 32 && dst != nullptr) warp_encode_row(row, dst, t.ring_format);
}

__global__ void scale_kernel(float* x, int64_t n, float factor) {
    pdl_begin();
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < n) x[i] *= factor;
}

// Reads n 16-byte words (four loads of a thread in flight), folding them into a word that is stored only in a case
// that never happens, so that the loads stay. The read-bandwidth probe of mapped host memory (PCIe ceilings).
__global__ void read_words_kernel(const uint4* p, int64_t n, uint32_t* sink) {
    pdl_begin();
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    uint32_t fold = 0;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = i + j * stride < n ? p[i + j * stride] : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int j = 0; j < 4; ++j) fold ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
    }
    if (fold == 0x9e3779b9u && threadIdx.x == 1023) *sink = fold;
}

__global__ void round_bf16_kernel(float* x, int64_t n) {
    pdl_begin();
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < n) x[i] = to_bf16(x[i]);
}

// Four floats a thread to four bf16 values (round to nearest even, as the mma.sync GEMM stages its activations).
__global__ void to_bf16_rows_kernel(const float* x, int64_t x_stride, int64_t rows, int64_t cols, uint16_t* out) {
    pdl_begin();
    const int64_t quads = cols / 4;
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i >= rows * quads) return;
    const int64_t r = i / quads, c = 4 * (i % quads);
    const float4 v = *reinterpret_cast<const float4*>(x + r * x_stride + c);
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    uint2 packed;
    packed.x = *reinterpret_cast<const uint32_t*>(&lo);
    packed.y = *reinterpret_cast<const uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(out + r * cols + c) = packed;
}

// Eight loads of a thread in flight (one at a time, a row of hc x D floats was ~60 round trips).
__global__ void gather_rows_kernel(const float* x, const int32_t* rows, int64_t width, float* y) {
    pdl_begin();
    const float* src = x + static_cast<int64_t>(rows[blockIdx.x]) * width;
    float* dst = y + blockIdx.x * width;
    batched_loads<8>(
        int64_t{threadIdx.x}, width, int64_t{blockDim.x}, [&](int64_t i) { return src[i]; },
        [&](int64_t i, float v) { dst[i] = v; });
}

// One block per row: each thread scans a strided slice, then the block reduces (value, index) pairs; a row holding
// NaN or +inf, or only -inf, has no choice (kNoArgmax), as on the host. A thread has eight loads in flight before it
// compares any (one at a time, a vocabulary row took ~200 us); argmax_better is a total order, so the scan order does
// not change the answer.
constexpr int kArgmaxThreads = 1024;
__global__ void argmax_rows_kernel(const float* x, int64_t cols, int32_t* out) {
    pdl_begin();
    const float* row = x + static_cast<int64_t>(blockIdx.x) * cols;
    float best = -INFINITY;
    int32_t best_i = 0;
    bool fault = false;
    batched_loads<8>(
        int64_t{threadIdx.x}, cols, int64_t{blockDim.x}, [&](int64_t i) { return row[i]; },
        [&](int64_t i, float v) {
            fault |= !(v < INFINITY);  // NaN or +inf
            if (argmax_better(v, static_cast<int32_t>(i), best, best_i)) best = v, best_i = static_cast<int32_t>(i);
        });
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
    pdl_begin();
    const int64_t row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    warp_block_sim(kv + row * dim, nope, 64, 0, true, quant);
}

// One warp per (token, head) row: Hadamard rotation, then FP4-sim in blocks of 32.
__global__ void indexer_query_sim_kernel(float* q, int64_t rows, int dim) {
    pdl_begin();
    const int64_t row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    warp_hadamard(q + row * dim, dim);
    warp_block_sim(q + row * dim, dim, 32, 1, true);
}

}  // namespace

void launch_embed(cudaStream_t s, const StepMeta& m, const uint16_t* table, int64_t d, int hc, float* x) {
    if (m.n_tokens > 0) launch_kernel(embed_kernel, static_cast<unsigned>(m.n_tokens), 256, 0, s, m, table, d, hc, x);
}

void launch_rms_norm(cudaStream_t s, const float* x, const float* weight, int64_t rows, int64_t k, float eps,
                     bool reference, float* y) {
    if (rows == 0) return;
    if (reference) {
        launch_kernel(rms_norm_kernel<double>, static_cast<unsigned>(rows), kNormRowThreads, 0, s, x, weight, k, eps,
                      true, y);
    } else {
        launch_kernel(rms_norm_kernel<float>, static_cast<unsigned>(rows), kNormRowThreads, 0, s, x, weight, k, eps,
                      false, y);
    }
}

void launch_rope(cudaStream_t s, const StepMeta& m, float* x, int heads, int dim, int rope_dim, const float* inv_freq,
                 bool inverse, bool reference) {
    const int64_t total = static_cast<int64_t>(m.n_tokens) * heads * (rope_dim / 2);
    if (total == 0) return;
    const unsigned blocks = blocks_for(total, 256);
    if (reference) {
        launch_kernel(rope_kernel<double>, blocks, 256, 0, s, m, x, heads, dim, rope_dim, inv_freq, inverse, true);
    } else {
        launch_kernel(rope_kernel<float>, blocks, 256, 0, s, m, x, heads, dim, rope_dim, inv_freq, inverse, false);
    }
}

void launch_norm_rope(cudaStream_t s, const StepMeta& m, float* x, const float* weight, int heads, int dim,
                      int rope_dim, float eps, const float* inv_freq, bool reference) {
    const auto rows = static_cast<unsigned>(static_cast<int64_t>(m.n_tokens) * heads);
    if (rows == 0) return;
    if (dim % 32 == 0 && dim <= 32 * kMaxNormRowPerLane) {  // a warp a row
        const unsigned blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
        if (reference) {
            launch_kernel(norm_rope_rows_kernel<double>, blocks, 32 * kRowsPerBlock, 0, s, m, x, int64_t{rows}, weight,
                          heads, dim, rope_dim, eps, inv_freq, true);
        } else {
            launch_kernel(norm_rope_rows_kernel<float>, blocks, 32 * kRowsPerBlock, 0, s, m, x, int64_t{rows}, weight,
                          heads, dim, rope_dim, eps, inv_freq, false);
        }
        return;
    }
    if (reference) {
        launch_kernel(norm_rope_kernel<double>, rows, kNormRowThreads, 0, s, m, x, weight, heads, dim, rope_dim, eps,
                      inv_freq, true);
    } else {
        launch_kernel(norm_rope_kernel<float>, rows, kNormRowThreads, 0, s, m, x, weight, heads, dim, rope_dim, eps,
                      inv_freq, false);
    }
}

void launch_norm_ropes(cudaStream_t s, const StepMeta& m, NormRopesParams p, bool reference) {
    int blocks = 0;
    for (int i = 0; i < p.n; ++i) {
        blocks += m.n_tokens * p.targets[i].heads;
        p.block_end[i] = blocks;
    }
    if (blocks == 0) return;
    if (reference) {
        launch_kernel(norm_ropes_kernel<double>, static_cast<unsigned>(blocks), kNormRowThreads, 0, s, m, p, true);
    } else {
        launch_kernel(norm_ropes_kernel<float>, static_cast<unsigned>(blocks), kNormRowThreads, 0, s, m, p, false);
    }
}

void launch_scale(cudaStream_t s, float* x, int64_t n, float factor) {
    if (n > 0) launch_kernel(scale_kernel, blocks_for(n, 256), 256, 0, s, x, n, factor);
}

void launch_read_words(cudaStream_t s, const void* p, int64_t bytes, int blocks, uint32_t* sink) {
    if (bytes >= 16)
        launch_kernel(read_words_kernel, blocks, 256, 0, s, static_cast<const uint4*>(p), bytes / 16, sink);
}

void launch_round_bf16(cudaStream_t s, float* x, int64_t n) {
    if (n > 0) launch_kernel(round_bf16_kernel, blocks_for(n, 256), 256, 0, s, x, n);
}

void launch_to_bf16_rows(cudaStream_t s, const float* x, int64_t x_stride, int64_t rows, int64_t cols, uint16_t* out) {
    const int64_t n = rows * (cols / 4);
    if (n > 0) launch_kernel(to_bf16_rows_kernel, blocks_for(n, 256), 256, 0, s, x, x_stride, rows, cols, out);
}

void launch_gather_rows(cudaStream_t s, const float* x, const int32_t* rows, int64_t n_rows, int64_t width, float* y) {
    if (n_rows > 0) launch_kernel(gather_rows_kernel, static_cast<unsigned>(n_rows), 256, 0, s, x, rows, width, y);
}

void launch_argmax_rows(cudaStream_t s, const float* x, int64_t rows, int64_t cols, int32_t* out) {
    if (rows > 0) launch_kernel(argmax_rows_kernel, static_cast<unsigned>(rows), kArgmaxThreads, 0, s, x, cols, out);
}

void launch_kv_cache_sim(cudaStream_t s, float* kv, int64_t rows, int dim, int nope, Fp8QuantDev quant) {
    if (rows > 0) launch_kernel(kv_cache_sim_kernel, blocks_for(rows, 4), 128, 0, s, kv, rows, dim, nope, quant);
}

void launch_indexer_query_sim(cudaStream_t s, float* q, int64_t rows, int dim) {
    if (rows > 0) launch_kernel(indexer_query_sim_kernel, blocks_for(rows, 4), 128, 0, s, q, rows, dim);
}

}  // namespace dsv4::cuda
