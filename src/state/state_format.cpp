#include "state/state_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/float_formats.h"
#include "core/quant_sim.h"

namespace dsv4 {
namespace {

int64_t round_up(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}

int64_t fp8_scale_bytes(int nope) {
    return round_up((nope + kFp8KvBlock - 1) / kFp8KvBlock, kFp8KvScaleAlign);
}

void store_bf16(float v, uint8_t* dst) {
    const uint16_t bits = encode_bf16(v);
    std::memcpy(dst, &bits, 2);
}

float load_bf16(const uint8_t* src) {
    uint16_t bits;
    std::memcpy(&bits, src, 2);
    return decode_bf16(bits);
}

// The fp8_ds_mla record of one K=V row (layout in state_format.h).
void encode_fp8_kv(const float* x, int nope, int rope, Fp8Quant quant, uint8_t* dst) {
    uint8_t* scales = dst + nope + 2 * rope;
    float block[kFp8KvBlock];
    for (int begin = 0, b = 0; begin < nope; begin += kFp8KvBlock, ++b) {
        const int len = std::min(kFp8KvBlock, nope - begin);
        for (int j = 0; j < len; ++j) block[j] = round_to_bf16(x[begin + j]);
        act_quant_fp8(block, len, kFp8KvBlock, quant, dst + begin, scales + b);
    }
    for (int j = 0; j < rope; ++j) store_bf16(x[nope + j], dst + nope + 2 * j);
    const int64_t used = (nope + kFp8KvBlock - 1) / kFp8KvBlock;
    std::fill(scales + used, scales + fp8_scale_bytes(nope), uint8_t{0});
}

void decode_fp8_kv(const uint8_t* src, int nope, int rope, Fp8Dialect dialect, float* out) {
    const uint8_t* scales = src + nope + 2 * rope;
    for (int j = 0; j < nope; ++j) out[j] = decode_e4m3(src[j], dialect) * decode_ue8m0(scales[j / kFp8KvBlock]);
    for (int j = 0; j < rope; ++j) out[nope + j] = load_bf16(src + nope + 2 * j);
}

// One FP8 indexer key: codes of the bf16-rounded values under one power-of-two scale, then the scale as float32.
void encode_fp8_key(const float* x, int dim, Fp8Quant quant, uint8_t* dst) {
    float amax = 0.0f;
    for (int j = 0; j < dim; ++j) amax = std::max(amax, std::fabs(round_to_bf16(x[j])));  // NaN does not count
    const int e = pow2_scale_exponent(amax, kFp8AmaxFloor, quant.qmax);
    const float inverse = std::ldexp(1.0f, -e);
    for (int j = 0; j < dim; ++j) {
        dst[j] = encode_e4m3(std::clamp(round_to_bf16(x[j]) * inverse, -quant.qmax, quant.qmax), quant.dialect);
    }
    const float scale = std::ldexp(1.0f, e);
    std::memcpy(dst + dim, &scale, 4);
}

void decode_fp8_key(const uint8_t* src, int dim, Fp8Dialect dialect, float* out) {
    float scale;
    std::memcpy(&scale, src + dim, 4);
    for (int j = 0; j < dim; ++j) out[j] = decode_e4m3(src[j], dialect) * scale;
}

}  // namespace

std::string_view state_dtype_name(StateDtype dtype) {
    switch (dtype) {
        case StateDtype::kF32:
            return "f32";
        case StateDtype::kBf16:
            return "bf16";
        case StateDtype::kFp8:
            return "fp8";
    }
    return "?";
}

StateDtype parse_state_dtype(std::string_view name) {
    if (name == "f32") return StateDtype::kF32;
    if (name == "bf16") return StateDtype::kBf16;
    if (name == "fp8") return StateDtype::kFp8;
    fail("unknown state dtype '{}' (f32, bf16 or fp8)", name);
}

int64_t StateRowFormat::bytes() const {
    switch (dtype) {
        case StateDtype::kF32:
            return 4 * int64_t{dim};
        case StateDtype::kBf16:
            return 2 * int64_t{dim};
        case StateDtype::kFp8:
            return index_key ? int64_t{dim} + 4 : nope() + 2 * int64_t{rope_dim} + fp8_scale_bytes(nope());
    }
    return 0;
}

void StateRowFormat::encode(const float* x, uint8_t* dst) const {
    switch (dtype) {
        case StateDtype::kF32:
            std::memcpy(dst, x, 4 * static_cast<size_t>(dim));
            return;
        case StateDtype::kBf16:
            for (int j = 0; j < dim; ++j) store_bf16(x[j], dst + 2 * j);
            return;
        case StateDtype::kFp8:
            if (index_key) {
                encode_fp8_key(x, dim, fp8, dst);
            } else {
                encode_fp8_kv(x, nope(), rope_dim, fp8, dst);
            }
            return;
    }
}

void StateRowFormat::decode(const uint8_t* src, float* out) const {
    switch (dtype) {
        case StateDtype::kF32:
            std::memcpy(out, src, 4 * static_cast<size_t>(dim));
            return;
        case StateDtype::kBf16:
            for (int j = 0; j < dim; ++j) out[j] = load_bf16(src + 2 * j);
            return;
        case StateDtype::kFp8:
            if (index_key) {
                decode_fp8_key(src, dim, fp8.dialect, out);
            } else {
                decode_fp8_kv(src, nope(), rope_dim, fp8.dialect, out);
            }
            return;
    }
}

StateRowFormat kv_row_format(StateDtype dtype, const ModelConfig& config, Fp8Quant fp8) {
    StateRowFormat f;
    f.dtype = dtype;
    f.fp8 = fp8;
    f.dim = config.head_dim;
    f.rope_dim = config.rope_head_dim;
    DSV4_CHECK(f.dim > 0 && f.rope_dim >= 0 && f.rope_dim <= f.dim, "state: head_dim {} / rope_head_dim {}", f.dim,
               f.rope_dim);
    DSV4_CHECK(dtype != StateDtype::kFp8 || f.nope() % kFp8KvBlock == 0,
               "--kv-cache-dtype fp8: the fp8_ds_mla record quantises the non-rope dims in blocks of {}, but this "
               "model has head_dim {} - rope_head_dim {} = {} of them (use bf16 or f32)",
               kFp8KvBlock, f.dim, f.rope_dim, f.nope());
    return f;
}

StateRowFormat index_key_format(StateDtype dtype, const ModelConfig& config, Fp8Quant fp8) {
    StateRowFormat f;
    f.dtype = dtype;
    f.fp8 = fp8;
    f.dim = config.index_head_dim;
    f.index_key = true;
    return f;
}

}  // namespace dsv4
