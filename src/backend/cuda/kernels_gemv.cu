// Decode GEMV: y[v, r] = W[r, :] . x[v, :] for a few activation rows (v < kMaxGemvVectors), weights in checkpoint
// form decoded in registers, activations through the read-only cache. Memory-bound: one pass over the weights per
// call. Used when the weight rows are aligned for the loads (cols a multiple of 128 for FP8, 32 for FP4, 8 for BF16,
// 4 for F32: gemv_supported); otherwise the generic kernel in kernels_linear.cu runs. A row's arithmetic and load
// pattern: gemv_row.cuh.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/gemv_row.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp per row

// One warp per weight row. Plain mode: vectors x[v * x_stride ...] for v < m (m <= kVectors), y[v * y_stride + r];
// grouped (blockIdx.z = g of gridDim.z groups of `count` rows): rows g * count .. read x + g * group_x. Expert mode
// (table != null): blockIdx.y is a (token, expert) pair: weight table[ids[pair]], vector x[(pair / x_div) * x_stride
// ...], output y[pair * y_stride + r]. Every vector count runs the same per-row arithmetic, so a row's result does not
// depend on the batch.
template <int kFormat, int kVectors>
__global__ void gemv_kernel(WeightRef w, const WeightRef* table, const int32_t* ids, int n_experts, const float* x,
                            int64_t x_stride, int x_div, int64_t count, int64_t group_x, int64_t m, float* y,
                            int64_t y_stride, bool round_out, StepMeta meta) {
    pdl_begin();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t pair = blockIdx.y, group = blockIdx.z;
    WeightRef wr = w;
    const float* xv = x + group * group_x;
    int nv = static_cast<int>(m);
    if (table != nullptr) {
        const int32_t e = ids[pair];
        if (e < 0 || e >= n_experts) {
            if (threadIdx.x == 0 && blockIdx.x == 0) flag_error(meta, kErrorExpertId);
            return;
        }
        wr = table[e];
        xv = x + (pair / x_div) * x_stride;
        nv = 1;
    }
    const int64_t r_in_group = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + warp;
    if (r_in_group >= (table != nullptr ? wr.rows : count)) return;
    const int64_t r = group * count + r_in_group;
    float acc[kVectors] = {};
    row_partials<kFormat, kVectors>(wr, r, xv, x_stride, nv, acc);
#pragma unroll
    for (int v = 0; v < kVectors; ++v) {
        const float s = warp_sum(acc[v]);
        if (lane == 0 && v < nv) {
            float* out = table != nullptr ? y + pair * y_stride + r : y + v * y_stride + r;
            *out = round_out ? to_bf16(s) : s;
        }
    }
}

// Single-vector GEMV with the vector staged in shared memory: one warp per kRows consecutive rows. Loading the
// activations from global memory after each weight load had arrived put an L2 round trip after every pass on the
// critical path; staged, the first weight lines are prefetched into L2 while the block copies the vector. Same
// modes and per-row arithmetic as gemv_kernel (a single vector); plain mode takes vector blockIdx.y (x + v *
// x_stride into y + v * y_stride), so several vectors of an L2-resident weight run side by side, each block reading
// the weight again (from L2).
constexpr int64_t kMaxStagedCols = 12288;                // 48 KB of shared memory without opting in
constexpr int64_t kL2ResidentBytes = int64_t{16} << 20;  // of the H200's 50 MB L2

template <int kFormat, int kRows>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    gemv_staged_kernel(WeightRef w, const WeightRef* table, const int32_t* ids, int n_experts, const float* x,
                       int64_t x_stride, int x_div, int64_t count, int64_t group_x, float* y, int64_t y_stride,
                       bool round_out, StepMeta meta) {
    pdl_begin();
    extern __shared__ float4 staged[];
    float* xs = reinterpret_cast<float*>(staged);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t pair = blockIdx.y, group = blockIdx.z;  // pair: the (token, expert) pair, or the vector
    WeightRef wr = w;
    const float* xv = x + group * group_x + pair * x_stride;
    if (table != nullptr) {
        const int32_t e = ids[pair];
        if (e < 0 || e >= n_experts) {  // uniform over the block: no thread reaches the barrier below
            if (threadIdx.x == 0 && blockIdx.x == 0) flag_error(meta, kErrorExpertId);
            return;
        }
        wr = table[e];
        xv = x + (pair / x_div) * x_stride;
    }
    const int64_t rows_in_group = table != nullptr ? wr.rows : count;
    const int64_t first = (blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + warp) * kRows;
    RowRef<kFormat> rows[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
        if (first + i < rows_in_group) rows[i] = row_ref<kFormat>(wr, group * count + first + i, xs);
        prefetch_row<kFormat>(rows[i], row_bytes<kFormat>(wr.cols));
    }
    stage_vector(xv, wr.cols, xs);
    __syncthreads();
    if (first >= rows_in_group) return;
    float acc[kRows] = {};
    rows_partials<kFormat, kRows, true>(rows, static_cast<int>(wr.cols / kLoadElems<kFormat>), wr.fp8_dialect, acc);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
        const float v = warp_sum(acc[i]);
        const int64_t r = group * count + first + i;
        if (lane == 0 && first + i < rows_in_group) {
            y[pair * y_stride + r] = round_out ? to_bf16(v) : v;
        }
    }
}

// Several vectors of a weight that does not stay in L2 (the lm head at batch 8): the vectors staged in shared memory
// once a block, each warp kVectorRows consecutive rows whose lane steps share one read of the activations
// (rows_vectors_partials). gemv_kernel's lanes read every vector's activations at every weight load, from L1: the lm
// head at 8 vectors ran at 0.86 TB/s (1,230 us, H200, performance-log 2026-12-03). The same bits as gemv_kernel.
constexpr int kVectorRows = 4;
constexpr int kVectorPasses = 4;  // row groups a block: its staging (up to 200 KB from L2) amortized over 128 rows
constexpr int kVectorWarps = 8;   // one block an SM (its staged vectors): 64 KB of weight loads in flight
constexpr int64_t kMaxVectorStage = 200 * 1024;  // bytes of staged vectors (opt-in shared memory)

template <int kFormat>
__global__ void __launch_bounds__(kVectorWarps * 32)
    gemv_vectors_kernel(WeightRef w, const float* x, int64_t x_stride, int64_t count, int64_t group_x, int64_t m,
                        float* y, int64_t y_stride, bool round_out) {
    pdl_begin();
    extern __shared__ float4 staged[];
    float* xs = reinterpret_cast<float*>(staged);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t group = blockIdx.z, cols = w.cols;
    const int nv = static_cast<int>(m);
    for (int v = 0; v < nv; ++v) stage_vector(x + group * group_x + v * x_stride, cols, xs + v * cols);
    __syncthreads();
    for (int pass = 0; pass < kVectorPasses; ++pass) {  // the staged vectors serve kVectorPasses row groups
        const int64_t first = ((blockIdx.x * int64_t{kVectorPasses} + pass) * kVectorWarps + warp) * kVectorRows;
        if (first >= count) return;
        RowRef<kFormat> rows[kVectorRows];
#pragma unroll
        for (int i = 0; i < kVectorRows; ++i) {
            if (first + i < count) rows[i] = row_ref<kFormat>(w, group * count + first + i, xs);
        }
        float acc[kVectorRows][kMaxGemvVectors] = {};
        rows_vectors_partials<kFormat, kVectorRows, kMaxGemvVectors>(rows, static_cast<int>(cols / kLoadElems<kFormat>),
                                                                     xs, cols, nv, w.fp8_dialect, acc);
#pragma unroll
        for (int i = 0; i < kVectorRows; ++i) {
#pragma unroll
            for (int v = 0; v < kMaxGemvVectors; ++v) {
                if (v >= nv) break;
                const float sum = warp_sum(acc[i][v]);
                if (lane == 0 && first + i < count) {
                    y[v * y_stride + group * count + first + i] = round_out ? to_bf16(sum) : sum;
                }
            }
        }
    }
}

// Rows per warp for the staged GEMV: enough rows that each lane has about 32 loads of a pass in flight, as long as
// the grid keeps about two warps per SM scheduler busy.
int staged_rows_per_warp(int64_t loads_per_row, int64_t rows, int64_t blocks_y) {
    const int64_t busy_warps = int64_t{device_sms()} * 8;  // 4 schedulers x 2 warps
    int k = 1;
    while (k < 4 && loads_per_row * k < 32 * 32 && rows * blocks_y / (2 * k) >= busy_warps) k *= 2;
    return k;
}

// gemv_vectors_kernel where its staged vectors fit (not for FP8: fast numerics take the FP8 GEMV there); false: the
// caller launches gemv_kernel.
template <int kFormat>
bool launch_vectors(cudaStream_t s, const WeightRef& w, int64_t rows, int groups, const float* x, int64_t x_stride,
                    int64_t group_x, int64_t m, float* y, int64_t y_stride, bool round_out) {
    if constexpr (is_fp8(kFormat)) {
        return false;
    } else {
        const int64_t stage = m * w.cols * static_cast<int64_t>(sizeof(float));
        if (stage > kMaxVectorStage) return false;
        static bool configured = false;  // host-side, once per format
        if (!configured) {
            cudaFuncSetAttribute(gemv_vectors_kernel<kFormat>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(kMaxVectorStage));
            configured = true;
        }
        const dim3 grid(blocks_for(rows, kVectorWarps * kVectorRows * kVectorPasses), 1, static_cast<unsigned>(groups));
        launch_kernel(gemv_vectors_kernel<kFormat>, grid, kVectorWarps * 32, static_cast<size_t>(stage), s, w, x,
                      x_stride, rows, group_x, m, y, y_stride, round_out);
        return true;
    }
}

template <int kFormat>
void launch_format(cudaStream_t s, const WeightRef& w, const WeightRef* table, const int32_t* ids, int n_experts,
                   int64_t rows, int groups, const float* x, int64_t x_stride, int x_div, int64_t group_x, int64_t m,
                   int64_t pairs, float* y, int64_t y_stride, bool round_out, const StepMeta& meta) {
    const dim3 grid(blocks_for(rows, kRowsPerBlock), static_cast<unsigned>(table != nullptr ? pairs : 1),
                    static_cast<unsigned>(groups));
    const bool single = table != nullptr || m == 1;
    // Several vectors: one staged block row a vector where the weight stays in L2 (the router, compressors, indexer
    // weights: 18-21 us for 8 vectors in gemv_kernel's one pass, whose lanes load the vectors from global memory at
    // every weight load; a few us per vector staged). The same per-row arithmetic: the same bits.
    const bool l2_resident = row_bytes<kFormat>(w.cols) * rows * groups <= kL2ResidentBytes;
    if ((single || l2_resident) && w.cols <= kMaxStagedCols) {
        const unsigned vectors = table != nullptr ? static_cast<unsigned>(pairs) : static_cast<unsigned>(m);
        const int64_t loads = w.cols / kLoadElems<kFormat>;
        const int k = staged_rows_per_warp(loads, rows * groups, vectors);
        const dim3 staged_grid(blocks_for(rows, kRowsPerBlock * k), vectors, grid.z);
        const size_t smem = static_cast<size_t>(w.cols) * sizeof(float);
        auto go = [&](auto kernel) {
            launch_kernel(kernel, staged_grid, kRowsPerBlock * 32, smem, s, w, table, ids, n_experts, x, x_stride,
                          x_div, rows, group_x, y, y_stride, round_out, meta);
        };
        if (k == 4) return go(gemv_staged_kernel<kFormat, 4>);
        if (k == 2) return go(gemv_staged_kernel<kFormat, 2>);
        return go(gemv_staged_kernel<kFormat, 1>);
    }
    if (single) {
        launch_kernel(gemv_kernel<kFormat, 1>, grid, kRowsPerBlock * 32, 0, s, w, table, ids, n_experts, x, x_stride,
                      x_div, rows, group_x, m, y, y_stride, round_out, meta);
    } else if (launch_vectors<kFormat>(s, w, rows, groups, x, x_stride, group_x, m, y, y_stride, round_out)) {
        return;
    } else {
        launch_kernel(gemv_kernel<kFormat, kMaxGemvVectors>, grid, kRowsPerBlock * 32, 0, s, w, table, ids, n_experts,
                      x, x_stride, x_div, rows, group_x, m, y, y_stride, round_out, meta);
    }
}

// The streamed GEMV's parameters for `instances` vectors x + (i / x_div) * x_stride into y + i * y_stride.
GemvStreamParams stream_params(const WeightRef& w, int64_t instances, const float* x, int64_t x_stride, int x_div,
                               float* y, int64_t y_stride, bool round_out) {
    GemvStreamParams p;
    p.w = w;
    p.instances = instances;
    p.x = x;
    p.x_stride = x_stride;
    p.x_div = x_div;
    p.y = y;
    p.y_stride = y_stride;
    p.round_out = round_out;
    return p;
}

}  // namespace

// A failure stays the last error, which the launcher's caller checks.
int device_sms() {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) == cudaSuccess) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    return sms;
}

bool gemv_supported(WeightFormat format, int64_t cols, int64_t m) {
    if (m < 1 || cols > INT32_MAX) return false;  // load indices are 32-bit
    switch (format) {
        case WeightFormat::kFp8Block:
            return cols % 128 == 0;
        case WeightFormat::kFp4Row:
            return cols % 32 == 0;
        case WeightFormat::kBF16:
            return cols % 8 == 0;
        case WeightFormat::kF32:
            return cols % 4 == 0;
    }
    return false;
}

void launch_gemv(cudaStream_t s, const WeightRef& w, const float* x, int64_t x_stride, int64_t m, float* y,
                 int64_t y_stride, bool round_out, int groups, int64_t group_x, const GemvStreamConfig& stream) {
    const int64_t count = w.rows / groups;
    if (m == 1) {
        GemvStreamParams p = stream_params(w, groups, x, group_x, 1, y, count, round_out);
        p.count = count;
        if (launch_gemv_stream(s, stream, p)) return;
    }
    // Passes of kMaxGemvVectors activation rows (each pass reads the weights once).
    for (int64_t m0 = 0; m0 < m; m0 += kMaxGemvVectors) {
        const int64_t mv = std::min<int64_t>(kMaxGemvVectors, m - m0);
        const float* xv = x + m0 * x_stride;
        float* yv = y + m0 * y_stride;
        switch (w.format) {
            case WeightFormat::kFp8Block:
                launch_format<static_cast<int>(WeightFormat::kFp8Block)>(s, w, nullptr, nullptr, 0, count, groups, xv,
                                                                         x_stride, 1, group_x, mv, 1, yv, y_stride,
                                                                         round_out, {});
                break;
            case WeightFormat::kFp4Row:
                launch_format<static_cast<int>(WeightFormat::kFp4Row)>(s, w, nullptr, nullptr, 0, count, groups, xv,
                                                                       x_stride, 1, group_x, mv, 1, yv, y_stride,
                                                                       round_out, {});
                break;
            case WeightFormat::kBF16:
                launch_format<static_cast<int>(WeightFormat::kBF16)>(s, w, nullptr, nullptr, 0, count, groups, xv,
                                                                     x_stride, 1, group_x, mv, 1, yv, y_stride,
                                                                     round_out, {});
                break;
            case WeightFormat::kF32:
                launch_format<static_cast<int>(WeightFormat::kF32)>(s, w, nullptr, nullptr, 0, count, groups, xv,
                                                                    x_stride, 1, group_x, mv, 1, yv, y_stride,
                                                                    round_out, {});
                break;
        }
    }
}

void launch_expert_gemv(cudaStream_t s, const StepMeta& m, WeightFormat format, Fp8Dialect dialect,
                        const WeightRef* table, int n_experts, const int32_t* ids, int64_t pairs, int x_div,
                        const float* x, int64_t k, int64_t rows, bool round_out, float* out,
                        const GemvStreamConfig& stream) {
    if (pairs == 0) return;
    WeightRef shape;
    shape.format = format;
    shape.fp8_dialect = dialect;
    shape.rows = rows;
    shape.cols = k;
    GemvStreamParams p = stream_params(shape, pairs, x, k, x_div, out, rows, round_out);
    p.table = table;
    p.ids = ids;
    p.n_experts = n_experts;
    p.meta = m;
    if (launch_gemv_stream(s, stream, p)) return;
    switch (format) {
        case WeightFormat::kFp8Block:
            launch_format<static_cast<int>(WeightFormat::kFp8Block)>(s, shape, table, ids, n_experts, rows, 1, x, k,
                                                                     x_div, 0, 1, pairs, out, rows, round_out, m);
            break;
        case WeightFormat::kFp4Row:
            launch_format<static_cast<int>(WeightFormat::kFp4Row)>(s, shape, table, ids, n_experts, rows, 1, x, k,
                                                                   x_div, 0, 1, pairs, out, rows, round_out, m);
            break;
        case WeightFormat::kBF16:
            launch_format<static_cast<int>(WeightFormat::kBF16)>(s, shape, table, ids, n_experts, rows, 1, x, k, x_div,
                                                                 0, 1, pairs, out, rows, round_out, m);
            break;
        case WeightFormat::kF32:
            break;
    }
}

}  // namespace dsv4::cuda
