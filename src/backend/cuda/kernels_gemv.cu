// Decode GEMV: y[v, r] = W[r, :] . x[v, :] for a few activation rows (v < kMaxGemvVectors), weights in checkpoint
// form decoded in registers, activations through the read-only cache. Memory-bound: one pass over the weights per
// call. Used when the weight rows are aligned for the loads (cols a multiple of 128 for FP8, 32 for FP4, 8 for BF16,
// 4 for F32: gemv_supported); otherwise the generic kernel in kernels_linear.cu runs.
//
// Lane load width: BF16 and F32 rows are read 16 bytes per lane per load. FP8 and FP4 rows 4 bytes per lane per load
// (4 or 8 elements), consecutive lanes on consecutive words, so that the activations each lane needs are also
// consecutive across the warp: one float4 (FP8) or two (FP4) per word, a few L1 wavefronts per warp load. With 16-byte
// FP8 / FP4 chunks per lane the activation loads strode 64 / 128 bytes across lanes (16-32 wavefronts per warp load):
// the expert GEMV was L1-bound at 7% of DRAM bandwidth (ncu, performance-log.md).
#include <algorithm>

#include "backend/cuda/kernels.h"

namespace dsv4::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp per row

constexpr bool is_fp8(int f) {
    return f == static_cast<int>(WeightFormat::kFp8Block);
}
constexpr bool is_fp4(int f) {
    return f == static_cast<int>(WeightFormat::kFp4Row);
}
constexpr bool is_bf16(int f) {
    return f == static_cast<int>(WeightFormat::kBF16);
}

// 4-byte words per lane per load, and the elements they hold.
template <int kFormat>
constexpr int kLoadWords = is_fp8(kFormat) || is_fp4(kFormat) ? 1 : 4;
template <int kFormat>
constexpr int kLoadElems = is_fp8(kFormat)    ? 4
                           : is_fp4(kFormat)  ? 8
                           : is_bf16(kFormat) ? 8
                                              : 4;

template <int kFormat>
__device__ __forceinline__ int64_t row_bytes(int64_t cols) {
    if constexpr (is_fp4(kFormat)) return cols / 2;
    if constexpr (is_bf16(kFormat)) return cols * 2;
    if constexpr (kFormat == static_cast<int>(WeightFormat::kF32)) return cols * 4;
    return cols;
}

// One lane load: kLoadWords words of the row.
template <int kFormat>
struct Load {
    uint32_t w[kLoadWords<kFormat>];
};

template <int kFormat>
__device__ __forceinline__ Load<kFormat> load_words(const uint8_t* row, int64_t index) {
    Load<kFormat> l;
    if constexpr (kLoadWords<kFormat> == 4) {
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(row) + index);
        l.w[0] = v.x;
        l.w[1] = v.y;
        l.w[2] = v.z;
        l.w[3] = v.w;
    } else {
        l.w[0] = __ldg(reinterpret_cast<const uint32_t*>(row) + index);
    }
    return l;
}

// The load's elements, unscaled (FP8 / FP4 block scales are powers of two, applied once per load by the caller);
// FP8 codes in the weight's dialect.
template <int kFormat>
__device__ __forceinline__ void decode_load(const Load<kFormat>& l, Fp8Dialect dialect, float* out) {
    if constexpr (is_fp8(kFormat)) {
        decode4_e4m3(l.w[0], dialect, out);
    } else if constexpr (is_fp4(kFormat)) {
#pragma unroll
        for (int i = 0; i < 8; ++i) out[i] = decode_e2m1((l.w[0] >> (4 * i)) & 0xfu);
    } else if constexpr (is_bf16(kFormat)) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            out[2 * i] = __uint_as_float(l.w[i] << 16);
            out[2 * i + 1] = __uint_as_float(l.w[i] & 0xffff0000u);
        }
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) out[i] = __uint_as_float(l.w[i]);
    }
}

// Block scale of the load starting at element j0 of row r (1 for unscaled formats).
template <int kFormat>
__device__ __forceinline__ float load_scale(const WeightRef& w, int64_t r, int64_t j0) {
    if constexpr (is_fp8(kFormat)) return decode_ue8m0(w.scales[(r / w.block_rows) * w.scale_cols + j0 / w.block_cols]);
    if constexpr (is_fp4(kFormat)) return decode_ue8m0(w.scales[r * w.scale_cols + j0 / w.block_cols]);
    return 1.0f;
}

// One warp per weight row. Plain mode: vectors x[v * x_stride ...] for v < m (m <= kVectors), y[v * y_stride + r];
// grouped (blockIdx.z = g of gridDim.z groups of `count` rows): rows g * count .. read x + g * group_x. Expert mode
// (table != null): blockIdx.y is a (token, expert) pair: weight table[ids[pair]], vector x[(pair / x_div) * x_stride
// ...], output y[pair * y_stride + r]. Every vector count runs the same per-row arithmetic, so a row's result does not
// depend on the batch.
template <int kFormat, int kVectors>
__global__ void gemv_kernel(WeightRef w, const WeightRef* table, const int32_t* ids, int n_experts, const float* x,
                            int64_t x_stride, int x_div, int64_t count, int64_t group_x, int64_t m, float* y,
                            int64_t y_stride, bool round_out, StepMeta meta) {
    constexpr int kElems = kLoadElems<kFormat>;
    // Loads in flight per lane before any is decoded: 64 bytes (latency, not bandwidth, bounds short rows).
    constexpr int kUnroll = 16 / kLoadWords<kFormat>;
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
    const int64_t cols = wr.cols;
    float acc[kVectors] = {};
    const int64_t loads = cols / kElems;
    const auto* row = static_cast<const uint8_t*>(wr.data) + r * row_bytes<kFormat>(cols);
    for (int64_t c0 = lane; c0 < loads; c0 += 32 * kUnroll) {
        Load<kFormat> raw[kUnroll] = {};
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t c = c0 + 32 * u;
            if (c < loads) raw[u] = load_words<kFormat>(row, c);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t c = c0 + 32 * u;
            if (c >= loads) break;
            const int64_t j0 = c * kElems;
            float vals[kElems];
            decode_load<kFormat>(raw[u], wr.fp8_dialect, vals);
            const float scale = load_scale<kFormat>(wr, r, j0);
#pragma unroll
            for (int v = 0; v < kVectors; ++v) {
                if (v < nv) {
                    const auto* xr = reinterpret_cast<const float4*>(xv + v * x_stride + j0);
                    float sum = 0.0f;
#pragma unroll
                    for (int i = 0; i < kElems / 4; ++i) {
                        const float4 xx = __ldg(xr + i);
                        sum += vals[4 * i] * xx.x + vals[4 * i + 1] * xx.y + vals[4 * i + 2] * xx.z +
                               vals[4 * i + 3] * xx.w;
                    }
                    acc[v] += sum * scale;  // a power of two: the same as scaling every element
                }
            }
        }
    }
#pragma unroll
    for (int v = 0; v < kVectors; ++v) {
        const float s = warp_sum(acc[v]);
        if (lane == 0 && v < nv) {
            float* out = table != nullptr ? y + pair * y_stride + r : y + v * y_stride + r;
            *out = round_out ? to_bf16(s) : s;
        }
    }
}

template <int kFormat>
void launch_format(cudaStream_t s, const WeightRef& w, const WeightRef* table, const int32_t* ids, int n_experts,
                   int64_t rows, int groups, const float* x, int64_t x_stride, int x_div, int64_t group_x, int64_t m,
                   int64_t pairs, float* y, int64_t y_stride, bool round_out, const StepMeta& meta) {
    const dim3 grid(blocks_for(rows, kRowsPerBlock), static_cast<unsigned>(table != nullptr ? pairs : 1),
                    static_cast<unsigned>(groups));
    if (table != nullptr || m == 1) {
        gemv_kernel<kFormat, 1><<<grid, kRowsPerBlock * 32, 0, s>>>(w, table, ids, n_experts, x, x_stride, x_div, rows,
                                                                    group_x, m, y, y_stride, round_out, meta);
    } else {
        gemv_kernel<kFormat, kMaxGemvVectors><<<grid, kRowsPerBlock * 32, 0, s>>>(
            w, table, ids, n_experts, x, x_stride, x_div, rows, group_x, m, y, y_stride, round_out, meta);
    }
}

}  // namespace

bool gemv_supported(WeightFormat format, int64_t cols, int64_t m) {
    if (m < 1) return false;
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
                 int64_t y_stride, bool round_out, int groups, int64_t group_x) {
    const int64_t count = w.rows / groups;
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

void launch_expert_gemv(cudaStream_t s, const StepMeta& m, WeightFormat format, const WeightRef* table, int n_experts,
                        const int32_t* ids, int64_t pairs, int x_div, const float* x, int64_t k, int64_t rows,
                        bool round_out, float* out) {
    if (pairs == 0) return;
    WeightRef shape;
    shape.rows = rows;
    shape.cols = k;
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
