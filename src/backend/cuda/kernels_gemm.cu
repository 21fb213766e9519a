// Tensor-core GEMM for `fast` numerics: y[m, n] = sum_k x[m, k] * W[n, k] with the activations rounded to bf16 and
// the weights decoded from their checkpoint form into bf16 tiles in shared memory (FP8 e4m3, FP4 e2m1 and their
// power-of-two scales are exact in bf16), float32 accumulation (WMMA 16x16x16 bf16). Used for prefill and large
// decode batches; decode-sized steps keep the float32 GEMV (memory-bound: tensor cores buy nothing there).
#include <cuda_bf16.h>
#include <mma.h>

#include <algorithm>

#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

using namespace nvcuda;

constexpr int kBM = 64;   // activation rows per block
constexpr int kBN = 128;  // weight rows (output features) per block
constexpr int kBK = 64;   // reduction slice per stage
constexpr int kPad = 8;   // bf16 elements of row padding (bank conflicts)
constexpr int kThreads = 256;
constexpr int kAGroups = kBM * kBK / 8 / kThreads;   // 8-float activation groups per thread and stage
constexpr int kBGroups = kBN * kBK / 16 / kThreads;  // 16-element weight groups per thread and stage

// 16 consecutive weight elements of one row as loaded from global memory (the checkpoint form), decoded later.
// cols % 32 == 0, so a group never straddles an FP8 128-block or an FP4 32-block: one scale per group.
template <int F>
struct RawGroup {
    uint4 words[F == static_cast<int>(WeightFormat::kF32) ? 4 : F == static_cast<int>(WeightFormat::kBF16) ? 2 : 1];
    uint8_t scale;
};

template <int F>
__device__ __forceinline__ void load_group(const WeightRef& w, int64_t row, int64_t k, RawGroup<F>& g) {
    constexpr int kWords = sizeof(g.words) / sizeof(uint4);
#pragma unroll
    for (int i = 0; i < kWords; ++i) g.words[i] = make_uint4(0, 0, 0, 0);  // zero codes decode to 0 in every format
    g.scale = 127;
    if (row >= w.rows || k >= w.cols) return;
    const auto* base = static_cast<const uint8_t*>(w.data);
    if constexpr (F == static_cast<int>(WeightFormat::kFp8Block)) {
        g.words[0] = __ldg(reinterpret_cast<const uint4*>(base + row * w.cols + k));
        g.scale = w.scales[(row / w.block_rows) * w.scale_cols + k / w.block_cols];
    } else if constexpr (F == static_cast<int>(WeightFormat::kFp4Row)) {
        const uint2 half = __ldg(reinterpret_cast<const uint2*>(base + row * (w.cols / 2) + k / 2));
        g.words[0] = make_uint4(half.x, half.y, 0, 0);
        g.scale = w.scales[row * w.scale_cols + k / w.block_cols];
    } else {
        constexpr int kBytes = F == static_cast<int>(WeightFormat::kF32) ? 4 : 2;
        const auto* p = reinterpret_cast<const uint4*>(base + (row * w.cols + k) * kBytes);
#pragma unroll
        for (int i = 0; i < kWords; ++i) g.words[i] = __ldg(p + i);
    }
}

// Decodes a group into bf16 (FP8 codes in `dialect`: FNUZ in software, never through the hardware's OCP e4m3).
template <int F>
__device__ __forceinline__ void store_group(const RawGroup<F>& g, Fp8Dialect dialect, __nv_bfloat16* out) {
    float v[16];
    if constexpr (F == static_cast<int>(WeightFormat::kFp8Block)) {
        const float s = decode_ue8m0(g.scale);
        decode4_e4m3(g.words[0].x, dialect, v);
        decode4_e4m3(g.words[0].y, dialect, v + 4);
        decode4_e4m3(g.words[0].z, dialect, v + 8);
        decode4_e4m3(g.words[0].w, dialect, v + 12);
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] *= s;
    } else if constexpr (F == static_cast<int>(WeightFormat::kFp4Row)) {
        // Sign-split words (backend/fp4_layout.h), code by code: through decode8_fp4_word this kernel spilled.
        const float s = decode_ue8m0(g.scale);
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] = decode_e2m1(fp4_code_at(i < 8 ? g.words[0].x : g.words[0].y, i % 8)) * s;
    } else if constexpr (F == static_cast<int>(WeightFormat::kBF16)) {
        const auto* h = reinterpret_cast<const uint16_t*>(g.words);
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] = bf16_bits_to_float(h[i]);
    } else {
        const auto* f = reinterpret_cast<const float*>(g.words);
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] = f[i];
    }
#pragma unroll
    for (int i = 0; i < 16; i += 2) {
        *reinterpret_cast<__nv_bfloat162*>(out + i) = __floats2bfloat162_rn(v[i], v[i + 1]);
    }
}

// One stage's global reads, held in registers while the previous stage computes.
template <int F>
struct Stage {
    float4 a[kAGroups][2];
    RawGroup<F> b[kBGroups];
};

// Grid: (ceil(n / kBN), ceil(m / kBM)). 8 warps, each computing a 32 x 32 piece (2 x 2 WMMA tiles) of the
// 64 x 128 block tile: warp w covers rows 32 * (w / 4) .. and columns 32 * (w % 4) ... Software pipeline: the next
// stage's activations and weight codes are loaded into registers before this stage's MMAs, then decoded into shared
// memory. Expert mode (table != null): the block's activation rows are rows[m0 .. m0 + kBM) of a permuted list whose
// entries all route to expert `tile_expert[blockIdx.y]`; outputs go to y[rows[i]].
// Split K (grid.z > 1, dense mode only): block z sums K slices [z * k_per_split, ...) and writes its raw sums to
// partial[z][m][rows]; gemm_split_sum_kernel adds the splits in order.
template <int F>
__global__ void __launch_bounds__(kThreads, F == static_cast<int>(WeightFormat::kF32) ? 1 : 2)
    gemm_bf16_kernel(WeightRef w, const float* x, int64_t x_stride, int64_t m, float* y, int64_t y_stride,
                     bool round_out, const WeightRef* table, const int32_t* tile_expert, const int32_t* tile_row0,
                     const int32_t* tile_rows, const int32_t* row_ids, int x_div, const int32_t* tile_count,
                     int64_t k_per_split, float* partial) {
    pdl_begin();
    __shared__ __align__(32) __nv_bfloat16 As[kBM][kBK + kPad];
    __shared__ __align__(32) __nv_bfloat16 Bs[kBN][kBK + kPad];
    __shared__ __align__(32) float Cs[8][16 * 16];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    WeightRef wr = w;
    int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM, m_end = m;
    if (table != nullptr) {
        if (static_cast<int>(blockIdx.y) >= tile_count[0]) return;
        wr = table[tile_expert[blockIdx.y]];
        m0 = tile_row0[blockIdx.y];
        m_end = m0 + tile_rows[blockIdx.y];
    }
    const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
    if (n0 >= wr.rows) return;
    // This thread's activation rows (null past the end) and weight groups of every stage.
    const float* a_rows[kAGroups];
#pragma unroll
    for (int i = 0; i < kAGroups; ++i) {
        const int64_t r = m0 + (threadIdx.x + i * kThreads) / (kBK / 8);
        a_rows[i] = r >= m_end ? nullptr : x + (table == nullptr ? r : row_ids[r] / x_div) * x_stride;
    }
    auto load_stage = [&](int64_t k0, Stage<F>& st) {
#pragma unroll
        for (int i = 0; i < kAGroups; ++i) {
            const int64_t k = k0 + ((threadIdx.x + i * kThreads) % (kBK / 8)) * 8;
            st.a[i][0] = st.a[i][1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (a_rows[i] != nullptr && k < wr.cols) {
                st.a[i][0] = *reinterpret_cast<const float4*>(a_rows[i] + k);
                st.a[i][1] = *reinterpret_cast<const float4*>(a_rows[i] + k + 4);
            }
        }
#pragma unroll
        for (int i = 0; i < kBGroups; ++i) {
            const int id = threadIdx.x + i * kThreads;
            load_group<F>(wr, n0 + id / (kBK / 16), k0 + (id % (kBK / 16)) * 16, st.b[i]);
        }
    };
    auto store_stage = [&](const Stage<F>& st) {
#pragma unroll
        for (int i = 0; i < kAGroups; ++i) {
            const int id = threadIdx.x + i * kThreads;
            __nv_bfloat16* dst = &As[id / (kBK / 8)][(id % (kBK / 8)) * 8];
            const float4 lo = st.a[i][0], hi = st.a[i][1];
            *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(lo.x, lo.y);
            *reinterpret_cast<__nv_bfloat162*>(dst + 2) = __floats2bfloat162_rn(lo.z, lo.w);
            *reinterpret_cast<__nv_bfloat162*>(dst + 4) = __floats2bfloat162_rn(hi.x, hi.y);
            *reinterpret_cast<__nv_bfloat162*>(dst + 6) = __floats2bfloat162_rn(hi.z, hi.w);
        }
#pragma unroll
        for (int i = 0; i < kBGroups; ++i) {
            const int id = threadIdx.x + i * kThreads;
            store_group<F>(st.b[i], wr.fp8_dialect, &Bs[id / (kBK / 16)][(id % (kBK / 16)) * 16]);
        }
    };
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    }
    const int wm = (warp / 4) * 32, wn = (warp % 4) * 32;
    const int64_t k_begin = partial != nullptr ? static_cast<int64_t>(blockIdx.z) * k_per_split : 0;
    const int64_t k_end = partial != nullptr ? min64(wr.cols, k_begin + k_per_split) : wr.cols;
    Stage<F> stage;
    load_stage(k_begin, stage);
    for (int64_t k0 = k_begin; k0 < k_end; k0 += kBK) {
        store_stage(stage);
        __syncthreads();
        if (k0 + kBK < k_end) load_stage(k0 + kBK, stage);  // in flight during the MMAs below
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
                    if (partial != nullptr) {
                        partial[(static_cast<int64_t>(blockIdx.z) * m + mi) * wr.rows + ni] = v;
                    } else {
                        const int64_t out_row = table != nullptr ? row_ids[mi] : mi;
                        y[out_row * y_stride + ni] = round_out ? to_bf16(v) : v;
                    }
                }
            }
            __syncwarp();
        }
    }
}

// y[i][j] = the splits' partial sums of output (i, j) added in split order (then rounded where asked).
__global__ void gemm_split_sum_kernel(const float* partial, int splits, int64_t m, int64_t rows, float* y,
                                      int64_t y_stride, bool round_out) {
    pdl_begin();
    const int64_t id = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (id >= m * rows) return;
    float sum = 0.0f;
    for (int z = 0; z < splits; ++z) sum += partial[z * m * rows + id];
    y[(id / rows) * y_stride + id % rows] = round_out ? to_bf16(sum) : sum;
}

struct GemmArgs {
    WeightRef w;
    const float* x;
    int64_t x_stride;
    int64_t m;
    float* y;
    int64_t y_stride;
    bool round_out;
    const WeightRef* table = nullptr;
    const int32_t* tile_expert = nullptr;
    const int32_t* tile_row0 = nullptr;
    const int32_t* tile_rows = nullptr;
    const int32_t* row_ids = nullptr;
    int x_div = 1;
    const int32_t* tile_count = nullptr;
    int64_t k_per_split = 0;
    float* partial = nullptr;
};

template <int F>
void launch_typed(cudaStream_t s, dim3 grid, const GemmArgs& g) {
    launch_kernel(gemm_bf16_kernel<F>, grid, kThreads, 0, s, g.w, g.x, g.x_stride, g.m, g.y, g.y_stride, g.round_out,
                  g.table, g.tile_expert, g.tile_row0, g.tile_rows, g.row_ids, g.x_div, g.tile_count, g.k_per_split,
                  g.partial);
}

void launch_format(cudaStream_t s, WeightFormat format, dim3 grid, const GemmArgs& g) {
    switch (format) {
        case WeightFormat::kFp8Block:
            launch_typed<static_cast<int>(WeightFormat::kFp8Block)>(s, grid, g);
            break;
        case WeightFormat::kFp4Row:
            launch_typed<static_cast<int>(WeightFormat::kFp4Row)>(s, grid, g);
            break;
        case WeightFormat::kBF16:
            launch_typed<static_cast<int>(WeightFormat::kBF16)>(s, grid, g);
            break;
        case WeightFormat::kF32:
            launch_typed<static_cast<int>(WeightFormat::kF32)>(s, grid, g);
            break;
    }
}

}  // namespace

// K slices per split: whole kBK slices, splits chosen so that a grid of fewer than half the SMs' worth of blocks
// reaches about one block per SM, at most kMaxSplits.
constexpr int kSmallGrid = 66;
constexpr int kMaxSplits = 16;
int64_t gemm_k_per_split(int64_t rows, int64_t m, int64_t cols) {
    const int64_t grid = static_cast<int64_t>(blocks_for(rows, kBN)) * blocks_for(m, kBM);
    const int64_t slices = (cols + kBK - 1) / kBK;
    if (grid >= kSmallGrid || slices < 2) return slices * kBK;
    const int64_t splits = std::min<int64_t>({slices, kMaxSplits, (2 * kSmallGrid + grid - 1) / grid});
    return kBK * ((slices + splits - 1) / splits);
}

int gemm_bf16_splits(int64_t rows, int64_t m, int64_t cols) {
    if (m == 0) return 1;
    const int64_t per = gemm_k_per_split(rows, m, cols);
    return static_cast<int>((cols + per - 1) / per);
}

void launch_gemm_bf16(cudaStream_t s, const WeightRef& w, const float* x, int64_t x_stride, int64_t m, float* y,
                      int64_t y_stride, bool round_out, int splits, float* partial) {
    if (m == 0) return;
    GemmArgs g{w, x, x_stride, m, y, y_stride, round_out};
    if (splits > 1) {
        g.k_per_split = gemm_k_per_split(w.rows, m, w.cols);
        g.partial = partial;
    }
    launch_format(s, w.format, dim3(blocks_for(w.rows, kBN), blocks_for(m, kBM), splits > 1 ? splits : 1), g);
    if (splits > 1) {
        launch_kernel(gemm_split_sum_kernel, blocks_for(m * w.rows, 256), 256, 0, s, partial, splits, m, w.rows, y,
                      y_stride, round_out);
    }
}

void launch_expert_gemm_bf16(cudaStream_t s, WeightFormat format, const WeightRef* table, int64_t rows_out,
                             int max_tiles, const int32_t* tile_count, const int32_t* tile_expert,
                             const int32_t* tile_row0, const int32_t* tile_rows, const int32_t* row_ids, int x_div,
                             const float* x, int64_t x_stride, float* y, int64_t y_stride, bool round_out) {
    if (max_tiles == 0) return;
    GemmArgs g{WeightRef{}, x,           x_stride,  0,         y,       y_stride, round_out,
               table,       tile_expert, tile_row0, tile_rows, row_ids, x_div,    tile_count};
    g.w.rows = rows_out;  // only the row count bounds the grid; each block reads its expert's weight
    launch_format(s, format, dim3(blocks_for(rows_out, kBN), static_cast<unsigned>(max_tiles)), g);
}

int gemm_tile_rows() {
    return kBM;
}

// Whole 64-wide slices (which also keeps every 16-element group inside one FP4 32-block or FP8 128-block).
bool gemm_supported(int64_t cols) {
    return cols % kBK == 0;
}

}  // namespace dsv4::cuda
