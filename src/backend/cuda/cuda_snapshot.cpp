// Prefix-cache boundary snapshots, slot copies and block copies on the GPU (semantics in backend.h; layout mirrors
// the CPU backend's cpu_snapshot.cpp): a snapshot holds, in position order, every layer's ring rows of
// [boundary - window, boundary) and every CSA layer's main and indexer compressor records of
// [boundary - ratio, boundary). Device-to-device copies on the backend's stream.
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace dsv4::cuda {
namespace {

// Copies `count` position-indexed rows [first, first + count) of `row_bytes` each between a ring (row = pos %
// ring_rows) and a dense array (row = pos - first), in at most two contiguous pieces.
void copy_ring_range(cudaStream_t s, void* ring_base, int64_t ring_rows, void* dense_base, int64_t first, int64_t count,
                     int64_t row_bytes, bool ring_to_dense) {
    auto* ring = static_cast<uint8_t*>(ring_base);
    auto* dense = static_cast<uint8_t*>(dense_base);
    int64_t done = 0;
    while (done < count) {
        const int64_t pos = first + done;
        const int64_t start = pos % ring_rows;
        const int64_t run = std::min(count - done, ring_rows - start);
        uint8_t* r = ring + start * row_bytes;
        uint8_t* d = dense + done * row_bytes;
        const auto bytes = static_cast<size_t>(run * row_bytes);
        DSV4_CUDA(cudaMemcpyAsync(ring_to_dense ? d : r, ring_to_dense ? r : d, bytes, cudaMemcpyDeviceToDevice, s));
        done += run;
    }
}

}  // namespace

void CudaBackend::create_snapshot_state() {
    const int64_t snaps = state_.num_snapshots;
    snapshots_.assign(layers_.size(), {});
    if (snaps == 0) return;
    for (size_t l = 0; l < layers_.size(); ++l) {
        SnapshotDev& s = snapshots_[l];
        s.ring = static_cast<uint8_t*>(device_copy(nullptr, snaps * model_.sliding_window * kv_format_.bytes));
        const LayerStateShape& shape = shapes_[l];
        if (shape.snapshot_records == 0) continue;  // not CSA
        s.main =
            static_cast<float*>(device_copy(nullptr, snaps * shape.snapshot_records * shape.main.record_floats() * 4));
        s.index =
            static_cast<float*>(device_copy(nullptr, snaps * shape.snapshot_records * shape.index.record_floats() * 4));
    }
}

void CudaBackend::transfer_snapshot(int32_t slot, int32_t snapshot, int64_t boundary, bool to_snapshot) {
    const char* op = to_snapshot ? "save_snapshot" : "restore_snapshot";
    join_side_stream();  // state the side stream may still be writing (compressors beside)
    DSV4_CHECK(slot >= 0 && slot < state_.max_slots, "{}: slot {} is outside [0, {})", op, slot, state_.max_slots);
    DSV4_CHECK(snapshot >= 0 && snapshot < state_.num_snapshots, "{}: snapshot {} is outside [0, {})", op, snapshot,
               state_.num_snapshots);
    DSV4_CHECK(boundary > 0 && boundary % state_.block_tokens == 0,
               "{}: boundary {} is not a positive multiple of "
               "the block size {}",
               op, boundary, state_.block_tokens);
    wait_for_loads();                                     // a restore reads a snapshot that may just have been loaded
    if (to_snapshot) wait_before_write(false, snapshot);  // a save overwrites one that may still be offloading
    const int64_t window = model_.sliding_window;
    const int64_t row = kv_format_.bytes;
    for (size_t l = 0; l < layers_.size(); ++l) {
        const LayerStateDev& ls = layers_[l];
        const SnapshotDev& sn = snapshots_[l];
        // Ring rows of [max(0, boundary - window), boundary) at snapshot rows offset by the skipped positions.
        const int64_t first = std::max<int64_t>(0, boundary - window);
        copy_ring_range(stream_, ls.ring + static_cast<int64_t>(slot) * ring_rows_ * row, ring_rows_,
                        sn.ring + (static_cast<int64_t>(snapshot) * window + (first - (boundary - window))) * row,
                        first, boundary - first, row, to_snapshot);
        // The compressor records of [boundary - n, boundary) (CSA: n = ratio, the window the next entry overlaps).
        const LayerStateShape& shape = shapes_[l];
        const int64_t n = shape.snapshot_records;
        if (n == 0) continue;
        auto records = [&](float* pending, float* snap, const CompressorRing& ring) {
            const int64_t rec = ring.record_floats();
            copy_ring_range(stream_, pending + static_cast<int64_t>(slot) * ring.slot_floats(), ring.rows,
                            snap + static_cast<int64_t>(snapshot) * n * rec, boundary - n, n, rec * 4, to_snapshot);
        };
        records(ls.main_pending, sn.main, shape.main);
        records(ls.index_pending, sn.index, shape.index);
    }
}

void CudaBackend::save_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) {
    transfer_snapshot(slot, snapshot, boundary, true);
}

void CudaBackend::restore_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) {
    transfer_snapshot(slot, snapshot, boundary, false);
}

void CudaBackend::copy_slot(int32_t src, int32_t dst) {
    DSV4_CHECK(src >= 0 && src < state_.max_slots && dst >= 0 && dst < state_.max_slots,
               "copy_slot: slots {} -> {} outside [0, {})", src, dst, state_.max_slots);
    if (src == dst) return;
    join_side_stream();
    for (size_t l = 0; l < layers_.size(); ++l) {
        const LayerStateDev& ls = layers_[l];
        const LayerStateShape& shape = shapes_[l];
        auto copy = [&](void* base_ptr, int64_t per_slot_bytes) {
            if (base_ptr == nullptr) return;
            auto* base = static_cast<uint8_t*>(base_ptr);
            DSV4_CUDA(cudaMemcpyAsync(base + dst * per_slot_bytes, base + src * per_slot_bytes,
                                      static_cast<size_t>(per_slot_bytes), cudaMemcpyDeviceToDevice, stream_));
        };
        copy(ls.ring, shape.ring_rows * kv_format_.bytes);
        copy(ls.main_pending, shape.main.slot_floats() * 4);
        copy(ls.index_pending, shape.index.slot_floats() * 4);
    }
}

void CudaBackend::copy_block(int32_t src, int32_t dst) {
    DSV4_CHECK(src >= 0 && src < state_.num_blocks && dst >= 0 && dst < state_.num_blocks,
               "copy_block: blocks {} -> {} outside [0, {})", src, dst, state_.num_blocks);
    if (src == dst) return;
    join_side_stream();
    wait_for_loads();
    wait_before_write(true, dst);
    for (const LayerStateDev& ls : layers_) {
        auto copy = [&](uint8_t* base, int64_t per_block_bytes) {
            if (base == nullptr) return;
            DSV4_CUDA(cudaMemcpyAsync(base + dst * per_block_bytes, base + src * per_block_bytes,
                                      static_cast<size_t>(per_block_bytes), cudaMemcpyDeviceToDevice, stream_));
        };
        copy(ls.entries, int64_t{ls.per_block} * kv_format_.bytes);
        copy(ls.index_keys, int64_t{ls.per_block} * key_format_.bytes);
    }
}

}  // namespace dsv4::cuda
