// Tensor-core GEMM for `fast` numerics: y[m, n] = sum_k x[m, k] * W[n, k] with the activations rounded to bf16 and
// the weights decoded from their checkpoint form into bf16 tiles in shared memory (FP8 e4m3, FP4 e2m1 and their
// power-of-two scales are exact in bf16), float32 accumulation (WMMA 16x16x16 bf16). Used for prefill and large
// decode batches; decode-sized steps keep the float32 GEMV (memory-bound: tensor cores buy nothing there).
#include <cuda_bf16.h>
#include <mma.h>

#include "backend/cuda/kernels.h"

namespace dsv4::cuda {
namespace {

using namespace nvcuda;

constexpr int kBM = 64;    // activation rows per block
constexpr int kBN = 128;   // weight rows (output features) per block
constexpr int kBK = 32;    // reduction slice per stage
constexpr int kPad = 8;    // bf16 elements of row padding (bank conflicts)
constexpr int kThreads = 256;

__device__ __forceinline__ __nv_bfloat16 to_bf16_raw(float v) { return __float2bfloat16_rn(v); }

// Decodes W[row, k .. k + 16) into `out` (bf16) with one vector load and one scale (cols % 32 == 0, so a 16-element
// group never straddles an FP8 128-block or an FP4 32-block); zero for rows past the matrix.
__device__ void load_weight16(const WeightRef& w, int64_t row, int64_t k, __nv_bfloat16* out) {
    float v[16];
    if (row >= w.rows) {
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] = 0.0f;
    } else {
        const auto* base = static_cast<const uint8_t*>(w.data);
        switch (w.format) {
            case WeightFormat::kFp8Block: {
                const uint4 raw = __ldg(reinterpret_cast<const uint4*>(base + row * w.cols + k));
                const float s = decode_ue8m0(w.scales[(row / w.block_rows) * w.scale_cols + k / w.block_cols]);
                const auto* b = reinterpret_cast<const uint8_t*>(&raw);
#pragma unroll
                for (int i = 0; i < 16; ++i) v[i] = decode_e4m3(b[i]) * s;
                break;
            }
            case WeightFormat::kFp4Row: {
                const uint2 raw = __ldg(reinterpret_cast<const uint2*>(base + row * (w.cols / 2) + k / 2));
                const float s = decode_ue8m0(w.scales[row * w.scale_cols + k / w.block_cols]);
                const auto* b = reinterpret_cast<const uint8_t*>(&raw);
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    v[2 * i] = decode_e2m1(b[i] & 0xfu) * s;
                    v[2 * i + 1] = decode_e2m1(b[i] >> 4) * s;
                }
                break;
            }
            case WeightFormat::kBF16: {
                const auto* p = reinterpret_cast<const uint4*>(base + (row * w.cols + k) * 2);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const uint4 raw = __ldg(p + h);
                    const auto* b = reinterpret_cast<const uint16_t*>(&raw);
#pragma unroll
                    for (int i = 0; i < 8; ++i) v[8 * h + i] = bf16_bits_to_float(b[i]);
                }
                break;
            }
            case WeightFormat::kF32: {
                const auto* p = reinterpret_cast<const float4*>(base + (row * w.cols + k) * 4);
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const float4 f = __ldg(p + q);
                    v[4 * q] = f.x;
                    v[4 * q + 1] = f.y;
                    v[4 * q + 2] = f.z;
                    v[4 * q + 3] = f.w;
                }
                break;
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) out[i] = to_bf16_raw(v[i]);
}

// Grid: (ceil(n / kBN), ceil(m / kBM)). 8 warps, each computing a 32 x 32 piece (2 x 2 WMMA tiles) of the
// 64 x 128 block tile: warp w covers rows 32 * (w / 4) .. and columns 32 * (w % 4) ...
// Expert mode (table != null): the block's activation rows are rows[m0 .. m0 + kBM) of a permuted list whose
// entries all route to expert `tile_expert[blockIdx.y]`; outputs go to y[rows[i]].
__global__ void gemm_bf16_kernel(WeightRef w, const float* x, int64_t x_stride, int64_t m, float* y,
                                 int64_t y_stride, bool round_out, const WeightRef* table, const int32_t* tile_expert,
                                 const int32_t* tile_row0, const int32_t* tile_rows, const int32_t* row_ids,
                                 int x_div) {
    __shared__ __align__(32) __nv_bfloat16 As[kBM][kBK + kPad];
    __shared__ __align__(32) __nv_bfloat16 Bs[kBN][kBK + kPad];
    __shared__ __align__(32) float Cs[8][16 * 16];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    WeightRef wr = w;
    int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM, m_end = m;
    if (table != nullptr) {
        wr = table[tile_expert[blockIdx.y]];
        m0 = tile_row0[blockIdx.y];
        m_end = m0 + tile_rows[blockIdx.y];
    }
    const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
    if (n0 >= wr.rows) return;
    auto x_row = [&](int64_t i) -> const float* {  // activation row of block row i (null past the end)
        if (m0 + i >= m_end) return nullptr;
        if (table == nullptr) return x + (m0 + i) * x_stride;
        return x + (row_ids[m0 + i] / x_div) * x_stride;
    };
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    }
    const int wm = (warp / 4) * 32, wn = (warp % 4) * 32;
    for (int64_t k0 = 0; k0 < wr.cols; k0 += kBK) {
        // A: kBM x kBK floats -> bf16, 8 consecutive floats (two float4) per thread.
        {
            const int i = threadIdx.x / (kBK / 8), kk = (threadIdx.x % (kBK / 8)) * 8;
            const float* row = x_row(i);
            float4 lo = make_float4(0.0f, 0.0f, 0.0f, 0.0f), hi = lo;
            if (row != nullptr) {
                lo = *reinterpret_cast<const float4*>(row + k0 + kk);
                hi = *reinterpret_cast<const float4*>(row + k0 + kk + 4);
            }
            const float vals[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
            for (int e = 0; e < 8; ++e) As[i][kk + e] = to_bf16_raw(vals[e]);
        }
        // B: kBN weight rows x kBK columns, 16 consecutive elements per thread (kBN * kBK / 16 == 2 * kThreads).
#pragma unroll
        for (int part = 0; part < (kBN * kBK / 16) / kThreads; ++part) {
            const int id = threadIdx.x + part * kThreads;
            const int r = id / (kBK / 16), kk = (id % (kBK / 16)) * 16;
            load_weight16(wr, n0 + r, k0 + kk, &Bs[r][kk]);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kBK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &As[wm + 16 * i][kk], kBK + kPad);
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &Bs[wn + 16 * j][kk], kBK + kPad);
#pragma unroll
            for (int i = 0; i < 2; ++i) {
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
            }
        }
        __syncthreads();
    }
    // Epilogue through shared memory (fragment layouts are opaque), bounds-checked.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            wmma::store_matrix_sync(Cs[warp], acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                const int r = e / 16, c = e % 16;
                const int64_t mi = m0 + wm + 16 * i + r, ni = n0 + wn + 16 * j + c;
                if (mi < m_end && ni < wr.rows) {
                    const float v = Cs[warp][e];
                    const int64_t out_row = table != nullptr ? row_ids[mi] : mi;
                    y[out_row * y_stride + ni] = round_out ? to_bf16(v) : v;
                }
            }
            __syncwarp();
        }
    }
}

}  // namespace

void launch_gemm_bf16(cudaStream_t s, const WeightRef& w, const float* x, int64_t x_stride, int64_t m, float* y,
                      int64_t y_stride, bool round_out) {
    if (m == 0) return;
    const dim3 grid(blocks_for(w.rows, kBN), blocks_for(m, kBM));
    gemm_bf16_kernel<<<grid, kThreads, 0, s>>>(w, x, x_stride, m, y, y_stride, round_out, nullptr, nullptr, nullptr,
                                               nullptr, nullptr, 1);
}

void launch_expert_gemm_bf16(cudaStream_t s, const WeightRef* table, int64_t rows_out, int tiles,
                             const int32_t* tile_expert, const int32_t* tile_row0, const int32_t* tile_rows,
                             const int32_t* row_ids, int x_div, const float* x, int64_t x_stride, float* y,
                             int64_t y_stride, bool round_out) {
    if (tiles == 0) return;
    WeightRef shape;  // only the row count bounds the grid; each block reads its expert's weight
    shape.rows = rows_out;
    const dim3 grid(blocks_for(rows_out, kBN), static_cast<unsigned>(tiles));
    gemm_bf16_kernel<<<grid, kThreads, 0, s>>>(shape, x, x_stride, 0, y, y_stride, round_out, table, tile_expert,
                                               tile_row0, tile_rows, row_ids, x_div);
}

int gemm_tile_rows() { return kBM; }

bool gemm_supported(int64_t cols) { return cols % kBK == 0 && cols % 32 == 0; }

}  // namespace dsv4::cuda
