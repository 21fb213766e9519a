// Public entry points of block_dequant.h: argument checks, run-time ISA dispatch and the multi-vector dot products.
#include "core/block_dequant.h"

#include <algorithm>
#include <atomic>

#include "core/dot_f64.h"
#include "core/error.h"
#include "core/simd_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace dsv4 {
namespace {

// F16C is not among the features every compiler's __builtin_cpu_supports knows; ask CPUID (leaf 1, ECX bit 29).
bool cpu_has_f16c() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    return (ecx & (1u << 29)) != 0;
#else
    return false;
#endif
}

bool cpu_supports(SimdIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    switch (isa) {
        case SimdIsa::kScalar:
            return true;
        case SimdIsa::kAvx2:
            return avx2 && simd::avx2_kernels() != nullptr;
        case SimdIsa::kAvx512:
            return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl") && simd::avx512_kernels() != nullptr;
    }
    return false;
#else
    return isa == SimdIsa::kScalar;
#endif
}

const simd::RowKernels& kernels_for(SimdIsa isa) {
    switch (isa) {
        case SimdIsa::kScalar:
            return simd::scalar_kernels();
        case SimdIsa::kAvx2:
            return *simd::avx2_kernels();
        case SimdIsa::kAvx512:
            return *simd::avx512_kernels();
    }
    return simd::scalar_kernels();
}

SimdIsa best_isa() {
    for (SimdIsa isa : {SimdIsa::kAvx512, SimdIsa::kAvx2}) {
        if (cpu_supports(isa)) return isa;
    }
    return SimdIsa::kScalar;
}

struct Dispatch {
    std::atomic<SimdIsa> isa{best_isa()};
    std::atomic<const simd::RowKernels*> kernels{&kernels_for(isa.load())};
};

Dispatch& dispatch() {
    static Dispatch state;
    return state;
}

const simd::RowKernels& active() {
    return *dispatch().kernels.load(std::memory_order_relaxed);
}

void check_row(const char* what, int64_t k, int block_k) {
    DSV4_CHECK(k >= 0, "{}: negative length {}", what, k);
    DSV4_CHECK(block_k >= 1, "{}: block size must be >= 1, got {}", what, block_k);
}

void check_fp4_row(const char* what, int64_t k, int block_k) {
    check_row(what, k, block_k);
    DSV4_CHECK(k % 2 == 0, "{}: FP4 rows hold two codes per byte, length must be even, got {}", what, k);
}

void check_multi(const char* what, int64_t k, int n_vec, int64_t x_stride) {
    DSV4_CHECK(k >= 0, "{}: negative length {}", what, k);
    DSV4_CHECK(n_vec >= 0, "{}: negative vector count {}", what, n_vec);
    DSV4_CHECK(n_vec <= 1 || x_stride >= k, "{}: vector stride {} is shorter than the length {}", what, x_stride, k);
}

// Decoded weights are staged in chunks this long (fits L1 together with a few activation streams).
constexpr int64_t kChunk = 1024;

// out[v] = dot(row, x_v) where the row is produced chunk by chunk by `decode(begin, end, buffer)`. Used for every
// n_vec, 1 included (no fused single-vector shortcut): a row's result must not depend on how many vectors share the
// call, so that a sequence's logits are bit-identical alone or batched (engine batch invariance, prefix caching).
template <typename DecodeChunk>
void multi_dot_by_chunks(DecodeChunk decode, const float* x, int64_t x_stride, int64_t k, int n_vec, float* out) {
    std::fill(out, out + n_vec, 0.0f);
    alignas(64) float buffer[kChunk];
    const simd::RowKernels& kernels = active();
    for (int64_t begin = 0; begin < k; begin += kChunk) {
        const int64_t end = std::min(k, begin + kChunk);
        decode(begin, end, buffer);
        kernels.dot_f32_multi_add(buffer, x + begin, x_stride, end - begin, n_vec, out);
    }
}

// multi_dot_by_chunks for one vector (decode steps), trying `fused(begin, end, out)` per chunk first: a kernel that
// decodes in registers with the same arithmetic, so the result stays bit-identical to the batched path.
template <typename FusedChunk, typename DecodeChunk>
void single_dot_by_chunks(FusedChunk fused, DecodeChunk decode, const float* x, int64_t k, float* out) {
    out[0] = 0.0f;
    alignas(64) float buffer[kChunk];
    const simd::RowKernels& kernels = active();
    for (int64_t begin = 0; begin < k; begin += kChunk) {
        const int64_t end = std::min(k, begin + kChunk);
        if (fused(begin, end, out)) continue;
        decode(begin, end, buffer);
        kernels.dot_f32_multi_add(buffer, x + begin, 0, end - begin, 1, out);
    }
}

}  // namespace

std::string_view simd_isa_name(SimdIsa isa) {
    switch (isa) {
        case SimdIsa::kScalar:
            return "scalar";
        case SimdIsa::kAvx2:
            return "avx2";
        case SimdIsa::kAvx512:
            return "avx512";
    }
    return "?";
}

bool simd_isa_supported(SimdIsa isa) {
    return cpu_supports(isa);
}
SimdIsa detected_simd_isa() {
    return best_isa();
}
SimdIsa active_simd_isa() {
    return dispatch().isa.load(std::memory_order_relaxed);
}

void set_simd_isa(SimdIsa isa) {
    DSV4_CHECK(cpu_supports(isa), "SIMD kernels '{}' are not supported on this CPU or build", simd_isa_name(isa));
    dispatch().kernels.store(&kernels_for(isa), std::memory_order_relaxed);
    dispatch().isa.store(isa, std::memory_order_relaxed);
}

void bf16_to_f32(const uint16_t* in, float* out, size_t n) {
    active().bf16_to_f32(in, out, n);
}
void f32_to_bf16(const float* in, uint16_t* out, size_t n) {
    active().f32_to_bf16(in, out, n);
}
void fp8_to_f32(const uint8_t* in, float* out, size_t n, Fp8Format dialect) {
    active().fp8_to_f32(in, out, n, dialect);
}

void dequant_fp8_row(const uint8_t* codes, const uint8_t* ue8m0_scales, int64_t k, int block_k, Fp8Dialect dialect,
                     float* out) {
    check_row("dequant_fp8_row", k, block_k);
    active().dequant_fp8_range(codes, ue8m0_scales, block_k, dialect, 0, k, out);
}

void dequant_fp4_row(const uint8_t* packed, const uint8_t* ue8m0_scales, int64_t k, int block_k, float* out) {
    check_fp4_row("dequant_fp4_row", k, block_k);
    active().dequant_fp4_range(packed, ue8m0_scales, block_k, 0, k, out);
}

double dot_f64(const float* a, const float* b, int64_t k) {
    DSV4_CHECK(k >= 0, "dot_f64: negative length {}", k);
    return active().dot_f64(a, b, k);
}

float dot_f32(const float* a, const float* b, int64_t k) {
    DSV4_CHECK(k >= 0, "dot_f32: negative length {}", k);
    return active().dot_f32(a, b, k);
}

float dot_bf16_row(const uint16_t* w, const float* x, int64_t k) {
    DSV4_CHECK(k >= 0, "dot_bf16_row: negative length {}", k);
    return active().dot_bf16(w, x, k);
}

float dot_fp8_row(const uint8_t* codes, const uint8_t* ue8m0_scales, int block_k, Fp8Dialect dialect, const float* x,
                  int64_t k) {
    check_row("dot_fp8_row", k, block_k);
    return active().dot_fp8(codes, ue8m0_scales, block_k, dialect, x, k);
}

float dot_fp4_row(const uint8_t* packed, const uint8_t* ue8m0_scales, int block_k, const float* x, int64_t k) {
    check_fp4_row("dot_fp4_row", k, block_k);
    return active().dot_fp4(packed, ue8m0_scales, block_k, x, k);
}

void dot_f32_multi(const float* w, const float* x, int64_t x_stride, int64_t k, int n_vec, float* out) {
    check_multi("dot_f32_multi", k, n_vec, x_stride);
    std::fill(out, out + n_vec, 0.0f);
    active().dot_f32_multi_add(w, x, x_stride, k, n_vec, out);
}

void dot_bf16_row_multi(const uint16_t* w, const float* x, int64_t x_stride, int64_t k, int n_vec, float* out) {
    check_multi("dot_bf16_row_multi", k, n_vec, x_stride);
    const simd::RowKernels& kernels = active();
    if (n_vec == 1 && kernels.dot_bf16_add_one != nullptr) {
        single_dot_by_chunks(
            [&](int64_t begin, int64_t end, float* acc) {
                kernels.dot_bf16_add_one(w + begin, x + begin, end - begin, acc);
                return true;
            },
            [&](int64_t begin, int64_t end, float* buffer) {
                kernels.bf16_to_f32(w + begin, buffer, static_cast<size_t>(end - begin));
            },
            x, k, out);
        return;
    }
    multi_dot_by_chunks(
        [&](int64_t begin, int64_t end, float* buffer) {
            kernels.bf16_to_f32(w + begin, buffer, static_cast<size_t>(end - begin));
        },
        x, x_stride, k, n_vec, out);
}

namespace {

// The FP8 / FP4 row dots: one vector through the ISA's fused kernel where it has one (`has_fused`), else (and for
// batches) the chunk buffer; both give the same bits. decode(begin, end, buffer) and fused(begin, end, x, acc) run
// the ISA's range kernels on the row.
template <typename Decode, typename Fused>
void block_scaled_row_multi(Decode decode_range, bool has_fused, Fused fused_range, const float* x, int64_t x_stride,
                            int64_t k, int n_vec, float* out) {
    if (n_vec == 1 && has_fused) {
        auto fused = [&](int64_t begin, int64_t end, float* acc) { return fused_range(begin, end, x + begin, acc); };
        single_dot_by_chunks(fused, decode_range, x, k, out);
        return;
    }
    multi_dot_by_chunks(decode_range, x, x_stride, k, n_vec, out);
}

}  // namespace

void dot_fp8_row_multi(const uint8_t* codes, const uint8_t* ue8m0_scales, int block_k, Fp8Dialect dialect,
                       const float* x, int64_t x_stride, int64_t k, int n_vec, float* out) {
    check_row("dot_fp8_row_multi", k, block_k);
    check_multi("dot_fp8_row_multi", k, n_vec, x_stride);
    const simd::RowKernels& kernels = active();
    block_scaled_row_multi(
        [&](int64_t begin, int64_t end, float* buffer) {
            kernels.dequant_fp8_range(codes, ue8m0_scales, block_k, dialect, begin, end, buffer);
        },
        kernels.dot_fp8_add_one != nullptr,
        [&](int64_t begin, int64_t end, const float* xs, float* acc) {
            return kernels.dot_fp8_add_one(codes, ue8m0_scales, block_k, dialect, begin, end, xs, acc);
        },
        x, x_stride, k, n_vec, out);
}

void dot_fp4_row_multi(const uint8_t* packed, const uint8_t* ue8m0_scales, int block_k, const float* x,
                       int64_t x_stride, int64_t k, int n_vec, float* out) {
    check_fp4_row("dot_fp4_row_multi", k, block_k);
    check_multi("dot_fp4_row_multi", k, n_vec, x_stride);
    const simd::RowKernels& kernels = active();
    block_scaled_row_multi(
        [&](int64_t begin, int64_t end, float* buffer) {
            kernels.dequant_fp4_range(packed, ue8m0_scales, block_k, begin, end, buffer);
        },
        kernels.dot_fp4_add_one != nullptr,
        [&](int64_t begin, int64_t end, const float* xs, float* acc) {
            return kernels.dot_fp4_add_one(packed, ue8m0_scales, block_k, begin, end, xs, acc);
        },
        x, x_stride, k, n_vec, out);
}

}  // namespace dsv4
