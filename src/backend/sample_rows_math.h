// The arithmetic of sample_rows (backend/sample_rows.h) shared by the host reference and the CUDA kernel, so that
// both compute the same bits: the processed logit of an edited token, the candidate masses and the draw target.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/sample_rows.h"

#if defined(__CUDACC__)
#define DSV4_SAMPLE_HD __host__ __device__
#else
#define DSV4_SAMPLE_HD
#endif

namespace dsv4 {

inline constexpr float kSampleMaxLogit = 3.40282346638528859812e+38F;  // FLT_MAX

// Whether a draw reads a processed copy of its row (logit edits or a mask) rather than the raw row.
DSV4_SAMPLE_HD inline bool draw_processes_row(const RowDraw& d) {
    return d.edit_count > 0 || d.mask >= 0;
}

// The host logits processors' rounding back to float: overflow saturates, a value below -FLT_MAX is a ban (-inf).
DSV4_SAMPLE_HD inline float sample_to_logit(double value) {
    if (value > kSampleMaxLogit) return kSampleMaxLogit;
    if (value < -static_cast<double>(kSampleMaxLogit)) return -INFINITY;
    return static_cast<float>(value);
}

// One token's processed logit (apply_logits_processors' steps 1-5 for this token, in that order).
DSV4_SAMPLE_HD inline float apply_logit_edit(float x, const LogitEdit& e) {
    if (e.masked) x = -INFINITY;
    if (e.has_bias) x = sample_to_logit(static_cast<double>(x) + static_cast<double>(e.bias));
    if (e.penalized) {
        double value = x;
        if (e.repeat) value = value > 0.0 ? value / e.repetition : value * e.repetition;
        value -= e.frequency;
        value -= e.presence;
        x = sample_to_logit(value);
    }
    return x;
}

// What decides a candidate: the row's largest logit, the top_k floor, 1 / temperature and min_p.
struct SampleShape {
    float best = 0.0f;
    float floor = -INFINITY;
    double inv_temperature = 1.0;
    double min_p = 0.0;
};

// exp(a) for a <= 0 in operations that round the same way on every IEEE device: the host's exp and the GPU's may
// differ in the last bit (neither is required to round correctly), and a candidate's mass, exp rounded to a multiple
// of 2^-46, then differs by one unit where it lies near a half. Here a = k ln2 + r (k = rint(a / ln2), r by two fused
// multiply-adds against ln2 in two parts, |r| <= ln2 / 2), e^r by its Taylor series to r^13 / 13! (truncation below
// 2^-60) in fused multiply-adds, scaled by 2^k; within ~2 ulp of e^a, the same bits on the host and the device.
DSV4_SAMPLE_HD inline double sample_exp(double a) {
    if (!(a > -745.0)) return 0.0;  // below the smallest subnormal (and NaN, which no candidate has)
    constexpr double kLog2e = 1.4426950408889634074;
    constexpr double kLn2Hi = 6.93147180369123816490e-01;  // ln2's leading 32 bits: k * kLn2Hi is exact
    constexpr double kLn2Lo = 1.90821492927058770002e-10;
    const double k = rint(a * kLog2e);
    const double r = fma(-k, kLn2Lo, fma(-k, kLn2Hi, a));
    double p = 1.60590438368216145994e-10;  // 1 / 13!, then Horner down to 1 / 0!
    p = fma(p, r, 2.08767569878680989792e-09);
    p = fma(p, r, 2.50521083854417187751e-08);
    p = fma(p, r, 2.75573192239858906526e-07);
    p = fma(p, r, 2.75573192239858906526e-06);
    p = fma(p, r, 2.48015873015873015873e-05);
    p = fma(p, r, 1.98412698412698412698e-04);
    p = fma(p, r, 1.38888888888888888889e-03);
    p = fma(p, r, 8.33333333333333333333e-03);
    p = fma(p, r, 4.16666666666666666667e-02);
    p = fma(p, r, 1.66666666666666666667e-01);
    p = fma(p, r, 0.5);
    p = fma(p, r, 1.0);
    p = fma(p, r, 1.0);
    return ldexp(p, static_cast<int>(k));
}

// A token's fixed-point mass round(exp((x - best) / T) * 2^kSampleMassBits) (sample_exp: the same bits on every
// device), or 0 when it is not a candidate (masked, below the top_k floor, below min_p, or underflowing).
DSV4_SAMPLE_HD inline uint64_t candidate_mass(float x, const SampleShape& s) {
    if (x == -INFINITY || x < s.floor) return 0;
    const double a = (static_cast<double>(x) - static_cast<double>(s.best)) * s.inv_temperature;
    if (a < -33.0) return 0;  // e^-33 * 2^46 < 0.34 rounds to 0, as every smaller weight does: no exp needed
    const double weight = sample_exp(a);
    if (weight < s.min_p || weight == 0.0) return 0;
    return static_cast<uint64_t>(rint(weight * 70368744177664.0));  // 2^46 = 2^kSampleMassBits
}

// Where the draw lands in the kept mass: floor(u * kept), inside [0, kept).
DSV4_SAMPLE_HD inline uint64_t draw_target(double uniform, uint64_t kept) {
    const auto t = static_cast<uint64_t>(uniform * static_cast<double>(kept));
    return t < kept ? t : kept - 1;
}

// Order-preserving key of a float that is not NaN: a larger float has a larger key.
DSV4_SAMPLE_HD inline uint32_t logit_order_key(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}
DSV4_SAMPLE_HD inline float logit_from_order_key(uint32_t key) {
    const uint32_t bits = (key & 0x80000000u) != 0 ? key & 0x7fffffffu : ~key;
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

}  // namespace dsv4
