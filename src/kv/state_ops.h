// StateOp: a change to the backend's sequence state that the KV manager decides and the runner carries out, in
// order, between forward steps (backend.h: reset_slot, save_snapshot, restore_snapshot, copy_slot, copy_block).
// Keeping them as data keeps src/kv and src/sched free of backend calls (testable without a model).
#pragma once

#include <cstdint>

namespace dsv4 {

struct StateOp {
    enum class Kind : uint8_t {
        kResetSlot,        // a: slot
        kRestoreSnapshot,  // a: slot, b: snapshot, boundary
        kSaveSnapshot,     // a: slot, b: snapshot, boundary
        kCopySlot,         // a: source slot, b: destination slot
        kCopyBlock,        // a: source block, b: destination block
    };
    Kind kind = Kind::kResetSlot;
    int32_t a = 0;
    int32_t b = 0;
    int64_t boundary = 0;

    static StateOp reset_slot(int32_t slot) { return {Kind::kResetSlot, slot, 0, 0}; }
    static StateOp restore_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) {
        return {Kind::kRestoreSnapshot, slot, snapshot, boundary};
    }
    static StateOp save_snapshot(int32_t slot, int32_t snapshot, int64_t boundary) {
        return {Kind::kSaveSnapshot, slot, snapshot, boundary};
    }
    static StateOp copy_slot(int32_t src, int32_t dst) { return {Kind::kCopySlot, src, dst, 0}; }
    static StateOp copy_block(int32_t src, int32_t dst) { return {Kind::kCopyBlock, src, dst, 0}; }
    bool operator==(const StateOp&) const = default;
};

}  // namespace dsv4
