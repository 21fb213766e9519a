// Device helpers shared by the CUDA kernels: number formats (bit-exact with core/float_formats.h), warp and block
// reductions, and the per-step metadata the kernels read. Only .cu files include this.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

#include "backend/weights.h"

namespace dsv4::cuda {

// Per-step metadata in device memory (backend.h StepBatch, flattened).
struct StepMeta {
    const int32_t* tokens = nullptr;        // [n_tokens]
    const int32_t* positions = nullptr;     // [n_tokens]
    const int32_t* seq_of_token = nullptr;  // [n_tokens]
    const int32_t* seq_slot = nullptr;      // [n_seqs]
    const int32_t* seq_token_begin = nullptr;
    const int32_t* seq_n_tokens = nullptr;
    const int32_t* seq_start = nullptr;  // absolute position of the sequence's first step token
    const int32_t* seq_table_offset = nullptr;
    const int32_t* seq_table_len = nullptr;
    const int32_t* block_tables = nullptr;  // flattened per-sequence block tables
    int32_t n_tokens = 0;
    int32_t n_seqs = 0;
    int32_t num_blocks = 0;
    int32_t* error_flag = nullptr;  // set when a kernel meets an out-of-range index
};

// An FP8 quantiser as kernels take it (core Fp8Quant: the site's dialect and maximum, core/fp8_dialect.h).
struct Fp8QuantDev {
    bool fnuz = false;
    float qmax = 448.0f;
};
inline Fp8QuantDev fp8_quant_dev(const Fp8Quant& q) {
    return {q.dialect == Fp8Dialect::kFnuz, q.qmax};
}

enum ErrorBits : int32_t {
    kErrorBlockTable = 1,  // a position outside the sequence's block table
    kErrorExpertId = 2,    // an expert id outside [0, n_experts)
    kErrorTopkIndex = 4,   // an indexer pick outside the visible entries (ignored, flagged)
};

#ifdef __CUDACC__  // device helpers: only for nvcc; host code sees the plain structs above

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

// The argmax order of backend/model_ops.h (argmax_of_row): a larger value wins, equal values: the lower index.
__device__ __forceinline__ bool argmax_better(float v, int32_t i, float best, int32_t best_i) {
    return v > best || (v == best && i < best_i);
}

__device__ __forceinline__ float bf16_bits_to_float(uint16_t bits) {
    return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

// Round-to-nearest-even to bf16 precision (NaN stays NaN), matching core/float_formats.h round_to_bf16.
__device__ __forceinline__ float to_bf16(float v) {
    uint32_t u = __float_as_uint(v);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) return v;
    u += 0x7fffu + ((u >> 16) & 1u);
    return __uint_as_float(u & 0xffff0000u);
}

// OCP e4m3fn (bias 7, max 448, S.1111.111 = NaN).
__device__ __forceinline__ float decode_e4m3(uint8_t code) {
    const uint32_t sign = (code & 0x80u) << 24;
    const uint32_t exp = (code >> 3) & 0xfu;
    const uint32_t man = code & 0x7u;
    if (exp == 0xf && man == 0x7) return __uint_as_float(0x7fc00000u);
    float v;
    if (exp == 0) {
        v = static_cast<float>(man) * 0.001953125f;  // man * 2^-9 (subnormal)
    } else {
        v = __uint_as_float(((exp + 120u) << 23) | (man << 20));  // rebias 7 -> 127
    }
    return __uint_as_float(__float_as_uint(v) | sign);
}

// FNUZ e4m3 (bias 8, max 240, 0x80 = NaN, no -0), decoded in software: the hardware's e4m3 is OCP only, and FNUZ
// bytes must never go through it (the same byte read as OCP is twice the value).
__device__ __forceinline__ float decode_e4m3_fnuz(uint8_t code) {
    if (code == 0x80u) return __uint_as_float(0x7fc00000u);
    const uint32_t sign = (code & 0x80u) << 24;
    const uint32_t exp = (code >> 3) & 0xfu;
    const uint32_t man = code & 0x7u;
    float v;
    if (exp == 0) {
        v = static_cast<float>(man) * 0.0009765625f;  // man * 2^-10 (subnormal)
    } else {
        v = __uint_as_float(((exp + 119u) << 23) | (man << 20));  // rebias 8 -> 127
    }
    return __uint_as_float(__float_as_uint(v) | sign);
}

__device__ __forceinline__ float decode_e4m3(uint8_t code, Fp8Dialect dialect) {
    return dialect == Fp8Dialect::kFnuz ? decode_e4m3_fnuz(code) : decode_e4m3(code);
}

// Four OCP e4m3 codes (little-endian in `word`) by the hardware conversion (cvt e4m3x2 -> f16x2, sm_89+): exact, as
// every e4m3 value is an fp16 value, so the floats equal decode_e4m3's (NaN stays NaN) at a fraction of the ALU work.
__device__ __forceinline__ void decode4_e4m3(uint32_t word, float* out) {
    const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word & 0xffffu), __NV_E4M3);
    const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> 16), __NV_E4M3);
    const float2 a = __half22float2(__half2(lo)), b = __half22float2(__half2(hi));
    out[0] = a.x;
    out[1] = a.y;
    out[2] = b.x;
    out[3] = b.y;
}

// Four e4m3 codes of a dialect: OCP by the hardware conversion, FNUZ in software.
__device__ __forceinline__ void decode4_e4m3(uint32_t word, Fp8Dialect dialect, float* out) {
    if (dialect == Fp8Dialect::kFnuz) {
#pragma unroll
        for (int i = 0; i < 4; ++i) out[i] = decode_e4m3_fnuz(static_cast<uint8_t>(word >> (8 * i)));
        return;
    }
    decode4_e4m3(word, out);
}

// The FNUZ e4m3 code of v, rounded to nearest even and saturated at +-240 (core encode_e4m3_fnuz), built on the
// hardware's OCP conversion as arithmetic only: the FNUZ grid below 224 is the OCP grid halved, so rounding v on it
// is rounding 2v on OCP's (the same code byte); (224, 232] rounds to 224 (0x7E, ties to even), above 232 to 240.
__device__ __forceinline__ uint8_t encode_e4m3_fnuz_dev(float v) {
    if (isnan(v)) return 0x80u;
    if (fabsf(v) > 232.0f) return signbit(v) ? 0xffu : 0x7fu;
    const auto code = static_cast<uint8_t>(__nv_cvt_float_to_fp8(2.0f * v, __NV_SATFINITE, __NV_E4M3));
    return (code & 0x7fu) == 0 ? 0u : code;  // no -0
}

// e2m1 from its bits (a table lookup would land in local memory): exponent e = bits 2..1, mantissa m = bit 0;
// e = 0 is the subnormal 0.5 * m, else 2^(e-1) * (1 + m / 2); bit 3 is the sign.
__device__ __forceinline__ float decode_e2m1(uint32_t code) {
    const uint32_t e = (code >> 1) & 3u, m = code & 1u;
    uint32_t bits = e != 0u ? (((e + 126u) << 23) | (m << 22)) : (m != 0u ? 0x3f000000u : 0u);
    bits |= (code & 8u) << 28;
    return __uint_as_float(bits);
}

// The eight e2m1 values of a sign-split FP4 word (backend/fp4_layout.h) as floats, column 0 first (exact: every e2m1
// value is an e4m3 value), by the word's expansion through the unscaled table and the hardware e4m3 conversion.
__device__ __forceinline__ void decode8_fp4_word(uint32_t w, float* out) {
    const Fp4Bytes e = expand_fp4_word(w, kE2m1E4m3Lo, kE2m1E4m3Hi);
    decode4_e4m3(e.lo, out);
    decode4_e4m3(e.hi, out + 4);
}

// 2^e for e in [-127, 127], exactly ldexpf(1.0f, e) there, from the bits (ldexpf is a library call of a dozen
// instructions; the activation quantizers take two a 128-value block).
__device__ __forceinline__ float exp2i(int e) {
    return __int_as_float(e > -127 ? (e + 127) << 23 : 0x00400000);
}

// 2^(e - 127); 0xFF is NaN. Built from the bits (ldexpf is a library call): e in [1, 254] is the float exponent
// field itself, e = 0 is the subnormal 2^-127.
__device__ __forceinline__ float decode_ue8m0(uint8_t e) {
    if (e == 0xff) return __uint_as_float(0x7fc00000u);
    return __uint_as_float(e != 0 ? static_cast<uint32_t>(e) << 23 : 0x00400000u);
}

// Visits i = first, first + stride, ... below end, kBatch at a time: every load(i) of a batch is issued before any
// use(i, value) of it. For loops whose stores may alias their loads as far as the compiler knows, or whose uses
// depend on each other: written plainly they make one memory round trip an element.
// Index: the loop's integer type (int where 32 bits do, as the loops it replaced).
template <int kBatch, typename Index, typename Load, typename Use>
__device__ __forceinline__ void batched_loads(Index first, Index end, Index stride, Load load, Use use) {
    using Value = decltype(load(first));
    for (Index i0 = first; i0 < end; i0 += kBatch * stride) {
        Value v[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
            if (i0 + j * stride < end) v[j] = load(i0 + j * stride);
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
            if (i0 + j * stride < end) use(i0 + j * stride, v[j]);
        }
    }
}

// The four UE8M0 scales of one word (byte i is scale i), as decode_ue8m0 gives them. A byte of 1..254 is the float's
// exponent field as it stands, so it moves into place by a shift and a mask (two instructions, not six); a word holding
// a 0 (2^-127, subnormal) or 255 (NaN) byte takes the byte-by-byte path.
__device__ __forceinline__ void decode_ue8m0_x4(uint32_t w, float out[4]) {
    const uint32_t zero_byte = (w - 0x01010101u) & ~w & 0x80808080u;
    const uint32_t ff_byte = (~w - 0x01010101u) & w & 0x80808080u;
    if ((zero_byte | ff_byte) != 0) {
#pragma unroll
        for (int i = 0; i < 4; ++i) out[i] = decode_ue8m0(static_cast<uint8_t>(w >> (8 * i)));
        return;
    }
    out[0] = __uint_as_float((w << 23) & 0x7f800000u);
    out[1] = __uint_as_float((w << 15) & 0x7f800000u);
    out[2] = __uint_as_float((w << 7) & 0x7f800000u);
    out[3] = __uint_as_float((w >> 1) & 0x7f800000u);
}

// Element (r, j) of a weight as this backend holds it (checkpoint form; FP4 codes in sign-split words).
__device__ __forceinline__ float weight_at(const WeightRef& w, int64_t r, int64_t j) {
    const auto* base = static_cast<const uint8_t*>(w.data);
    switch (w.format) {
        case WeightFormat::kF32:
            return static_cast<const float*>(w.data)[r * w.cols + j];
        case WeightFormat::kBF16: {
            uint16_t bits;
            memcpy(&bits, base + (r * w.cols + j) * 2, 2);
            return bf16_bits_to_float(bits);
        }
        case WeightFormat::kFp8Block: {
            const float s = decode_ue8m0(w.scales[(r / w.block_rows) * w.scale_cols + j / w.block_cols]);
            return decode_e4m3(base[r * w.cols + j], w.fp8_dialect) * s;
        }
        case WeightFormat::kFp4Row: {  // sign-split words (backend/fp4_layout.h): a row is cols / 8 of them
            const uint32_t word = reinterpret_cast<const uint32_t*>(base)[(r * w.cols + j) / 8];
            const float s = decode_ue8m0(w.scales[r * w.scale_cols + j / w.block_cols]);
            return decode_e2m1(fp4_code_at(word, static_cast<int>(j % 8))) * s;
        }
    }
    return 0.0f;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result. `scratch` >= 32 values.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    T total = lane < warps ? scratch[lane] : T(0);
    if (warp == 0) total = warp_sum(total);
    if (threadIdx.x == 0) scratch[0] = total;
    __syncthreads();
    return scratch[0];
}

// Arithmetic of the numerics modes (the CPU's backend/cpu/cpu_numerics.h): Acc = float in exact and fast numerics;
// double in reference numerics, where every sum and transcendental is computed in double and rounded to float only
// where a value is stored, so that the CPU and GPU get the same floats whatever their summation orders
// (core/dot_f64.h) and hence the same bf16 / FP8 roundings and top-k picks.
__device__ __forceinline__ float exp_acc(float v) {
    return expf(v);
}
__device__ __forceinline__ double exp_acc(double v) {
    return exp(v);
}
__device__ __forceinline__ float sqrt_acc(float v) {
    return sqrtf(v);
}
__device__ __forceinline__ double sqrt_acc(double v) {
    return sqrt(v);
}
__device__ __forceinline__ float log1p_acc(float v) {
    return log1pf(v);
}
__device__ __forceinline__ double log1p_acc(double v) {
    return log1p(v);
}

// The float an Acc result is stored as: rounded to float, then to bf16 when `round`.
template <typename Acc>
__device__ __forceinline__ float store_acc(Acc v, bool round) {
    const float f = static_cast<float>(v);
    return round ? to_bf16(f) : f;
}

// SwiGLU of one (gate, up) pair with DeepSeek's clamp (limit > 0): silu(min(g, limit)) * clamp(u, -limit, limit).
// Shared by the SwiGLU kernel and the fused MoE decode kernels so both round the same way.
template <typename Acc>
__device__ __forceinline__ Acc swiglu_acc(float gv, float uv, float limit) {
    if (limit > 0.0f) {  // comparisons, not fminf / fmaxf: a NaN stays NaN (as std::min / std::clamp on the CPU)
        gv = limit < gv ? limit : gv;
        uv = uv < -limit ? -limit : (limit < uv ? limit : uv);
    }
    return Acc(gv) / (Acc(1) + exp_acc(-Acc(gv))) * uv;
}

// One routed expert's output added into the MoE combine (acc += v * weight), as separately rounded multiply and add
// (no fused multiply-add) so that the combine kernel and the fused decode kernels give the same bits.
__device__ __forceinline__ float combine_add(float acc, float v, float weight) {
    return __fadd_rn(acc, __fmul_rn(v, weight));
}
__device__ __forceinline__ double combine_add(double acc, double v, double weight) {
    return acc + v * weight;
}

// Products rounded on their own: the compiler may fuse a * c - b * s into an FMA either way round, and differently in
// different kernels; rope_pair's callers must all give the same bits.
__device__ __forceinline__ float mul_rn(float a, float b) {
    return __fmul_rn(a, b);
}
__device__ __forceinline__ double mul_rn(double a, double b) {
    return __dmul_rn(a, b);
}

// Interleaved RoPE of pair i of the trailing rope dims of one head row of token t: the pair (a, b) rotated into
// (v0, v1).
// Its two steps: the cosine and sine of pair i's angle at token t's position (for every head of the token), then the
// rotation.
__device__ __forceinline__ float2 rope_cos_sin_at(int32_t position, float inv_freq, bool inverse) {
    const float angle = static_cast<float>(position) * inv_freq;  // float32 product, as the reference
    const float c = static_cast<float>(cos(static_cast<double>(angle)));
    const float s = static_cast<float>(sin(static_cast<double>(angle)));
    return make_float2(c, inverse ? -s : s);
}
__device__ __forceinline__ float2 rope_cos_sin(const StepMeta& m, int t, int i, const float* inv_freq, bool inverse) {
    return rope_cos_sin_at(m.positions[t], inv_freq[i], inverse);
}
template <typename Acc>
__device__ __forceinline__ void rope_rotate(float2 cs, bool round, Acc a, Acc b, float& v0, float& v1) {
    v0 = store_acc(mul_rn(a, Acc(cs.x)) - mul_rn(b, Acc(cs.y)), round);
    v1 = store_acc(mul_rn(b, Acc(cs.x)) + mul_rn(a, Acc(cs.y)), round);
}
template <typename Acc>
__device__ void rope_values(const StepMeta& m, int t, int i, const float* inv_freq, bool inverse, bool round, Acc a,
                            Acc b, float& v0, float& v1) {
    rope_rotate<Acc>(rope_cos_sin(m, t, i, inv_freq, inverse), round, a, b, v0, v1);
}

// The same in place (v: the pair).
template <typename Acc>
__device__ void rope_pair(const StepMeta& m, int t, int i, const float* inv_freq, bool inverse, bool round, float* v) {
    const Acc a = v[0], b = v[1];
    rope_values<Acc>(m, t, i, inv_freq, inverse, round, a, b, v[0], v[1]);
}

__device__ __forceinline__ void flag_error(const StepMeta& m, int32_t bit) {
    if (m.error_flag != nullptr) atomicOr(m.error_flag, bit);
}

// Physical row of logical entry `entry` of sequence `seq` in a paged store with `per_block` entries per block;
// -1 when the block table does not cover it.
__device__ __forceinline__ int64_t paged_row(const StepMeta& m, int seq, int64_t entry, int per_block) {
    const int64_t block = entry / per_block;
    if (entry < 0 || block >= m.seq_table_len[seq]) return -1;
    const int32_t physical = m.block_tables[m.seq_table_offset[seq] + block];
    if (physical < 0 || physical >= m.num_blocks) return -1;
    return static_cast<int64_t>(physical) * per_block + entry % per_block;
}

#endif  // __CUDACC__

inline unsigned blocks_for(int64_t n, int per_block) {
    return static_cast<unsigned>((n + per_block - 1) / per_block);
}

}  // namespace dsv4::cuda
