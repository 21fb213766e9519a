// The reference-numerics roundings as the CPU backend applies them (model-spec 2.1, 4.4; the list is in
// tools/fixtures/make_fixtures.py's docstring, which patches the same roundings into the HF reference), and the
// arithmetic type of each numerics mode.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/block_dequant.h"
#include "core/dot_f64.h"
#include "core/float_formats.h"

namespace dsv4::cpu {

// Intermediate arithmetic: float in exact numerics; double in reference numerics, rounded to float only where a
// value is stored (an op's outputs, and the few intermediates the CUDA kernels keep in float buffers). With every
// sum and transcendental in double, the CPU and CUDA backends compute the same floats whatever their summation
// orders (core/dot_f64.h), so their bf16 / FP8 roundings and top-k picks agree.
template <typename Acc>
Acc dot_acc(const float* a, const float* b, int64_t k) {
    if constexpr (std::is_same_v<Acc, double>) {
        return dot_f64(a, b, k);
    } else {
        return dot_f32(a, b, k);
    }
}

// Calls f(Acc{}) with the numerics mode's arithmetic type: double in reference numerics, float in exact.
template <typename F>
decltype(auto) with_acc(bool reference, F&& f) {
    if (reference) return f(double{});
    return f(float{});
}

inline float bf(float v) {
    return round_to_bf16(v);
}

// The float an Acc result is stored as: rounded to float, then to bf16 when `round`.
template <typename Acc>
float store(Acc v, bool round) {
    const auto f = static_cast<float>(v);
    return round ? bf(f) : f;
}

// One RMSNorm row: out = in / rms(in) (* weight when not null).
template <typename Acc>
void rms_norm_row(const float* in, const float* weight, int64_t k, float eps, bool round, float* out) {
    Acc sum = 0;
    for (int64_t i = 0; i < k; ++i) sum += Acc(in[i]) * in[i];
    const Acc inv = Acc(1) / std::sqrt(sum / static_cast<Acc>(k) + Acc(eps));
    for (int64_t i = 0; i < k; ++i) {
        Acc v = in[i] * inv;
        if (weight != nullptr) v *= weight[i];
        out[i] = store(v, round);
    }
}

// Interleaved RoPE pairs (v[2i], v[2i+1]) rotated by (cos[i], sin[i]), i < pairs.
template <typename Acc>
void rotate_pairs(float* v, const float* cos, const float* sin, int pairs, bool round) {
    for (int i = 0; i < pairs; ++i) {
        const Acc a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = store(a * cos[i] - b * sin[i], round);
        v[2 * i + 1] = store(b * cos[i] + a * sin[i], round);
    }
}
void round_bf16(float* x, int64_t n);
// Per-block FP8 e4m3 quantize-dequantize with a UE8M0 scale (amax floor 1e-4), then bf16 (model-spec 2.1 FP8-sim),
// in the quant's dialect and maximum (the K=V record's: kv_record_fp8_quant).
void fp8_sim(float* x, int64_t n, int block, Fp8Quant quant);
// The activation quantization into FP8/FP4 GEMMs: bf16 input, per-128 blocks (model-spec 4.4), in the quant's
// dialect and maximum (activation_fp8_quant).
void act_quant_sim(float* x, int64_t n, Fp8Quant quant);
// FP4 e2m1 quantize-dequantize per block of 32 with a UE8M0 scale.
void fp4_sim(float* x, int64_t n, int block);
// Sylvester-ordered Walsh-Hadamard transform scaled by n^-1/2 (n a power of two).
void hadamard(float* x, int64_t n);

}  // namespace dsv4::cpu
