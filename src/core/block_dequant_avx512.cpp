// AVX-512 F/BW/VL kernels (16 floats per vector, masked tails). Compiled for that target per function, selected at
// run time.
#include "core/simd_kernels.h"

#if defined(__x86_64__)

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own "undefined vector" idiom (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>

#define DSV4_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace dsv4::simd {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

DSV4_AVX512 inline __mmask16 tail_mask(int64_t count) {
    return static_cast<__mmask16>((1u << count) - 1u);  // count < 16
}

DSV4_AVX512 inline __m128i load16_bytes(const uint8_t* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// 16 e4m3 codes -> value * factor / 2^shift (see e4m3_block_factor); NaN codes -> NaN.
DSV4_AVX512 inline __m512 decode16_e4m3(__m128i bytes, __m512 factor, bool fnuz) {
    const __m256i c = _mm256_cvtepu8_epi16(bytes);
    const __m256i magnitude = _mm256_and_si256(c, _mm256_set1_epi16(0x7F));
    const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(c, _mm256_set1_epi16(0x80)), 8);
    const __m256i half = _mm256_or_si256(sign, _mm256_slli_epi16(magnitude, 7));
    const __m512 value = _mm512_mul_ps(_mm512_cvtph_ps(half), factor);
    const __mmask16 nan = fnuz ? _mm256_cmpeq_epi16_mask(c, _mm256_set1_epi16(0x80))
                               : _mm256_cmpeq_epi16_mask(magnitude, _mm256_set1_epi16(0x7F));
    return _mm512_mask_blend_ps(nan, value, _mm512_set1_ps(kNaN));
}

// 16 e2m1 codes from 8 packed bytes (in the low half of `bytes`); table = the 16 signed values times the scale.
DSV4_AVX512 inline __m512 decode16_e2m1(__m128i bytes, __m512 table) {
    const __m128i wide = _mm_cvtepu8_epi16(bytes);
    // Each 16-bit lane 0x00HL becomes 0x0H0L: bytes in element order (low nibble = even element first).
    const __m128i nibbles = _mm_or_si128(_mm_and_si128(wide, _mm_set1_epi16(0x0F)),
                                         _mm_slli_epi16(_mm_and_si128(wide, _mm_set1_epi16(0xF0)), 4));
    return _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(nibbles), table);
}

DSV4_AVX512 inline __m512 e2m1_table_scaled(uint8_t scale_byte) {
    return _mm512_mul_ps(_mm512_loadu_ps(kE2M1Values), _mm512_set1_ps(ue8m0_table()[scale_byte]));
}

DSV4_AVX512 inline __m512 decode16_bf16(__m256i bits) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

DSV4_AVX512 void bf16_to_f32_avx512(const uint16_t* in, float* out, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(out + i, decode16_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
    }
    if (i < n) {
        const __mmask16 m = tail_mask(static_cast<int64_t>(n - i));
        _mm512_mask_storeu_ps(out + i, m, decode16_bf16(_mm256_maskz_loadu_epi16(m, in + i)));
    }
}

DSV4_AVX512 inline __m256i encode16_bf16(__m512 v) {
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    const __m512i quiet_nan = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
    const __mmask16 is_nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, quiet_nan));
}

DSV4_AVX512 void f32_to_bf16_avx512(const float* in, uint16_t* out, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), encode16_bf16(_mm512_loadu_ps(in + i)));
    }
    if (i < n) {
        const __mmask16 m = tail_mask(static_cast<int64_t>(n - i));
        _mm256_mask_storeu_epi16(out + i, m, encode16_bf16(_mm512_maskz_loadu_ps(m, in + i)));
    }
}

DSV4_AVX512 void fp8_to_f32_avx512(const uint8_t* in, float* out, size_t n, Fp8Format dialect) {
    const float* table = fp8_decode_table(dialect).data();
    const bool e4m3 = dialect == Fp8Format::kE4M3Ocp || dialect == Fp8Format::kE4M3Fnuz;
    const bool fnuz = dialect == Fp8Format::kE4M3Fnuz;
    const __m512 factor = _mm512_set1_ps(fnuz ? 128.0f : 256.0f);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(static_cast<int64_t>(n - i));
        const __m128i bytes = _mm_maskz_loadu_epi8(m, in + i);
        const __m512 value =
            e4m3 ? decode16_e4m3(bytes, factor, fnuz) : _mm512_i32gather_ps(_mm512_cvtepu8_epi32(bytes), table, 4);
        _mm512_mask_storeu_ps(out + i, m, value);
    }
}

DSV4_AVX512 void dequant_fp8_range_avx512(const uint8_t* codes, const uint8_t* scales, int block_k, Fp8Dialect dialect,
                                          int64_t begin, int64_t end, float* out) {
    const bool fnuz = dialect == Fp8Dialect::kFnuz;
    for (int64_t j = begin; j < end;) {
        const int64_t segment_end = block_end(j, block_k, end);
        float factor = 0.0f;
        if (!e4m3_block_factor(scales[j / block_k], e4m3_fp16_shift(dialect), &factor)) {
            scalar_dequant_fp8_range(codes, scales, block_k, dialect, j, segment_end, out + (j - begin));
            j = segment_end;
            continue;
        }
        const __m512 f = _mm512_set1_ps(factor);
        for (; j + 16 <= segment_end; j += 16) {
            _mm512_storeu_ps(out + (j - begin), decode16_e4m3(load16_bytes(codes + j), f, fnuz));
        }
        if (j < segment_end) {
            const __mmask16 m = tail_mask(segment_end - j);
            _mm512_mask_storeu_ps(out + (j - begin), m, decode16_e4m3(_mm_maskz_loadu_epi8(m, codes + j), f, fnuz));
            j = segment_end;
        }
    }
}

DSV4_AVX512 void dequant_fp4_range_avx512(const uint8_t* packed, const uint8_t* scales, int block_k, int64_t begin,
                                          int64_t end, float* out) {
    for (int64_t j = begin; j < end;) {
        const int64_t segment_end = block_end(j, block_k, end);
        const __m512 table = e2m1_table_scaled(scales[j / block_k]);
        if (j & 1) {  // odd block sizes: realign to a byte boundary
            scalar_dequant_fp4_range(packed, scales, block_k, j, j + 1, out + (j - begin));
            ++j;
        }
        for (; j + 16 <= segment_end; j += 16) {
            const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed + j / 2));
            _mm512_storeu_ps(out + (j - begin), decode16_e2m1(bytes, table));
        }
        if (segment_end - j >= 2) {
            const int64_t count = (segment_end - j) & ~int64_t{1};
            const __m128i bytes = _mm_maskz_loadu_epi8(tail_mask(count / 2), packed + j / 2);
            _mm512_mask_storeu_ps(out + (j - begin), tail_mask(count), decode16_e2m1(bytes, table));
            j += count;
        }
        scalar_dequant_fp4_range(packed, scales, block_k, j, segment_end, out + (j - begin));
        j = segment_end;
    }
}

DSV4_AVX512 float dot_f32_avx512(const float* a, const float* b, int64_t k) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t j = 0;
    for (; j + 64 <= k; j += 64) {
        for (int u = 0; u < 4; ++u) {
            acc[u] = _mm512_fmadd_ps(_mm512_loadu_ps(a + j + 16 * u), _mm512_loadu_ps(b + j + 16 * u), acc[u]);
        }
    }
    for (; j + 16 <= k; j += 16) acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j), acc[0]);
    if (j < k) {
        const __mmask16 m = tail_mask(k - j);
        acc[1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + j), _mm512_maskz_loadu_ps(m, b + j), acc[1]);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

DSV4_AVX512 float dot_bf16_avx512(const uint16_t* w, const float* x, int64_t k) {
    __m512 acc0 = _mm512_setzero_ps();
    __m512 acc1 = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 32 <= k; j += 32) {
        const __m512 w0 = decode16_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + j)));
        const __m512 w1 = decode16_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + j + 16)));
        acc0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + j), acc0);
        acc1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + j + 16), acc1);
    }
    for (; j < k; j += 16) {
        const __mmask16 m = k - j >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(k - j);
        acc0 =
            _mm512_fmadd_ps(decode16_bf16(_mm256_maskz_loadu_epi16(m, w + j)), _mm512_maskz_loadu_ps(m, x + j), acc0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

DSV4_AVX512 float dot_fp8_avx512(const uint8_t* codes, const uint8_t* scales, int block_k, Fp8Dialect dialect,
                                 const float* x, int64_t k) {
    const bool fnuz = dialect == Fp8Dialect::kFnuz;
    __m512 acc0 = _mm512_setzero_ps();
    __m512 acc1 = _mm512_setzero_ps();
    float tail = 0.0f;
    for (int64_t j = 0; j < k;) {
        const int64_t segment_end = block_end(j, block_k, k);
        float factor = 0.0f;
        if (!e4m3_block_factor(scales[j / block_k], e4m3_fp16_shift(dialect), &factor)) {
            tail += scalar_dot_fp8_range(codes, scales, block_k, dialect, x, j, segment_end);
            j = segment_end;
            continue;
        }
        const __m512 f = _mm512_set1_ps(factor);
        for (; j + 32 <= segment_end; j += 32) {
            acc0 = _mm512_fmadd_ps(decode16_e4m3(load16_bytes(codes + j), f, fnuz), _mm512_loadu_ps(x + j), acc0);
            acc1 = _mm512_fmadd_ps(decode16_e4m3(load16_bytes(codes + j + 16), f, fnuz), _mm512_loadu_ps(x + j + 16),
                                   acc1);
        }
        for (; j < segment_end; j += 16) {
            const __mmask16 m = segment_end - j >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(segment_end - j);
            const __m512 wv = decode16_e4m3(_mm_maskz_loadu_epi8(m, codes + j), f, fnuz);
            acc0 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + j), acc0);
        }
        j = segment_end;
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + tail;
}

DSV4_AVX512 float dot_fp4_avx512(const uint8_t* packed, const uint8_t* scales, int block_k, const float* x, int64_t k) {
    __m512 acc0 = _mm512_setzero_ps();
    __m512 acc1 = _mm512_setzero_ps();
    float tail = 0.0f;
    for (int64_t j = 0; j < k;) {
        const int64_t segment_end = block_end(j, block_k, k);
        const __m512 table = e2m1_table_scaled(scales[j / block_k]);
        if (j & 1) {
            tail += scalar_dot_fp4_range(packed, scales, block_k, x, j, j + 1);
            ++j;
        }
        for (; j + 32 <= segment_end; j += 32) {
            const __m128i bytes = load16_bytes(packed + j / 2);
            acc0 = _mm512_fmadd_ps(decode16_e2m1(bytes, table), _mm512_loadu_ps(x + j), acc0);
            acc1 = _mm512_fmadd_ps(decode16_e2m1(_mm_srli_si128(bytes, 8), table), _mm512_loadu_ps(x + j + 16), acc1);
        }
        for (; j + 16 <= segment_end; j += 16) {
            const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed + j / 2));
            acc0 = _mm512_fmadd_ps(decode16_e2m1(bytes, table), _mm512_loadu_ps(x + j), acc0);
        }
        if (segment_end - j >= 2) {
            const int64_t count = (segment_end - j) & ~int64_t{1};
            const __m128i bytes = _mm_maskz_loadu_epi8(tail_mask(count / 2), packed + j / 2);
            acc1 = _mm512_fmadd_ps(decode16_e2m1(bytes, table), _mm512_maskz_loadu_ps(tail_mask(count), x + j), acc1);
            j += count;
        }
        tail += scalar_dot_fp4_range(packed, scales, block_k, x, j, segment_end);
        j = segment_end;
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + tail;
}

// kVecs activation vectors per pass so that each load of w feeds kVecs FMAs. Every vector gets the same arithmetic
// (one 16-lane accumulator with a masked tail) whatever kVecs is, so out[v] does not depend on n_vec or on v:
// a row's result is the same alone or in any batch (the engine's batch invariance rests on this).
// Lanes of the 16-element group that starts `remaining` elements before the end.
DSV4_AVX512 inline __mmask16 group_mask(int64_t remaining) {
    return remaining >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(remaining);
}

template <int kVecs>
DSV4_AVX512 inline void dot_f32_group_avx512(const float* w, const float* x, int64_t x_stride, int64_t k, float* out) {
    const float* xs[kVecs];
    __m512 acc[kVecs];
    for (int u = 0; u < kVecs; ++u) {
        xs[u] = x + u * x_stride;
        acc[u] = _mm512_setzero_ps();
    }
    for (int64_t j = 0; j < k; j += 16) {
        const __mmask16 m = group_mask(k - j);
        const __m512 wv = _mm512_maskz_loadu_ps(m, w + j);
        for (int u = 0; u < kVecs; ++u) acc[u] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, xs[u] + j), acc[u]);
    }
    for (int u = 0; u < kVecs; ++u) out[u] += _mm512_reduce_add_ps(acc[u]);
}

DSV4_AVX512 void dot_f32_multi_add_avx512(const float* w, const float* x, int64_t x_stride, int64_t k, int n_vec,
                                          float* out) {
    int v = 0;
    for (; v + 4 <= n_vec; v += 4) dot_f32_group_avx512<4>(w, x + v * x_stride, x_stride, k, out + v);
    for (; v < n_vec; ++v) dot_f32_group_avx512<1>(w, x + v * x_stride, x_stride, k, out + v);
}

// dot_f32_group_avx512<1> over a bf16 row decoded in registers: the same masked loads (decoded lanes past the end
// are +0, as the buffer's masked loads are), FMAs and reduction, so the sum is bit-identical to decoding the row into
// a buffer first and calling dot_f32_multi_add.
DSV4_AVX512 void dot_bf16_add_one_avx512(const uint16_t* w, const float* x, int64_t k, float* out) {
    __m512 acc = _mm512_setzero_ps();  // one FMA chain, as dot_f32_group_avx512 keeps per vector
    for (int64_t j = 0; j < k; j += 16) {
        const __mmask16 m = group_mask(k - j);
        const __m512 wv = decode16_bf16(_mm256_maskz_loadu_epi16(m, w + j));
        acc = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + j), acc);
    }
    *out += _mm512_reduce_add_ps(acc);
}

// dequant_fp8_range_avx512 then dot_f32_group_avx512<1>, fused: each 16-element group is decoded exactly as the
// range decoder decodes it (whole groups stay inside one scale block when block_k is a multiple of 16).
DSV4_AVX512 bool dot_fp8_add_one_avx512(const uint8_t* codes, const uint8_t* scales, int block_k, Fp8Dialect dialect,
                                        int64_t begin, int64_t end, const float* x, float* out) {
    if (block_k % 16 != 0 || begin % block_k != 0) return false;
    const bool fnuz = dialect == Fp8Dialect::kFnuz;
    __m512 acc = _mm512_setzero_ps();  // one FMA chain, as dot_f32_group_avx512 keeps per vector
    __m512 f = _mm512_setzero_ps();
    for (int64_t j = begin; j < end; j += 16) {
        if ((j - begin) % block_k == 0) {
            float factor = 0.0f;
            if (!e4m3_block_factor(scales[j / block_k], e4m3_fp16_shift(dialect), &factor)) return false;
            f = _mm512_set1_ps(factor);
        }
        const __mmask16 m = group_mask(end - j);
        const __m512 wv = decode16_e4m3(_mm_maskz_loadu_epi8(m, codes + j), f, fnuz);
        const __m512 xv = _mm512_maskz_loadu_ps(m, x + (j - begin));
        acc = _mm512_fmadd_ps(_mm512_maskz_mov_ps(m, wv), xv, acc);
    }
    *out += _mm512_reduce_add_ps(acc);
    return true;
}

// The same for FP4 (dequant_fp4_range_avx512's table decode).
DSV4_AVX512 bool dot_fp4_add_one_avx512(const uint8_t* packed, const uint8_t* scales, int block_k, int64_t begin,
                                        int64_t end, const float* x, float* out) {
    if (block_k % 16 != 0 || begin % block_k != 0 || (end - begin) % 2 != 0) return false;
    __m512 acc = _mm512_setzero_ps();  // one FMA chain, as dot_f32_group_avx512 keeps per vector
    __m512 table = _mm512_setzero_ps();
    for (int64_t j = begin; j < end; j += 16) {
        if ((j - begin) % block_k == 0) table = e2m1_table_scaled(scales[j / block_k]);
        const int64_t count = std::min<int64_t>(16, end - j);
        const __mmask16 m = count == 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(count);
        const __m128i bytes = _mm_maskz_loadu_epi8(tail_mask(count / 2), packed + j / 2);
        const __m512 wv = decode16_e2m1(bytes, table);
        const __m512 xv = _mm512_maskz_loadu_ps(m, x + (j - begin));
        acc = _mm512_fmadd_ps(_mm512_maskz_mov_ps(m, wv), xv, acc);
    }
    *out += _mm512_reduce_add_ps(acc);
    return true;
}

}  // namespace

const RowKernels* avx512_kernels() {
    static const RowKernels kernels{
        bf16_to_f32_avx512,       f32_to_bf16_avx512,
        fp8_to_f32_avx512,        dequant_fp8_range_avx512,
        dequant_fp4_range_avx512, dot_f32_avx512,
        dot_bf16_avx512,          dot_fp8_avx512,
        dot_fp4_avx512,           dot_f32_multi_add_avx512,
        dot_bf16_add_one_avx512,  dot_fp8_add_one_avx512,
        dot_fp4_add_one_avx512,   dot_f64_avx2,
    };
    return &kernels;
}

}  // namespace dsv4::simd

#else  // not x86-64

namespace dsv4::simd {
const RowKernels* avx512_kernels() {
    return nullptr;
}
}  // namespace dsv4::simd

#endif
