// The geometry of the sequence state, computed once from the ModelConfig (model-spec 5.1, 5.2, 5.4): per layer, what a
// slot, a paged block and a boundary snapshot hold (layer_state_shape, the ONE formula the planner, the CPU backend
// and the CUDA backend all use), and the bytes that makes per storage dtype (compute_state_layout).
//
// Per layer (window W, rewind capacity R, head dim d, indexer head dim di, ratio r, block of B tokens):
//   slot      all layers: (W + R) ring rows;  CSA: main (2r + R) records of 2*2d fp32 and indexer (2r + R) records
//             of 2*2di fp32;  HCA: (r + R) records of 2*d fp32   (compressor records are float32 on every device)
//   block     CSA: B/r compressed rows + B/r indexer keys;  HCA: B/r compressed rows;  sliding layers: nothing
//   snapshot  all layers: W ring rows;  CSA: r main records + r indexer records (HCA: none at a boundary)
// Row / key bytes by dtype (state/state_format.h, the formats the backends store): f32 4d / 4di; bf16 2d / 2di;
// fp8: fp8_ds_mla rows (nope e4m3 + rope bf16 + one UE8M0 per 64 nope dims, padded to 8 bytes: 584 B for d = 512)
// and FP8 indexer keys (di e4m3 + one fp32 scale: 132 B for di = 128).
#pragma once

#include <cstdint>

#include "config/model_config.h"
#include "state/state_config.h"

namespace dsv4 {

// One compressor's per-slot ring of pre-pooling records, addressed by position % rows. A record is the token's two
// projections side by side: kv (width floats) | gate + ape (width floats), float32 on every device.
struct CompressorRing {
    int64_t rows = 0;   // 0: the layer has no such compressor
    int64_t width = 0;  // floats of one half (2 * head dim for an overlapping compressor, else head dim)

    int64_t record_floats() const { return 2 * width; }
    int64_t slot_floats() const { return rows * record_floats(); }
};

// What one layer keeps per slot, per paged block and per boundary snapshot.
struct LayerStateShape {
    AttentionType attention = AttentionType::kSliding;
    int64_t ratio = 0;               // compression ratio (0: sliding-window layer; nothing below is set)
    int64_t ring_rows = 0;           // K=V rows per slot (window + rewind capacity), addressed by position % ring_rows
    int64_t snapshot_ring_rows = 0;  // K=V rows per boundary snapshot (the window)
    int64_t entries_per_block = 0;   // compressed rows (and CSA indexer keys) per paged block
    CompressorRing main;             // the main compressor (CSA: overlapping; HCA: not)
    CompressorRing index;            // the indexer's compressor (CSA only; overlapping)
    int64_t snapshot_records = 0;    // records per compressor ring a snapshot keeps (CSA: ratio; HCA: 0)

    bool has_index_keys() const { return index.rows > 0; }
};

// Throws dsv4::Error when block_tokens is not a multiple of the layer's compression ratio or the sizes are negative.
LayerStateShape layer_state_shape(const ModelConfig& config, int layer, int block_tokens, int rewind_capacity);

struct StateLayout {
    StateDtype dtype = StateDtype::kF32;
    int64_t row_bytes = 0;          // one K=V row (ring row or compressed entry)
    int64_t indexer_key_bytes = 0;  // one indexer key
    int64_t slot_bytes = 0;         // fixed state of one slot
    int64_t block_bytes = 0;        // one paged block
    int64_t snapshot_bytes = 0;     // one boundary snapshot

    StateBytes bytes() const { return {slot_bytes, block_bytes, snapshot_bytes}; }
};

StateLayout compute_state_layout(const ModelConfig& config, int block_tokens, int rewind_capacity, StateDtype dtype);

}  // namespace dsv4
