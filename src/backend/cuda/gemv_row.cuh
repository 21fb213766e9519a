// One weight row's dot products in a decode GEMV, shared by the GEMV (kernels_gemv.cu) and the fused MoE decode
// kernels (kernels_moe_decode.cu), so that both compute a row's result with the same arithmetic in the same order.
//
// Lane load width: BF16 and F32 rows are read 16 bytes per lane per load. FP8 and FP4 rows 4 bytes per lane per load
// (4 or 8 elements), consecutive lanes on consecutive words, so that the activations each lane needs are also
// consecutive across the warp: one float4 (FP8) or two (FP4) per word, a few L1 wavefronts per warp load. With 16-byte
// FP8 / FP4 chunks per lane the activation loads strode 64 / 128 bytes across lanes (16-32 wavefronts per warp load):
// the expert GEMV was L1-bound at 7% of DRAM bandwidth (ncu, performance-log.md).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

namespace dsv4::cuda {

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
__host__ __device__ __forceinline__ int64_t row_bytes(int64_t cols) {
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
__device__ __forceinline__ Load<kFormat> load_words(const uint8_t* row, int index) {
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
        decode8_fp4_word(l.w[0], out);
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

// The block scales of one weight row, found once per row: the scale of load c (a word index) is entry c / words of
// the row's scale row. A shift where the block width holds a power of two of words (always, for the checkpoint's
// 128-wide FP8 and 32-wide FP4 blocks): a 64-bit division per load made the GEMV ALU-bound (PTX div.s64 per word).
template <int kFormat>
struct RowScales {
    const uint8_t* row = nullptr;
    int words = 1;  // loads per scale
    int shift = 0;  // log2(words) when words is a power of two, else -1

    RowScales() = default;
    __device__ __forceinline__ RowScales(const WeightRef& w, int64_t r) {
        if constexpr (is_fp8(kFormat) || is_fp4(kFormat)) {
            row = w.scales + (is_fp8(kFormat) ? r / w.block_rows : r) * w.scale_cols;
            words = static_cast<int>(w.block_cols) / kLoadElems<kFormat>;
            shift = (words & (words - 1)) == 0 ? __ffs(words) - 1 : -1;
        }
    }
    __device__ __forceinline__ float at(int c) const {
        if constexpr (is_fp8(kFormat) || is_fp4(kFormat)) return decode_ue8m0(row[shift >= 0 ? c >> shift : c / words]);
        return 1.0f;
    }
};

// The dot product of four decoded elements with four activations in one explicit order: every kernel that computes
// a row (the GEMVs here, the streamed GEMV, the fused MoE decode) gets the same bits, whatever contractions the
// compiler would have chosen for a written-out expression in each of them.
__device__ __forceinline__ float dot4(const float* v, float4 x) {
    float t = __fmul_rn(v[0], x.x);
    t = __fmaf_rn(v[1], x.y, t);
    t = __fmaf_rn(v[2], x.z, t);
    return __fmaf_rn(v[3], x.w, t);
}

// One load's decoded elements against its activations (kElems / 4 float4), summed in order.
template <int kElems>
__device__ __forceinline__ float word_dot(const float* vals, const float4* xx) {
    float sum = dot4(vals, xx[0]);
#pragma unroll
    for (int q = 1; q < kElems / 4; ++q) sum = __fadd_rn(sum, dot4(vals + 4 * q, xx[q]));
    return sum;
}

// A row's running sum after one load: its dot product times the load's block scale (a power of two).
__device__ __forceinline__ float add_scaled(float acc, float dot, float scale) {
    return __fmaf_rn(dot, scale, acc);
}

// The dot product of one load's decoded elements with the activations at x (global memory through the read-only
// cache, or shared memory when staged).
template <int kElems, bool kSharedX>
__device__ __forceinline__ float load_dot(const float* vals, const float* x) {
    const auto* xr = reinterpret_cast<const float4*>(x);
    float4 xx[kElems / 4];
#pragma unroll
    for (int q = 0; q < kElems / 4; ++q) xx[q] = kSharedX ? xr[q] : __ldg(xr + q);
    return word_dot<kElems>(vals, xx);
}

// Each lane's partial dot products of weight row r with the vectors xv[v * x_stride ...], v < nv (nv <= kVectors),
// added to acc[v]; the caller sums them across the warp. Lane l reads loads l, l + 32, ... in order, 64 bytes in
// flight per lane before any is decoded (latency, not bandwidth, bounds short rows).
template <int kFormat, int kVectors>
__device__ __forceinline__ void row_partials(const WeightRef& wr, int64_t r, const float* xv, int64_t x_stride, int nv,
                                             float* acc) {
    constexpr int kElems = kLoadElems<kFormat>;
    constexpr int kUnroll = 16 / kLoadWords<kFormat>;
    const int lane = threadIdx.x % 32;
    const int64_t cols = wr.cols;
    const int loads = static_cast<int>(cols / kElems);  // gemv_supported: a row holds < 2^31 loads
    const auto* row = static_cast<const uint8_t*>(wr.data) + r * row_bytes<kFormat>(cols);
    const RowScales<kFormat> scales(wr, r);
    for (int c0 = lane; c0 < loads; c0 += 32 * kUnroll) {
        Load<kFormat> raw[kUnroll] = {};
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int c = c0 + 32 * u;
            if (c < loads) raw[u] = load_words<kFormat>(row, c);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int c = c0 + 32 * u;
            if (c >= loads) break;
            const int j0 = c * kElems;
            float vals[kElems];
            decode_load<kFormat>(raw[u], wr.fp8_dialect, vals);
            const float scale = scales.at(c);
#pragma unroll
            for (int v = 0; v < kVectors; ++v) {
                if (v < nv) {
                    acc[v] = add_scaled(acc[v], load_dot<kElems, false>(vals, xv + v * x_stride + j0), scale);
                }
            }
        }
    }
}

// One weight row of a multi-row pass: its bytes, block scales and activation vector (null data: a row past the end,
// skipped).
template <int kFormat>
struct RowRef {
    const uint8_t* data = nullptr;
    RowScales<kFormat> scales;
    const float* x = nullptr;  // global memory, or shared when the caller staged it (kSharedX)
};

template <int kFormat>
__device__ __forceinline__ RowRef<kFormat> row_ref(const WeightRef& w, int64_t r, const float* x) {
    RowRef<kFormat> ref;
    ref.data = static_cast<const uint8_t*>(w.data) + r * row_bytes<kFormat>(w.cols);
    ref.scales = RowScales<kFormat>(w, r);
    ref.x = x;
    return ref;
}

// The loads of kRows rows at loads c0 + 32 u (kChecked: only those below `loads`; a null row: none).
template <int kFormat, int kRows, int kUnroll, bool kChecked>
__device__ __forceinline__ void load_rows(const RowRef<kFormat> (&rows)[kRows], int c0, int loads,
                                          Load<kFormat> (&raw)[kRows][kUnroll]) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int c = c0 + 32 * u;
            if (rows[i].data != nullptr && (!kChecked || c < loads)) raw[i][u] = load_words<kFormat>(rows[i].data, c);
        }
    }
}

// One checked pass of kRows rows from load c0: every row's loads c0 + 32 u below `loads` issued, then step(raw, u, c)
// for each of them in order.
template <int kFormat, int kRows, int kUnroll, typename Step>
__device__ __forceinline__ void checked_pass(const RowRef<kFormat> (&rows)[kRows], int c0, int loads, Step&& step) {
    Load<kFormat> raw[kRows][kUnroll] = {};
    load_rows<kFormat, kRows, kUnroll, true>(rows, c0, loads, raw);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + 32 * u;
        if (c >= loads) break;
        step(raw, u, c);
    }
}

// rows_partials with the FP8 dialect fixed at compile time (a per-load branch on it cost instructions). Full passes
// (32 kUnroll loads of every row in range) run without bounds checks; where a scale covers 32 or more consecutive
// loads (FP8's 128-wide blocks) it is the same for the whole warp at each unrolled step, so lane u looks up step u's
// scale once per pass and the warp shares it by shuffle. The sums are row_partials' (same loads per lane, same order).
template <int kFormat, int kRows, bool kSharedX, Fp8Dialect kDialect>
__device__ __forceinline__ void rows_partials_in(const RowRef<kFormat> (&rows)[kRows], int loads, float* acc) {
    constexpr int kElems = kLoadElems<kFormat>;
    constexpr int kPerRow = 32 / (kLoadWords<kFormat> * kRows);
    constexpr int kUnroll = kPerRow > 0 ? kPerRow : 1;
    constexpr int kSpan = 32 * kUnroll;
    const int lane = threadIdx.x % 32;
    bool warp_scales = is_fp8(kFormat);
#pragma unroll
    for (int i = 0; i < kRows; ++i) warp_scales &= rows[i].data == nullptr || rows[i].scales.shift >= 5;
    const int full_end = loads - loads % kSpan;
    for (int base = 0; base < full_end; base += kSpan) {
        Load<kFormat> raw[kRows][kUnroll] = {};
        load_rows<kFormat, kRows, kUnroll, false>(rows, base + lane, loads, raw);
        float step_scale[kRows] = {};  // lane u < kUnroll: the scale of step u
        if (warp_scales) {
#pragma unroll
            for (int i = 0; i < kRows; ++i) {
                if (rows[i].data != nullptr && lane < kUnroll) step_scale[i] = rows[i].scales.at(base + 32 * lane);
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int c = base + lane + 32 * u;
#pragma unroll
            for (int i = 0; i < kRows; ++i) {
                const float shared = __shfl_sync(0xffffffffu, step_scale[i], u);
                if (rows[i].data == nullptr) continue;
                float vals[kElems];
                decode_load<kFormat>(raw[i][u], kDialect, vals);
                const float scale = warp_scales ? shared : rows[i].scales.at(c);
                acc[i] = add_scaled(acc[i], load_dot<kElems, kSharedX>(vals, rows[i].x + c * kElems), scale);
            }
        }
    }
    if (full_end == loads) return;
    // The last, partial pass: checked loads, scales per load.
    checked_pass<kFormat, kRows, kUnroll>(rows, full_end + lane, loads, [&](const auto& raw, int u, int c) {
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
            if (rows[i].data == nullptr) continue;
            float vals[kElems];
            decode_load<kFormat>(raw[i][u], kDialect, vals);
            acc[i] = add_scaled(acc[i], load_dot<kElems, kSharedX>(vals, rows[i].x + c * kElems), rows[i].scales.at(c));
        }
    });
}

// Single-vector partial dot products of kRows rows of `loads` loads each (acc[i] for rows[i]), the loads of every row
// issued before any is decoded: 128 bytes in flight per lane for FP8 / FP4 whatever kRows, so that short rows (a
// 1,024-wide FP8 row is 8 words per lane) still keep enough bytes in flight. Each row's arithmetic is row_partials'
// (the same words per lane in the same order, the same sums), so a row's result does not depend on kRows.
template <int kFormat, int kRows, bool kSharedX>
__device__ __forceinline__ void rows_partials(const RowRef<kFormat> (&rows)[kRows], int loads, Fp8Dialect dialect,
                                              float* acc) {
    if (is_fp8(kFormat) && dialect == Fp8Dialect::kFnuz) {
        rows_partials_in<kFormat, kRows, kSharedX, Fp8Dialect::kFnuz>(rows, loads, acc);
    } else {
        rows_partials_in<kFormat, kRows, kSharedX, Fp8Dialect::kOcp>(rows, loads, acc);
    }
}

// Partial dot products of kRows rows with nv (<= kVectors) vectors staged in shared memory ([v][cols] at xs): each
// lane step's activations are read once for all kRows rows (not once a row), its weight words issued for every row
// before any is decoded (256 bytes in flight a lane for BF16, 128 for the other formats: registers). Each (row,
// vector)'s arithmetic is row_partials' (the same words per lane in the same order, the same dots and scaled adds): the
// same bits as gemv_kernel, whatever kRows and nv.
template <int kFormat, int kRows, int kVectors>
__device__ __forceinline__ void rows_vectors_partials(const RowRef<kFormat> (&rows)[kRows], int loads, const float* xs,
                                                      int64_t cols, int nv, Fp8Dialect dialect,
                                                      float (&acc)[kRows][kVectors]) {
    constexpr int kElems = kLoadElems<kFormat>;
    constexpr int kPerRow = (is_bf16(kFormat) ? 64 : 32) / (kLoadWords<kFormat> * kRows);  // registers
    constexpr int kUnroll = kPerRow > 0 ? kPerRow : 1;
    const int lane = threadIdx.x % 32;
    for (int c0 = lane; c0 < loads; c0 += 32 * kUnroll) {
        checked_pass<kFormat, kRows, kUnroll>(rows, c0, loads, [&](const auto& raw, int u, int c) {
            float vals[kRows][kElems], scale[kRows];
#pragma unroll
            for (int i = 0; i < kRows; ++i) {
                decode_load<kFormat>(raw[i][u], dialect, vals[i]);
                scale[i] = rows[i].data != nullptr ? rows[i].scales.at(c) : 0.0f;
            }
#pragma unroll
            for (int v = 0; v < kVectors; ++v) {
                if (v >= nv) break;
                const auto* xr = reinterpret_cast<const float4*>(xs + v * cols + c * kElems);
                float4 xx[kElems / 4];
#pragma unroll
                for (int q = 0; q < kElems / 4; ++q) xx[q] = xr[q];
#pragma unroll
                for (int i = 0; i < kRows; ++i)
                    acc[i][v] = add_scaled(acc[i][v], word_dot<kElems>(vals[i], xx), scale[i]);
            }
        });
    }
}

// Copies n floats (n a multiple of 4, 16-byte aligned) to shared memory with the whole block; the caller syncs.
__device__ __forceinline__ void stage_vector(const float* x, int64_t n, float* xs) {
    const auto* src = reinterpret_cast<const float4*>(x);
    auto* dst = reinterpret_cast<float4*>(xs);
    for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x) dst[i] = __ldg(src + i);
}

// Asks L2 for the first bytes of a row (one 128-byte line per lane) while the block stages its activations.
template <int kFormat>
__device__ __forceinline__ void prefetch_row(const RowRef<kFormat>& row, int64_t bytes) {
    const int64_t offset = static_cast<int64_t>(threadIdx.x % 32) * 128;
    if (row.data != nullptr && offset < bytes) asm volatile("prefetch.global.L2 [%0];" ::"l"(row.data + offset));
}

}  // namespace dsv4::cuda
