// Byte layouts of the stored sequence state per StateDtype (state/state_config.h), and the host encoder / decoder of
// one row. The CPU backend stores and reads rows through these; the CUDA backend's device codec
// (backend/cuda/state_codec.cuh) writes the same bytes. state/state_layout.h sizes the state with the same byte counts.
//
// K=V rows (ring rows, compressed entries, snapshot ring rows), head dim d with r rope dims (the last r), n = d - r:
//   f32   d x float32 (4d bytes)
//   bf16  d x bf16 (uint16, round to nearest even; 2d bytes)
//   fp8   the fp8_ds_mla record of model-spec 5.2, one contiguous record per row:
//           [n e4m3 codes][r x bf16 rope values][n/64 UE8M0 scale bytes, zero-padded to a multiple of 8]
//         (d = 512, r = 64: 448 + 128 + 8 = 584 bytes). The nope dims are rounded fp32 -> bf16 first; each block of
//         64 gets e = ceil(log2(max(amax, 1e-4) / qmax)) (core pow2_scale_exponent), scale byte e + 127 and codes
//         e4m3(clamp(x / 2^e, +-qmax)): exactly act_quant_fp8 of the bf16-rounded values with the row format's
//         Fp8Quant (kv_record_fp8_quant: OCP 448 / FNUZ 240), so the decoded row equals fp8_sim_bf16_input(nope) ++
//         bf16(rope). n must be a multiple of 64.
// Indexer keys, dim di:
//   f32 / bf16  as above (4di / 2di bytes)
//   fp8   [di e4m3 codes][one float32 scale 2^e] (vLLM's FP8 indexer cache, 132 bytes for di = 128): values rounded to
//         bf16 first, one block over the whole key, amax floor 1e-4, e = ceil(log2(amax / qmax)) with the row
//         format's Fp8Quant (index_key_fp8_quant: OCP 448 / FNUZ 224, the FNUZ codes then being the OCP quantiser's
//         bytes, core/fp8_dialect.h).
// The e4m3 codes are in the row format's dialect (core/fp8_dialect.h); the byte counts do not depend on it.
// NaN policy (fp8): a NaN element does not enter its block's amax and is stored as the dialect's e4m3 NaN code
// (OCP S.1111.111, FNUZ 0x80), decoding to NaN; an infinite element gives its block e = 127 and decodes to +-inf
// (its finite neighbours keep their codes at that scale). bf16: NaN stays NaN, overflow rounds to inf.
#pragma once

#include <cstdint>

#include "config/model_config.h"
#include "core/fp8_dialect.h"
#include "state/state_config.h"

namespace dsv4 {

inline constexpr int kFp8KvBlock = 64;      // nope dims per UE8M0 scale in an fp8_ds_mla record
inline constexpr int kFp8KvScaleAlign = 8;  // the scale bytes are padded to this many

// One stored row kind: a K=V row (rope_dim >= 0 dims at the end stay bf16 in fp8) or an indexer key.
struct StateRowFormat {
    StateDtype dtype = StateDtype::kF32;
    int dim = 0;
    int rope_dim = 0;  // K=V rows only
    bool index_key = false;
    Fp8Quant fp8 = kOcpQuant;  // dialect of the e4m3 codes and the quantiser's maximum (fp8 only)

    int nope() const { return dim - rope_dim; }
    // Bytes of one stored row.
    int64_t bytes() const;
    // x[0..dim) -> dst[0..bytes()).
    void encode(const float* x, uint8_t* dst) const;
    // src[0..bytes()) -> out[0..dim).
    void decode(const uint8_t* src, float* out) const;
};

// Throws dsv4::Error when the model's dims cannot be stored as `dtype` (fp8: head_dim - rope_head_dim must be a
// positive multiple of 64). `fp8`: the dialect and maximum of the e4m3 codes when dtype is fp8 (the backend's
// Fp8Sites::kv_rows / index_keys: kv_record_fp8_quant / index_key_fp8_quant of --fp8-dialect).
StateRowFormat kv_row_format(StateDtype dtype, const ModelConfig& config, Fp8Quant fp8);
StateRowFormat index_key_format(StateDtype dtype, const ModelConfig& config, Fp8Quant fp8);

}  // namespace dsv4
