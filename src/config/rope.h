// RoPE frequencies of DeepSeek-V4 (model-spec 2.4): interleaved pairs on the trailing rope dims, theta per layer
// type, YaRN frequency blend (no magnitude scaling) on compressed layers. Computed in float32 the way the HF reference
// computes them, so angles match it to the last bit where float32 allows.
#pragma once

#include <vector>

#include "config/model_config.h"

namespace dsv4 {

// inv_freq[i] for the rope_dim / 2 pairs.
std::vector<float> rope_inv_freq(const RopeParams& rope);

// cos/sin of angle = float(pos) * inv_freq[i] (float32 product, as the reference), for the rope_dim / 2 pairs.
void rope_cos_sin(const std::vector<float>& inv_freq, int64_t pos, float* cos_out, float* sin_out);

}  // namespace dsv4
