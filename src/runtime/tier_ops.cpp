// The host / disk tiers' state ops (kv/kv_tiers.h) carried out on a backend: offloads and loads between device
// blocks / snapshots and the host pool's entries, loads of disk entries that were read and checked for a hit, and
// demotions of host entries to disk (after the copies into them have landed).
#include "core/error.h"
#include "runtime/model_runner.h"

namespace dsv4 {

void apply_tier_op(Backend& backend, const StateOp& op, KvTiers* tiers) {
    DSV4_CHECK(tiers != nullptr, "state op {} needs the KV tiers, and none are attached", static_cast<int>(op.kind));
    switch (op.kind) {
        case StateOp::Kind::kOffloadBlock:
            backend.offload_block(op.a, tiers->host_entry(KvEntryKind::kBlock, op.b));
            break;
        case StateOp::Kind::kLoadBlock:
            backend.load_block(tiers->host_entry(KvEntryKind::kBlock, op.a), op.b);
            break;
        case StateOp::Kind::kOffloadSnapshot:
            backend.offload_snapshot(op.a, tiers->host_entry(KvEntryKind::kSnapshot, op.b));
            break;
        case StateOp::Kind::kLoadSnapshot:
            backend.load_snapshot(tiers->host_entry(KvEntryKind::kSnapshot, op.a), op.b);
            break;
        case StateOp::Kind::kDemote:
            backend.wait_tier_copies();  // the entry's bytes may still be arriving from the device
            tiers->demote(op.a);
            break;
        case StateOp::Kind::kLoadStaged: {
            const StagedEntry& staged = tiers->staged(op.a);
            if (staged.kind == KvEntryKind::kBlock) {
                backend.load_block(staged.bytes, op.b);
            } else {
                backend.load_snapshot(staged.bytes, op.b);
            }
            break;
        }
        default:
            fail("state op {} is not a tier op", static_cast<int>(op.kind));
    }
}

}  // namespace dsv4
