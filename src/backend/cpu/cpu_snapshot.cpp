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

// Floats of one compressor record (kv | gate + ape) of an overlapping (CSA) compressor with head dim `dim`.
int64_t csa_record_floats(int dim) {
    return 2 * 2 * static_cast<int64_t>(dim);
}

void copy_rows(float* dst, const float* src, int64_t floats) {
    std::memcpy(dst, src, floats * sizeof(float));
}

}  // namespace

void CpuBackend::create_snapshot_state() {
    const int64_t snaps = state_.num_snapshots;
    for (CpuLayerState& ls : layers_) {
        // Ring rows in the storage dtype (a multiple of 4 bytes each); never read before a save writes them.
        ls.snap_ring.assign(static_cast<size_t>(snaps * model_.sliding_window * kv_format_.bytes() / 4), kPoison);
        if (ls.type != AttentionType::kCsa) continue;
        ls.snap_main.assign(static_cast<size_t>(snaps * ls.ratio * csa_record_floats(model_.head_dim)), kPoison);
        ls.snap_index.assign(static_cast<size_t>(snaps * ls.ratio * csa_record_floats(model_.index_head_dim)), kPoison);
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
        if (ls.type != AttentionType::kCsa) continue;
        // CSA pending rings hold 2 * ratio + rewind_capacity records per slot (CpuBackend::pending_rows).
        const int64_t rows = 2 * ls.ratio + state_.rewind_capacity;
        auto records = [&](std::vector<float>& pending, std::vector<float>& snap, int dim) {
            const int64_t rec = csa_record_floats(dim);
            for (int j = 0; j < ls.ratio; ++j) {
                const int64_t pos = boundary - ls.ratio + j;
                move(pending.data() + (static_cast<int64_t>(slot) * rows + pos % rows) * rec,
                     snap.data() + (static_cast<int64_t>(snapshot) * ls.ratio + j) * rec, rec * 4);
            }
        };
        records(ls.main_pending, ls.snap_main, model_.head_dim);
        records(ls.index_pending, ls.snap_index, model_.index_head_dim);
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
