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
        if (layers_[l].index_keys == nullptr) continue;  // not CSA
        const int ratio = state_.block_tokens / layers_[l].per_block;
        s.main = static_cast<float*>(device_copy(nullptr, snaps * ratio * 4 * model_.head_dim * 4));
        s.index = static_cast<float*>(device_copy(nullptr, snaps * ratio * 4 * model_.index_head_dim * 4));
    }
}

void CudaBackend::transfer_snapshot(int32_t slot, int32_t snapshot, int64_t boundary, bool to_snapshot) {
    const char* op = to_snapshot ? "save_snapshot" : "restore_snapshot";
    DSV4_CHECK(slot >= 0 && slot < state_.max_slots, "{}: slot {} is outside [0, {})", op, slot, state_.max_slots);
    DSV4_CHECK(snapshot >= 0 && snapshot < state_.num_snapshots, "{}: snapshot {} is outside [0, {})", op, snapshot,
               state_.num_snapshots);
    DSV4_CHECK(boundary > 0 && boundary % state_.block_tokens == 0,
               "{}: boundary {} is not a positive multiple of "
               "the block size {}",
               op, boundary, state_.block_tokens);
    const int64_t window = model_.sliding_window, hd = model_.head_dim, ihd = model_.index_head_dim;
    const int64_t row = kv_format_.bytes;
    for (size_t l = 0; l < layers_.size(); ++l) {
        const LayerStateDev& ls = layers_[l];
        const SnapshotDev& sn = snapshots_[l];
        // Ring rows of [max(0, boundary - window), boundary) at snapshot rows offset by the skipped positions.
        const int64_t first = std::max<int64_t>(0, boundary - window);
        copy_ring_range(stream_, ls.ring + static_cast<int64_t>(slot) * ring_rows_ * row, ring_rows_,
                        sn.ring + (static_cast<int64_t>(snapshot) * window + (first - (boundary - window))) * row,
                        first, boundary - first, row, to_snapshot);
        if (ls.index_keys == nullptr) continue;
        const int64_t ratio = state_.block_tokens / ls.per_block;
        copy_ring_range(stream_, ls.main_pending + static_cast<int64_t>(slot) * ls.main_rows * 4 * hd, ls.main_rows,
                        sn.main + static_cast<int64_t>(snapshot) * ratio * 4 * hd, boundary - ratio, ratio, 4 * hd * 4,
                        to_snapshot);
        copy_ring_range(stream_, ls.index_pending + static_cast<int64_t>(slot) * ls.index_rows * 4 * ihd, ls.index_rows,
                        sn.index + static_cast<int64_t>(snapshot) * ratio * 4 * ihd, boundary - ratio, ratio,
                        4 * ihd * 4, to_snapshot);
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
    const int64_t hd = model_.head_dim, ihd = model_.index_head_dim;
    for (const LayerStateDev& ls : layers_) {
        auto copy = [&](void* base_ptr, int64_t per_slot_bytes) {
            if (base_ptr == nullptr) return;
            auto* base = static_cast<uint8_t*>(base_ptr);
            DSV4_CUDA(cudaMemcpyAsync(base + dst * per_slot_bytes, base + src * per_slot_bytes,
                                      static_cast<size_t>(per_slot_bytes), cudaMemcpyDeviceToDevice, stream_));
        };
        copy(ls.ring, int64_t{ring_rows_} * kv_format_.bytes);
        const int64_t main_width = (ls.index_keys != nullptr ? 2 : 1) * hd;
        copy(ls.main_pending, int64_t{ls.main_rows} * 2 * main_width * 4);
        copy(ls.index_pending, int64_t{ls.index_rows} * 4 * ihd * 4);
    }
}

void CudaBackend::copy_block(int32_t src, int32_t dst) {
    DSV4_CHECK(src >= 0 && src < state_.num_blocks && dst >= 0 && dst < state_.num_blocks,
               "copy_block: blocks {} -> {} outside [0, {})", src, dst, state_.num_blocks);
    if (src == dst) return;
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
