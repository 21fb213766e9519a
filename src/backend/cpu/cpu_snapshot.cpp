// Prefix-cache boundary snapshots, slot copies and block copies on the CPU (the engine's additions to the state ops;
// semantics in backend.h). A snapshot stores, in position order, every layer's ring rows of
// [boundary - window, boundary) and every CSA layer's main and indexer compressor records of
// [boundary - ratio, boundary); slots address the same rows through their rings (position % rows).
#include <algorithm>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_backend.h"

namespace dsv4 {
namespace {

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

void copy_rows(float* dst, const float* src, int64_t floats) {
    std::memcpy(dst, src, floats * sizeof(float));
}

}  // namespace

void CpuBackend::create_snapshot_state() {
    const int64_t snaps = state_.num_snapshots;
    for (CpuLayerState& ls : layers_) {
        // Ring rows in the storage dtype (a multiple of 4 bytes each); never read before a save writes them.
        ls.snap_ring.assign(static_cast<size_t>(snaps * model_.sliding_window * kv_format_.bytes() / 4), kPoison);
        const LayerStateShape& shape = ls.shape;
        ls.snap_main.assign(static_cast<size_t>(snaps * shape.snapshot_records * shape.main.record_floats()), kPoison);
        ls.snap_index.assign(static_cast<size_t>(snaps * shape.snapshot_records * shape.index.record_floats()),
                             kPoison);
    }
}

void CpuBackend::transfer_snapshot(int32_t slot, int32_t snapshot, int64_t boundary, bool to_snapshot) {
    const char* op = to_snapshot ? "save_snapshot" : "restore_snapshot";
    DSV4_CHECK(slot >= 0 && slot < state_.max_slots, "{}: slot {} is outside [0, {})", op, slot, state_.max_slots);
    DSV4_CHECK(snapshot >= 0 && snapshot < state_.num_snapshots, "{}: snapshot {} is outside [0, {})", op, snapshot,
               state_.num_snapshots);
    DSV4_CHECK(boundary > 0 && boundary % state_.block_tokens == 0,
               "{}: boundary {} is not a positive multiple of "
               "the block size {}",
               op, boundary, state_.block_tokens);
    auto move = [&](void* slot_data, void* snap_data, int64_t bytes) {
        std::memcpy(to_snapshot ? snap_data : slot_data, to_snapshot ? slot_data : snap_data, bytes);
    };
    const int window = model_.sliding_window;
    const int64_t row_bytes = kv_format_.bytes();
    for (size_t l = 0; l < layers_.size(); ++l) {
        CpuLayerState& ls = layers_[l];
        auto* snap_rows = reinterpret_cast<uint8_t*>(ls.snap_ring.data());
        for (int i = 0; i < window; ++i) {
            const int64_t pos = boundary - window + i;
            if (pos < 0) continue;  // never read: a query's window starts at position 0
            move(ring_row(static_cast<int>(l), slot, pos),
                 snap_rows + (static_cast<int64_t>(snapshot) * window + i) * row_bytes, row_bytes);
        }
        // The compressor records of [boundary - n, boundary) (CSA: n = ratio, the window the next entry overlaps).
        const int64_t n = ls.shape.snapshot_records;
        auto records = [&](std::vector<float>& pending, std::vector<float>& snap, const CompressorRing& ring) {
            const int64_t rec = ring.record_floats();
            for (int64_t j = 0; j < n; ++j) {
                const int64_t pos = boundary - n + j;
                move(pending.data() + (static_cast<int64_t>(slot) * ring.rows + pos % ring.rows) * rec,
                     snap.data() + (static_cast<int64_t>(snapshot) * n + j) * rec, rec * 4);
            }
        };
        records(ls.main_pending, ls.snap_main, ls.shape.main);
        records(ls.index_pending, ls.snap_index, ls.shape.index);
    }
}

void CpuBackend::save_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) {
    transfer_snapshot(slot, snapshot, boundary, true);
}

void CpuBackend::restore_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) {
    transfer_snapshot(slot, snapshot, boundary, false);
}

void CpuBackend::copy_slot(int32_t src, int32_t dst) {
    DSV4_CHECK(src >= 0 && src < state_.max_slots && dst >= 0 && dst < state_.max_slots,
               "copy_slot: slots {} -> {} outside [0, {})", src, dst, state_.max_slots);
    if (src == dst) return;
    for (CpuLayerState& ls : layers_) {
        for (std::vector<float>* v : {&ls.ring, &ls.main_pending, &ls.index_pending}) {
            if (v->empty()) continue;
            const size_t per_slot = v->size() / state_.max_slots;
            copy_rows(v->data() + per_slot * dst, v->data() + per_slot * src, static_cast<int64_t>(per_slot));
        }
    }
}

void CpuBackend::copy_block(int32_t src, int32_t dst) {
    DSV4_CHECK(src >= 0 && src < state_.num_blocks && dst >= 0 && dst < state_.num_blocks,
               "copy_block: blocks {} -> {} outside [0, {})", src, dst, state_.num_blocks);
    if (src == dst) return;
    for (CpuLayerState& ls : layers_) {
        for (std::vector<float>* v : {&ls.entries, &ls.index_keys}) {
            if (v->empty()) continue;
            const size_t per_block = v->size() / state_.num_blocks;
            copy_rows(v->data() + per_block * dst, v->data() + per_block * src, static_cast<int64_t>(per_block));
        }
    }
}

}  // namespace dsv4
