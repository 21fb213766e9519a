// StateOp: a change to the backend's sequence state that the KV manager decides and the runner carries out, in
// order, between forward steps (backend.h: reset_slot, save_snapshot, restore_snapshot, copy_slot, copy_block; and
// the host / disk tiers' copies, kv_tiers.h, whose host entries, staged disk reads and demotion tickets the runner
// resolves through the KvTiers that emitted them).
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
        kOffloadBlock,     // a: device block, b: host block entry
        kLoadBlock,        // a: host block entry, b: device block
        kOffloadSnapshot,  // a: device snapshot, b: host snapshot entry
        kLoadSnapshot,     // a: host snapshot entry, b: device snapshot
        kDemote,           // a: demotion ticket (a host entry written to the disk tier before it is reused)
        kLoadStaged,       // a: staged disk read, b: device block or snapshot (the staged entry's kind)
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
    static StateOp tier(Kind kind, int32_t a, int32_t b = 0) { return {kind, a, b, 0}; }
    bool operator==(const StateOp&) const = default;
};

}  // namespace dsv4
