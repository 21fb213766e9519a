// Element types that appear in checkpoints, caches and activations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dsv4 {

enum class DType : uint8_t {
    kF32,
    kF16,
    kBF16,
    kF8E4M3,      // OCP e4m3fn (NVIDIA, AMD gfx950): bias 7, max 448, NaN = S.1111.111, no inf
    kF8E4M3Fnuz,  // AMD gfx942: bias 8, max 240, 0x80 = NaN, no -0, no inf
    kF8E5M2,      // OCP e5m2
    kF8E5M2Fnuz,  // AMD gfx942 e5m2: bias 16, 0x80 = NaN, no -0, no inf
    kF8E8M0,      // UE8M0 power-of-two scale, 0xFF = NaN
    kF4E2M1,      // two e2m1 codes per byte, low nibble = even element
    kI64,
    kI32,
    kI8,
    kU8,
};

// Bits per element (FP4 is 4).
constexpr int dtype_bits(DType t) {
    switch (t) {
        case DType::kF32:
            return 32;
        case DType::kF16:
            return 16;
        case DType::kBF16:
            return 16;
        case DType::kF8E4M3:
            return 8;
        case DType::kF8E4M3Fnuz:
            return 8;
        case DType::kF8E5M2:
            return 8;
        case DType::kF8E5M2Fnuz:
            return 8;
        case DType::kF8E8M0:
            return 8;
        case DType::kF4E2M1:
            return 4;
        case DType::kI64:
            return 64;
        case DType::kI32:
            return 32;
        case DType::kI8:
            return 8;
        case DType::kU8:
            return 8;
    }
    return 0;
}

// Name as written in a safetensors header ("BF16", "F8_E4M3", ...); our own names for the non-safetensors types.
std::string_view dtype_name(DType t);

// Parses a safetensors dtype string. Returns nullopt for names dsv4 does not read.
std::optional<DType> parse_safetensors_dtype(std::string_view name);

}  // namespace dsv4
