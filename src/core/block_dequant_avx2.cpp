// AVX2 + FMA + F16C kernels (8 floats per vector). Compiled for that target per function, selected at run time.
#include "core/simd_kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstring>

#define DSV4_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace dsv4::simd {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

DSV4_AVX2 inline float hsum(__m256 v) {
    __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
    sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
    return _mm_cvtss_f32(sum);
}

DSV4_AVX2 inline __m128i load8_bytes(const uint8_t* p) {
    int64_t word = 0;
    std::memcpy(&word, p, sizeof(word));
    return _mm_cvtsi64_si128(word);
}

// 8 e4m3 codes -> value * factor / 2^shift (see e4m3_block_factor); NaN codes -> NaN.
DSV4_AVX2 inline __m256 decode8_e4m3(const uint8_t* codes, __m256 factor, bool fnuz) {
    const __m128i c = _mm_cvtepu8_epi16(load8_bytes(codes));
    const __m128i magnitude = _mm_and_si128(c, _mm_set1_epi16(0x7F));
    const __m128i sign = _mm_slli_epi16(_mm_and_si128(c, _mm_set1_epi16(0x80)), 8);
    const __m128i half = _mm_or_si128(sign, _mm_slli_epi16(magnitude, 7));
    const __m256 value = _mm256_mul_ps(_mm256_cvtph_ps(half), factor);
    const __m128i nan16 =
        fnuz ? _mm_cmpeq_epi16(c, _mm_set1_epi16(0x80)) : _mm_cmpeq_epi16(magnitude, _mm_set1_epi16(0x7F));
    return _mm256_blendv_ps(value, _mm256_set1_ps(kNaN), _mm256_castsi256_ps(_mm256_cvtepi16_epi32(nan16)));
}

// 8 e2m1 codes from 4 packed bytes; magnitudes = the 8 magnitudes already multiplied by the block scale.
DSV4_AVX2 inline __m256 decode8_e2m1(const uint8_t* packed, __m256 magnitudes) {
    uint32_t word = 0;
    std::memcpy(&word, packed, sizeof(word));
    const __m128i bytes = _mm_cvtepu8_epi16(_mm_cvtsi32_si128(static_cast<int>(word)));
    // Each 16-bit lane 0x00HL becomes 0x0H0L: bytes in element order (low nibble = even element first).
    const __m128i nibbles = _mm_or_si128(_mm_and_si128(bytes, _mm_set1_epi16(0x0F)),
                                         _mm_slli_epi16(_mm_and_si128(bytes, _mm_set1_epi16(0xF0)), 4));
    const __m256i codes = _mm256_cvtepu8_epi32(nibbles);
    const __m256 magnitude = _mm256_permutevar8x32_ps(magnitudes, codes);  // uses the low 3 bits
    const __m256 sign = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(codes, _mm256_set1_epi32(8)), 28));
    return _mm256_xor_ps(magnitude, sign);
}

DSV4_AVX2 inline __m256 e2m1_magnitudes_scaled(uint8_t scale_byte) {
    return _mm256_mul_ps(_mm256_loadu_ps(kE2M1Values), _mm256_set1_ps(ue8m0_table()[scale_byte]));
}

DSV4_AVX2 inline __m256 decode8_bf16(const uint16_t* w) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

DSV4_AVX2 void bf16_to_f32_avx2(const uint16_t* in, float* out, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, decode8_bf16(in + i));
    for (; i < n; ++i) out[i] = decode_bf16(in[i]);
}

DSV4_AVX2 void f32_to_bf16_avx2(const float* in, uint16_t* out, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(in + i);
        const __m256i bits = _mm256_castps_si256(v);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
        const __m256i rounded =
            _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), lsb), 16);
        const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
        const __m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
        const __m256i result =
            _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(quiet_nan), is_nan));
        const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(result), _mm256_extracti128_si256(result, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
    }
    for (; i < n; ++i) out[i] = encode_bf16(in[i]);
}

DSV4_AVX2 void fp8_to_f32_avx2(const uint8_t* in, float* out, size_t n, Fp8Format dialect) {
    const float* table = fp8_decode_table(dialect).data();
    size_t i = 0;
    if (dialect == Fp8Format::kE4M3Ocp || dialect == Fp8Format::kE4M3Fnuz) {
        const bool fnuz = dialect == Fp8Format::kE4M3Fnuz;
        const __m256 factor = _mm256_set1_ps(fnuz ? 128.0f : 256.0f);
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, decode8_e4m3(in + i, factor, fnuz));
    } else {
        for (; i + 8 <= n; i += 8) {
            const __m256i index = _mm256_cvtepu8_epi32(load8_bytes(in + i));
            _mm256_storeu_ps(out + i, _mm256_i32gather_ps(table, index, 4));
        }
    }
    for (; i < n; ++i) out[i] = table[in[i]];
}

DSV4_AVX2 void dequant_fp8_range_avx2(const uint8_t* codes, const uint8_t* scales, int block_k, Fp8Dialect dialect,
                                      int64_t begin, int64_t end, float* out) {
    const bool fnuz = dialect == Fp8Dialect::kFnuz;
    for (int64_t j = begin; j < end;) {
        const int64_t segment_end = block_end(j, block_k, end);
        float factor = 0.0f;
        if (e4m3_block_factor(scales[j / block_k], e4m3_fp16_shift(dialect), &factor)) {
            const __m256 f = _mm256_set1_ps(factor);
            for (; j + 8 <= segment_end; j += 8) _mm256_storeu_ps(out + (j - begin), decode8_e4m3(codes + j, f, fnuz));
        }
        scalar_dequant_fp8_range(codes, scales, block_k, dialect, j, segment_end, out + (j - begin));
        j = segment_end;
    }
}

// Whole blocks of a row whose blocks split into 8-element groups (the checkpoint's 32), from a block start: no
// division or table lookup per group. Returns where it stopped (the generic loop finishes the row).
DSV4_AVX2 int64_t dequant_fp4_whole_blocks_avx2(const uint8_t* packed, const uint8_t* scales, int block_k,
                                                int64_t begin, int64_t end, float* out) {
    if (block_k % 8 != 0 || begin % block_k != 0) return begin;
    const float* scale_values = ue8m0_table();
    const __m256 values = _mm256_loadu_ps(kE2M1Values);
    int64_t j = begin;
    for (const uint8_t* s = scales + begin / block_k; j + block_k <= end; j += block_k, ++s) {
        const __m256 magnitudes = _mm256_mul_ps(values, _mm256_set1_ps(scale_values[*s]));
        for (int q = 0; q < block_k; q += 8) {
            _mm256_storeu_ps(out + (j + q - begin), decode8_e2m1(packed + (j + q) / 2, magnitudes));
        }
    }
    return j;
}

DSV4_AVX2 void dequant_fp4_range_avx2(const uint8_t* packed, const uint8_t* scales, int block_k, int64_t begin,
                                      int64_t end, float* out) {
    const int64_t whole = dequant_fp4_whole_blocks_avx2(packed, scales, block_k, begin, end, out);
    out += whole - begin;
    begin = whole;
    for (int64_t j = begin; j < end;) {
        const int64_t segment_end = block_end(j, block_k, end);
        const __m256 magnitudes = e2m1_magnitudes_scaled(scales[j / block_k]);
        if (j & 1) {  // odd block sizes: realign to a byte boundary
            scalar_dequant_fp4_range(packed, scales, block_k, j, j + 1, out + (j - begin));
            ++j;
        }
        for (; j + 8 <= segment_end; j += 8)
            _mm256_storeu_ps(out + (j - begin), decode8_e2m1(packed + j / 2, magnitudes));
        scalar_dequant_fp4_range(packed, scales, block_k, j, segment_end, out + (j - begin));
        j = segment_end;
    }
}

DSV4_AVX2 float dot_f32_avx2(const float* a, const float* b, int64_t k) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t j = 0;
    for (; j + 32 <= k; j += 32) {
        for (int u = 0; u < 4; ++u) {
            acc[u] = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8 * u), _mm256_loadu_ps(b + j + 8 * u), acc[u]);
        }
    }
    for (; j + 8 <= k; j += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc[0]);
    float tail = 0.0f;
    for (; j < k; ++j) tail += a[j] * b[j];
    return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]))) + tail;
}

DSV4_AVX2 float dot_bf16_avx2(const uint16_t* w, const float* x, int64_t k) {
    __m256 acc0 = _mm256_setzero_ps();
    __m256 acc1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= k; j += 16) {
        acc0 = _mm256_fmadd_ps(decode8_bf16(w + j), _mm256_loadu_ps(x + j), acc0);
        acc1 = _mm256_fmadd_ps(decode8_bf16(w + j + 8), _mm256_loadu_ps(x + j + 8), acc1);
    }
    for (; j + 8 <= k; j += 8) acc0 = _mm256_fmadd_ps(decode8_bf16(w + j), _mm256_loadu_ps(x + j), acc0);
    float tail = 0.0f;
    for (; j < k; ++j) tail += decode_bf16(w[j]) * x[j];
    return hsum(_mm256_add_ps(acc0, acc1)) + tail;
}

DSV4_AVX2 float dot_fp8_avx2(const uint8_t* codes, const uint8_t* scales, int block_k, Fp8Dialect dialect,
                             const float* x, int64_t k) {
    const bool fnuz = dialect == Fp8Dialect::kFnuz;
    __m256 acc0 = _mm256_setzero_ps();
    __m256 acc1 = _mm256_setzero_ps();
    float tail = 0.0f;
    for (int64_t j = 0; j < k;) {
        const int64_t segment_end = block_end(j, block_k, k);
        float factor = 0.0f;
        if (e4m3_block_factor(scales[j / block_k], e4m3_fp16_shift(dialect), &factor)) {
            const __m256 f = _mm256_set1_ps(factor);
            for (; j + 16 <= segment_end; j += 16) {
                acc0 = _mm256_fmadd_ps(decode8_e4m3(codes + j, f, fnuz), _mm256_loadu_ps(x + j), acc0);
                acc1 = _mm256_fmadd_ps(decode8_e4m3(codes + j + 8, f, fnuz), _mm256_loadu_ps(x + j + 8), acc1);
            }
            for (; j + 8 <= segment_end; j += 8) {
                acc0 = _mm256_fmadd_ps(decode8_e4m3(codes + j, f, fnuz), _mm256_loadu_ps(x + j), acc0);
            }
        }
        tail += scalar_dot_fp8_range(codes, scales, block_k, dialect, x, j, segment_end);
        j = segment_end;
    }
    return hsum(_mm256_add_ps(acc0, acc1)) + tail;
}

DSV4_AVX2 float dot_fp4_avx2(const uint8_t* packed, const uint8_t* scales, int block_k, const float* x, int64_t k) {
    __m256 acc0 = _mm256_setzero_ps();
    __m256 acc1 = _mm256_setzero_ps();
    float tail = 0.0f;
    for (int64_t j = 0; j < k;) {
        const int64_t segment_end = block_end(j, block_k, k);
        const __m256 magnitudes = e2m1_magnitudes_scaled(scales[j / block_k]);
        if (j & 1) {
            tail += scalar_dot_fp4_range(packed, scales, block_k, x, j, j + 1);
            ++j;
        }
        for (; j + 16 <= segment_end; j += 16) {
            acc0 = _mm256_fmadd_ps(decode8_e2m1(packed + j / 2, magnitudes), _mm256_loadu_ps(x + j), acc0);
            acc1 = _mm256_fmadd_ps(decode8_e2m1(packed + j / 2 + 4, magnitudes), _mm256_loadu_ps(x + j + 8), acc1);
        }
        for (; j + 8 <= segment_end; j += 8) {
            acc0 = _mm256_fmadd_ps(decode8_e2m1(packed + j / 2, magnitudes), _mm256_loadu_ps(x + j), acc0);
        }
        tail += scalar_dot_fp4_range(packed, scales, block_k, x, j, segment_end);
        j = segment_end;
    }
    return hsum(_mm256_add_ps(acc0, acc1)) + tail;
}

// kVecs activation vectors per pass so that each load of w feeds kVecs FMAs. Every vector gets the same arithmetic
// (one 8-lane accumulator, then the scalar tail) whatever kVecs is, so out[v] does not depend on n_vec or on v:
// a row's result is the same alone or in any batch (the engine's batch invariance rests on this).
template <int kVecs>
DSV4_AVX2 inline void dot_f32_group_avx2(const float* w, const float* x, int64_t x_stride, int64_t k, float* out) {
    const float* xs[kVecs];
    __m256 acc[kVecs];
    for (int u = 0; u < kVecs; ++u) {
        xs[u] = x + u * x_stride;
        acc[u] = _mm256_setzero_ps();
    }
    int64_t j = 0;
    for (; j + 8 <= k; j += 8) {
        const __m256 wv = _mm256_loadu_ps(w + j);
        for (int u = 0; u < kVecs; ++u) acc[u] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xs[u] + j), acc[u]);
    }
    for (int u = 0; u < kVecs; ++u) {
        float tail = 0.0f;
        for (int64_t t = j; t < k; ++t) tail += w[t] * xs[u][t];
        out[u] += hsum(acc[u]) + tail;
    }
}

DSV4_AVX2 void dot_f32_multi_add_avx2(const float* w, const float* x, int64_t x_stride, int64_t k, int n_vec,
                                      float* out) {
    int v = 0;
    for (; v + 4 <= n_vec; v += 4) dot_f32_group_avx2<4>(w, x + v * x_stride, x_stride, k, out + v);
    for (; v < n_vec; ++v) dot_f32_group_avx2<1>(w, x + v * x_stride, x_stride, k, out + v);
}

}  // namespace

DSV4_AVX2 double dot_f64_avx2(const float* a, const float* b, int64_t k) {
    // Four independent vector sums of four doubles; the product of two floats is exact in double, so an FMA adds
    // exactly what the scalar version adds.
    __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        for (int u = 0; u < 4; ++u) {
            const __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(a + i + 4 * u));
            const __m256d y = _mm256_cvtps_pd(_mm_loadu_ps(b + i + 4 * u));
            acc[u] = _mm256_fmadd_pd(x, y, acc[u]);
        }
    }
    const __m256d sum = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes, sum);
    double tail = 0.0;
    for (; i < k; ++i) tail += static_cast<double>(a[i]) * b[i];
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + tail;
}

const RowKernels* avx2_kernels() {
    static const RowKernels kernels{
        bf16_to_f32_avx2, f32_to_bf16_avx2, fp8_to_f32_avx2, dequant_fp8_range_avx2, dequant_fp4_range_avx2,
        dot_f32_avx2,     dot_bf16_avx2,    dot_fp8_avx2,    dot_fp4_avx2,           dot_f32_multi_add_avx2,
        nullptr,          nullptr,          nullptr,         dot_f64_avx2,
    };
    return &kernels;
}

}  // namespace dsv4::simd

#else  // not x86

namespace dsv4::simd {
const RowKernels* avx2_kernels() {
    return nullptr;
}
}  // namespace dsv4::simd

#endif
