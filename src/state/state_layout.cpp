#include "state/state_layout.h"

#include "core/error.h"
#include "state/state_format.h"

namespace dsv4 {
namespace {

constexpr int64_t kRecordElementBytes = 4;  // compressor records (kv | gate + ape) are float32 everywhere

}  // namespace

LayerStateShape layer_state_shape(const ModelConfig& c, int layer, int block_tokens, int rewind_capacity) {
    DSV4_CHECK(block_tokens > 0 && rewind_capacity >= 0, "state layout: block size {} / rewind capacity {}",
               block_tokens, rewind_capacity);
    DSV4_CHECK(layer >= 0 && layer < static_cast<int>(c.layers.size()), "state layout: layer {} outside [0, {})", layer,
               c.layers.size());
    const LayerConfig& lc = c.layers[layer];
    LayerStateShape s;
    s.attention = lc.attention;
    s.ring_rows = int64_t{c.sliding_window} + rewind_capacity;
    s.snapshot_ring_rows = c.sliding_window;
    s.ratio = lc.compress_ratio;
    if (s.ratio == 0) return s;
    DSV4_CHECK(block_tokens % s.ratio == 0,
               "state: block size {} is not a multiple of the compression ratio {} of layer {}", block_tokens, s.ratio,
               layer);
    s.entries_per_block = block_tokens / s.ratio;
    // A CSA compressor overlaps two windows: it keeps two windows of records, each twice as wide (model-spec 2.4).
    const bool overlap = lc.attention == AttentionType::kCsa;
    const int64_t windows = overlap ? 2 : 1;
    s.main = {windows * s.ratio + rewind_capacity, windows * c.head_dim};
    if (overlap) {
        s.index = {2 * s.ratio + rewind_capacity, 2 * int64_t{c.index_head_dim}};
        s.snapshot_records = s.ratio;  // the window the next entry overlaps (HCA: no window is open at a boundary)
    }
    return s;
}

StateLayout compute_state_layout(const ModelConfig& c, int block_tokens, int rewind_capacity, StateDtype dtype) {
    StateLayout s;
    s.dtype = dtype;
    // Byte counts are the same in both FP8 dialects.
    s.row_bytes = kv_row_format(dtype, c, kOcpQuant).bytes();  // throws when the dims do not fit the dtype
    s.indexer_key_bytes = index_key_format(dtype, c, kOcpQuant).bytes();
    for (int l = 0; l < static_cast<int>(c.layers.size()); ++l) {
        const LayerStateShape shape = layer_state_shape(c, l, block_tokens, rewind_capacity);
        const int64_t records = shape.main.slot_floats() + shape.index.slot_floats();
        const int64_t snapshot_records =
            shape.snapshot_records * (shape.main.record_floats() + shape.index.record_floats());
        s.slot_bytes += shape.ring_rows * s.row_bytes + records * kRecordElementBytes;
        s.snapshot_bytes += shape.snapshot_ring_rows * s.row_bytes + snapshot_records * kRecordElementBytes;
        s.block_bytes += shape.entries_per_block * (s.row_bytes + (shape.has_index_keys() ? s.indexer_key_bytes : 0));
    }
    return s;
}

}  // namespace dsv4
