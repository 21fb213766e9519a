// The FP8 dialect: how an e4m3 byte is read. A first-class property of every FP8 thing dsv4 holds (design.md
// principle 3): the weights in memory, the activation quantisation of reference / fast numerics, the fp8_ds_mla K=V
// rows and the FP8 indexer keys. Both dialects share the bit layout (1 sign, 4 exponent, 3 mantissa bits):
//
//   dialect  bias  max  -0    NaN          the same byte read as the other dialect
//   OCP       7    448  0x80  0x7F, 0xFF   (e4m3fn: NVIDIA Hopper/Blackwell, AMD gfx950, the CPU; DeepSeek ships it)
//   FNUZ      8    240  none  0x80         (AMD gfx942 / MI300X)    = exactly half the value, except 0x80 / 0x7F / 0xFF
//
// Quantisation maxima per site (the largest code magnitude a quantiser may produce, docs/architecture.md "FP8
// dialects" says why):
//
//   site                                  OCP   FNUZ
//   activation quantisation (per 1x128)   448   240   the format's whole range (torch.finfo, hardware saturation)
//   fp8_ds_mla K=V rows (per 64)          448   240   the same formula as the activations (the record IS act_quant)
//   FP8 indexer keys (one scale per key)  448   224   fnuz 224 = OCP 448 / 2: the codes equal the OCP quantiser's
//                                                     bytes (scale x2, -0 flushed), so indexer top-k picks never
//                                                     depend on the dialect (the vLLM / MI300X overlay choice)
#pragma once

#include <cstdint>
#include <string_view>

namespace dsv4 {

enum class Fp8Dialect : uint8_t {
    kOcp,   // e4m3fn
    kFnuz,  // e4m3fnuz
};

inline constexpr float kFnuzIndexKeyMax = 224.0f;

// "ocp" | "fnuz".
std::string_view fp8_dialect_name(Fp8Dialect dialect);
// "ocp" | "fnuz"; anything else is a dsv4::Error naming the accepted values.
Fp8Dialect parse_fp8_dialect(std::string_view name);
// A human label for messages: "OCP e4m3 (e4m3fn)" | "FNUZ e4m3 (e4m3fnuz)".
std::string_view fp8_dialect_label(Fp8Dialect dialect);

// How one site quantises to FP8: the dialect of its codes and the largest magnitude it maps a block's amax to.
struct Fp8Quant {
    Fp8Dialect dialect = Fp8Dialect::kOcp;
    float qmax = 448.0f;
};

inline constexpr Fp8Quant kOcpQuant{Fp8Dialect::kOcp, 448.0f};

// The sites of the table above.
Fp8Quant activation_fp8_quant(Fp8Dialect dialect);
Fp8Quant kv_record_fp8_quant(Fp8Dialect dialect);
Fp8Quant index_key_fp8_quant(Fp8Dialect dialect);

// Every FP8 site of a backend: what `--fp8-dialect` selects (fp8_sites), one struct so that a test can also pin a
// site's maximum (e.g. FNUZ with 224 everywhere, which reproduces OCP numerics bit for bit).
struct Fp8Sites {
    Fp8Dialect weights = Fp8Dialect::kOcp;  // FP8 weights in memory (converted exactly at load)
    Fp8Quant activations = kOcpQuant;       // activation quantisation into FP8/FP4 GEMMs
    Fp8Quant kv_rows = kOcpQuant;           // fp8_ds_mla K=V rows (and the FP8-sim of reference numerics)
    Fp8Quant index_keys = kOcpQuant;        // FP8 indexer keys
};
Fp8Sites fp8_sites(Fp8Dialect dialect);

}  // namespace dsv4
