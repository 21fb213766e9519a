#include "config/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace dsv4 {
namespace {

// Dimension index whose wavelength completes `rotations` turns over the original context (YaRN correction range).
double correction_dim(double rotations, int dim, double theta, double original_max) {
    return dim * std::log(original_max / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
}

}  // namespace

std::vector<float> rope_inv_freq(const RopeParams& rope) {
    const int dim = rope.rope_dim;
    const int pairs = dim / 2;
    std::vector<float> inv(pairs);
    const float theta = static_cast<float>(rope.theta);
    for (int i = 0; i < pairs; ++i) {
        const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
        inv[i] = 1.0f / std::pow(theta, exponent);
    }
    if (!rope.yarn) return inv;

    const YarnParams& y = *rope.yarn;
    const double orig = static_cast<double>(y.original_max_position_embeddings);
    double low = std::floor(correction_dim(y.beta_fast, dim, rope.theta, orig));
    double high = std::ceil(correction_dim(y.beta_slow, dim, rope.theta, orig));
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;  // avoid a zero-width ramp
    const float factor = static_cast<float>(y.factor);
    for (int i = 0; i < pairs; ++i) {
        // ramp 0 keeps the original frequency (extrapolation), ramp 1 divides it by the factor (interpolation).
        const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
        const float extrapolation = 1.0f - ramp;
        const float base = inv[i];
        inv[i] = (base / factor) * (1.0f - extrapolation) + base * extrapolation;
    }
    return inv;
}

void rope_cos_sin(const std::vector<float>& inv_freq, int64_t pos, float* cos_out, float* sin_out) {
    const float p = static_cast<float>(pos);
    for (size_t i = 0; i < inv_freq.size(); ++i) {
        const float angle = p * inv_freq[i];
        cos_out[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
        sin_out[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
}

}  // namespace dsv4
