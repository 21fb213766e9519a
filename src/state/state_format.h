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
//         64 gets e = ceil(log2(max(amax, 1e-4) / 448)) (core pow2_scale_exponent), scale byte e + 127 and codes
//         e4m3(clamp(x / 2^e, +-448)): exactly act_quant_fp8 of the bf16-rounded values, so the decoded row equals
//         fp8_sim_bf16_input(nope) ++ bf16(rope). n must be a multiple of 64.
// Indexer keys, dim di:
//   f32 / bf16  as above (4di / 2di bytes)
//   fp8   [di e4m3 codes][one float32 scale 2^e] (vLLM's FP8 indexer cache, 132 bytes for di = 128): values rounded to
//         bf16 first, one block over the whole key, amax floor 1e-4, e = ceil(log2(amax / 448)).
// NaN policy (fp8): a NaN element does not enter its block's amax and is stored as the e4m3 NaN code (S.1111.111),
// decoding to NaN; an infinite element gives its block e = 127 and decodes to +-inf (its finite neighbours keep
// their codes at that scale). bf16: NaN stays NaN, overflow rounds to inf.
#pragma once

#include <cstdint>

#include "config/model_config.h"
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

    int nope() const { return dim - rope_dim; }
    // Bytes of one stored row.
    int64_t bytes() const;
    // x[0..dim) -> dst[0..bytes()).
    void encode(const float* x, uint8_t* dst) const;
    // src[0..bytes()) -> out[0..dim).
    void decode(const uint8_t* src, float* out) const;
};

// Throws dsv4::Error when the model's dims cannot be stored as `dtype` (fp8: head_dim - rope_head_dim must be a
// positive multiple of 64).
StateRowFormat kv_row_format(StateDtype dtype, const ModelConfig& config);
StateRowFormat index_key_format(StateDtype dtype, const ModelConfig& config);

}  // namespace dsv4
