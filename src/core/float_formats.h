// Exact scalar decode/encode of the narrow number formats dsv4 meets: bf16, fp16, the four FP8 formats, UE8M0
// scales and FP4 e2m1. Values are carried as raw bits (uint16_t / uint8_t); no _Float16 / __bf16 anywhere.
//
// Decoding is exact (every code of every format is a float). Encoding rounds to nearest, ties to even (RNE), and
// follows these policies (see model-spec 4.3/4.4 and design.md principle 3):
//
//   format       bias  max finite  inf?  NaN code(s)              encode: |x| > max      inf          NaN      -0
//   bf16          127  3.39e38     yes   exp=FF, man!=0           RNE, may round to inf  inf          quiet*   -0
//   fp16 (IEEE)    15  65504       yes   exp=1F, man!=0           RNE, >= 65520 -> inf   inf          quiet*   -0
//   e4m3 OCP        7  448         no    S.1111.111 (0x7F, 0xFF)  saturate to +-448      +-448        S|0x7F   0x80
//   e4m3 FNUZ       8  240         no    0x80 only                saturate to +-240      +-240        0x80     0x00
//   e5m2 OCP       15  57344       yes   S.11111.{01,10,11}       saturate to +-57344    +-57344      S|0x7E   0x80
//   e5m2 FNUZ      16  57344       no    0x80 only                saturate to +-57344    +-57344      0x80     0x00
//   e2m1 (FP4)      1  6           no    none                     saturate to +-6        +-6          +6 (0x7) 0x8
//   (* quiet NaN with the input's sign; the payload is not preserved beyond what fits.)
//
// The FP8 and FP4 encoders are "satfinite": any |x| at or above the largest finite value (including +-inf) becomes
// +-max, which is what DeepSeek's clamp-then-cast quantisers and PTX cvt.satfinite produce. This also holds for
// e5m2 OCP although that format has an infinity: no finite input ever produces inf or NaN from these encoders.
//
// UE8M0 (scale format, torch float8_e8m0fnu): byte e means 2^(e-127); 0xFF is NaN; no sign, no zero.
// encode_ue8m0(x) rounds the exponent UP (the ceil the quantisers use): it returns the byte of the smallest power of
// two >= |x|, clamped to [2^-127, 2^127] (bytes 0x00..0xFE). The sign is ignored, 0 gives 0x00, +-inf gives 0xFE,
// NaN gives 0xFF; a finite input never gives 0xFF.
//
// FP4 e2m1 codes (s e1 e0 m): 0..7 -> 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign (8 = -0 ... 15 = -6).
// Two codes per byte, the LOW nibble holds the even element (k = 2j), the high nibble the odd one (k = 2j+1).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/fp8_dialect.h"

namespace dsv4 {

// Largest finite magnitudes.
inline constexpr float kE4M3Max = 448.0f;
inline constexpr float kE4M3FnuzMax = 240.0f;
inline constexpr float kE5M2Max = 57344.0f;
inline constexpr float kE2M1Max = 6.0f;
inline constexpr float kFp16Max = 65504.0f;

// The FP8 formats: e4m3 and e5m2, each in both dialects (core/fp8_dialect.h). OCP = e4m3fn / e5m2 as on NVIDIA
// Hopper/Blackwell and AMD gfx950; FNUZ = AMD gfx942 (MI300X).
enum class Fp8Format : uint8_t {
    kE4M3Ocp,
    kE4M3Fnuz,
    kE5M2Ocp,
    kE5M2Fnuz,
};

// --- bf16 / fp16 ---------------------------------------------------------------------------------------------------
float decode_bf16(uint16_t bits);
uint16_t encode_bf16(float value);  // RNE; NaN stays NaN (quiet, sign kept)
// Rounds a float to the nearest bf16 value (RNE) and returns it as a float.
float round_to_bf16(float value);

float decode_fp16(uint16_t bits);
uint16_t encode_fp16(float value);  // IEEE RNE with subnormals; overflow -> inf; NaN -> quiet NaN

// --- FP8
// --------------------------------------------------------------------------------------------------------------
float decode_e4m3(uint8_t code);  // OCP e4m3fn
uint8_t encode_e4m3(float value);
float decode_e4m3_fnuz(uint8_t code);
uint8_t encode_e4m3_fnuz(float value);
float decode_e5m2(uint8_t code);  // OCP e5m2
uint8_t encode_e5m2(float value);
float decode_e5m2_fnuz(uint8_t code);
uint8_t encode_e5m2_fnuz(float value);

float decode_fp8(uint8_t code, Fp8Format format);
uint8_t encode_fp8(float value, Fp8Format format);

// All 256 decoded values of a format (index = code). Used by table-driven bulk kernels.
const std::array<float, 256>& fp8_decode_table(Fp8Format format);

// Largest finite magnitude of a format.
float fp8_max(Fp8Format format);

// e4m3 in a dialect: the format, and its exact codec (what every dialect-aware site calls).
Fp8Format e4m3_format(Fp8Dialect dialect);
inline float decode_e4m3(uint8_t code, Fp8Dialect dialect) {
    return dialect == Fp8Dialect::kFnuz ? decode_e4m3_fnuz(code) : decode_e4m3(code);
}
inline uint8_t encode_e4m3(float value, Fp8Dialect dialect) {
    return dialect == Fp8Dialect::kFnuz ? encode_e4m3_fnuz(value) : encode_e4m3(value);
}

// Converts an OCP e4m3 code to the FNUZ e4m3 code of the same VALUE (not the same bits: the same byte read as FNUZ is
// half the OCP value). Every OCP value with |v| <= 240 is exactly representable in FNUZ and is preserved (including
// all OCP subnormals). |v| in (240, 448] (OCP codes 0x78..0x7E and 0xF8..0xFE) saturates to +-240 (0x7F / 0xFF).
// OCP NaN (0x7F, 0xFF) -> 0x80 (the FNUZ NaN). OCP -0 (0x80) -> 0x00 (FNUZ has no -0).
uint8_t e4m3_ocp_to_fnuz(uint8_t ocp_code);
void e4m3_ocp_to_fnuz(const uint8_t* ocp_codes, uint8_t* fnuz_codes, size_t n);

// --- UE8M0
// ------------------------------------------------------------------------------------------------------------
float decode_ue8m0(uint8_t code);   // 2^(code-127); 0xFF -> NaN
uint8_t encode_ue8m0(float value);  // see the policy above (round the exponent up, clamp, never 0xFF when finite)

// ceil(log2(|value|)) computed exactly from the fp32 bits (exponent, +1 if any mantissa bit is set; subnormals exact),
// clamped to [-127, 127]. 0 -> -127, inf -> 127. NaN -> 127 (callers that care test for NaN first).
int ceil_log2_clamped(float value);

// --- FP4 e2m1 -------------------------------------------------------------------------------------------------------
float decode_e2m1(uint8_t code);   // uses the low 4 bits of code
uint8_t encode_e2m1(float value);  // returns 0..15

// Element i of a packed e2m1 array (low nibble = even element).
inline uint8_t e2m1_code_at(const uint8_t* packed, int64_t i) {
    const uint8_t byte = packed[i >> 1];
    return (i & 1) ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0x0F);
}
inline uint8_t pack_e2m1(uint8_t even_code, uint8_t odd_code) {
    return static_cast<uint8_t>((even_code & 0x0F) | ((odd_code & 0x0F) << 4));
}

}  // namespace dsv4
