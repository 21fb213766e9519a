// Decode GEMV: y[v, r] = W[r, :] . x[v, :] for a few activation rows (v < kMaxGemvVectors), weights in checkpoint
// form read with 16-byte loads (16 FP8 codes, 32 FP4 codes or 8 BF16 values per lane per load) and decoded in
// registers; activations through the read-only cache. Memory-bound: one pass over the weights per call. Used when the
// weight rows are 16-byte aligned (cols a multiple of 32 for FP4, 16 for FP8, 8 for BF16); otherwise the generic
// kernel in kernels_linear.cu runs.
#include <algorithm>

#include "backend/cuda/kernels.h"

namespace dsv4::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp per row

__device__ __forceinline__ void decode16_fp8(const uint4& raw, float scale, float* out) {
    const auto* b = reinterpret_cast<const uint8_t*>(&raw);
#pragma unroll
    for (int i = 0; i < 16; ++i) out[i] = decode_e4m3(b[i]) * scale;
}

__device__ __forceinline__ void decode32_fp4(const uint4& raw, float scale, float* out) {
    const auto* b = reinterpret_cast<const uint8_t*>(&raw);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        out[2 * i] = decode_e2m1(b[i] & 0xfu) * scale;
        out[2 * i + 1] = decode_e2m1(b[i] >> 4) * scale;
    }
}

__device__ __forceinline__ void decode8_bf16(const uint4& raw, float* out) {
    const auto* h = reinterpret_cast<const uint16_t*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i] = bf16_bits_to_float(h[i]);
}

// Elements per 16-byte chunk of a weight row.
template <int kFormat>
struct Chunk;
template <>
struct Chunk<static_cast<int>(WeightFormat::kFp8Block)> {
    static constexpr int kElems = 16;
};
template <>
struct Chunk<static_cast<int>(WeightFormat::kFp4Row)> {
    static constexpr int kElems = 32;
};
template <>
struct Chunk<static_cast<int>(WeightFormat::kBF16)> {
    static constexpr int kElems = 8;
};
template <>
struct Chunk<static_cast<int>(WeightFormat::kF32)> {
    static constexpr int kElems = 4;
};

template <int kFormat>
__device__ __forceinline__ int64_t row_bytes(int64_t cols) {
    if constexpr (kFormat == static_cast<int>(WeightFormat::kFp4Row)) return cols / 2;
    if constexpr (kFormat == static_cast<int>(WeightFormat::kBF16)) return cols * 2;
    if constexpr (kFormat == static_cast<int>(WeightFormat::kF32)) return cols * 4;
    return cols;
}

// One warp per weight row. Plain mode: vectors x[v * x_stride ...] for v < m (m <= kVectors), y[v * y_stride + r].
// Expert mode (table != null): blockIdx.y is a (token, expert) pair: weight table[ids[pair]], vector
// x[(pair / x_div) * x_stride ...], output y[pair * y_stride + r]. Activations are read through the read-only cache.
template <int kFormat, int kVectors>
__global__ void gemv_kernel(WeightRef w, const WeightRef* table, const int32_t* ids, int n_experts, const float* x,
                            int64_t x_stride, int x_div, int64_t m, float* y, int64_t y_stride, bool round_out,
                            StepMeta meta) {
    constexpr int kElems = Chunk<kFormat>::kElems;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t pair = blockIdx.y;
    WeightRef wr = w;
    const float* xv = x;
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
    const int64_t r = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + warp;
    if (r >= wr.rows) return;
    const int64_t cols = wr.cols;
    float acc[kVectors] = {};
    const int64_t chunks = cols / kElems;
    const auto* row =
        reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(wr.data) + r * row_bytes<kFormat>(cols));
    // kUnroll 16-byte loads in flight per lane before any is decoded (latency, not bandwidth, bounds short rows).
    constexpr int kUnroll = 4;
    for (int64_t c0 = lane; c0 < chunks; c0 += 32 * kUnroll) {
        uint4 raw[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t c = c0 + 32 * u;
            raw[u] = c < chunks ? __ldg(row + c) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t c = c0 + 32 * u;
            if (c >= chunks) break;
            float vals[kElems];
            const int64_t j0 = c * kElems;
            if constexpr (kFormat == static_cast<int>(WeightFormat::kFp8Block)) {
                decode16_fp8(raw[u], decode_ue8m0(wr.scales[(r / wr.block_rows) * wr.scale_cols + j0 / wr.block_cols]),
                             vals);
            } else if constexpr (kFormat == static_cast<int>(WeightFormat::kFp4Row)) {
                decode32_fp4(raw[u], decode_ue8m0(wr.scales[r * wr.scale_cols + j0 / wr.block_cols]), vals);
            } else if constexpr (kFormat == static_cast<int>(WeightFormat::kBF16)) {
                decode8_bf16(raw[u], vals);
            } else {
                vals[0] = __uint_as_float(raw[u].x);
                vals[1] = __uint_as_float(raw[u].y);
                vals[2] = __uint_as_float(raw[u].z);
                vals[3] = __uint_as_float(raw[u].w);
            }
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
                    acc[v] += sum;
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
                   int64_t rows, const float* x, int64_t x_stride, int x_div, int64_t m, int64_t pairs, float* y,
                   int64_t y_stride, bool round_out, const StepMeta& meta) {
    const dim3 grid(blocks_for(rows, kRowsPerBlock), static_cast<unsigned>(table != nullptr ? pairs : 1));
    if (table != nullptr || m == 1) {
        gemv_kernel<kFormat, 1><<<grid, kRowsPerBlock * 32, 0, s>>>(w, table, ids, n_experts, x, x_stride, x_div, m, y,
                                                                    y_stride, round_out, meta);
    } else {
        gemv_kernel<kFormat, kMaxGemvVectors><<<grid, kRowsPerBlock * 32, 0, s>>>(
            w, table, ids, n_experts, x, x_stride, x_div, m, y, y_stride, round_out, meta);
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
                 int64_t y_stride, bool round_out) {
    // Passes of kMaxGemvVectors activation rows (each pass reads the weights once).
    for (int64_t m0 = 0; m0 < m; m0 += kMaxGemvVectors) {
        const int64_t mv = std::min<int64_t>(kMaxGemvVectors, m - m0);
        const float* xv = x + m0 * x_stride;
        float* yv = y + m0 * y_stride;
        switch (w.format) {
            case WeightFormat::kFp8Block:
                launch_format<static_cast<int>(WeightFormat::kFp8Block)>(
                    s, w, nullptr, nullptr, 0, w.rows, xv, x_stride, 1, mv, 1, yv, y_stride, round_out, {});
                break;
            case WeightFormat::kFp4Row:
                launch_format<static_cast<int>(WeightFormat::kFp4Row)>(s, w, nullptr, nullptr, 0, w.rows, xv, x_stride,
                                                                       1, mv, 1, yv, y_stride, round_out, {});
                break;
            case WeightFormat::kBF16:
                launch_format<static_cast<int>(WeightFormat::kBF16)>(s, w, nullptr, nullptr, 0, w.rows, xv, x_stride, 1,
                                                                     mv, 1, yv, y_stride, round_out, {});
                break;
            case WeightFormat::kF32:
                launch_format<static_cast<int>(WeightFormat::kF32)>(s, w, nullptr, nullptr, 0, w.rows, xv, x_stride, 1,
                                                                    mv, 1, yv, y_stride, round_out, {});
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
            launch_format<static_cast<int>(WeightFormat::kFp8Block)>(s, shape, table, ids, n_experts, rows, x, k, x_div,
                                                                     1, pairs, out, rows, round_out, m);
            break;
        case WeightFormat::kFp4Row:
            launch_format<static_cast<int>(WeightFormat::kFp4Row)>(s, shape, table, ids, n_experts, rows, x, k, x_div,
                                                                   1, pairs, out, rows, round_out, m);
            break;
        case WeightFormat::kBF16:
            launch_format<static_cast<int>(WeightFormat::kBF16)>(s, shape, table, ids, n_experts, rows, x, k, x_div, 1,
                                                                 pairs, out, rows, round_out, m);
            break;
        case WeightFormat::kF32:
            break;
    }
}

}  // namespace dsv4::cuda
