// The tier role on the CPU (backend/state_store.h): a block's or a snapshot's state copied between the backend's
// state storage and host bytes in the layout every backend shares. Both sides are host memory here, but the host
// pool is its own allocation and every byte goes through these copies, so the tiers' logic runs in CI exactly as on
// a GPU (only without the copy stream).
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace dsv4 {
namespace {

// Walks host bytes piece by piece, copying each piece to or from the backend's storage.
class ByteCursor {
  public:
    ByteCursor(std::span<std::byte> host, bool to_host) : host_(host), to_host_(to_host) {}
    void piece(void* storage, int64_t bytes) {
        DSV4_CHECK(offset_ + bytes <= static_cast<int64_t>(host_.size()), "tier copy: {} host bytes are too few",
                   host_.size());
        std::byte* at = host_.data() + offset_;
        if (to_host_) {
            std::memcpy(at, storage, static_cast<size_t>(bytes));
        } else {
            std::memcpy(storage, at, static_cast<size_t>(bytes));
        }
        offset_ += bytes;
    }
    void finish(const char* what) const {
        DSV4_CHECK(offset_ == static_cast<int64_t>(host_.size()), "tier copy: a {} has {} bytes, {} were given", what,
                   offset_, host_.size());
    }

  private:
    std::span<std::byte> host_;
    bool to_host_;
    int64_t offset_ = 0;
};

}  // namespace

void CpuBackend::transfer_block(int32_t block, std::span<std::byte> host, bool to_host) {
    DSV4_CHECK(block >= 0 && block < state_.num_blocks, "tier copy: block {} is outside [0, {})", block,
               state_.num_blocks);
    ByteCursor cursor(host, to_host);
    for (CpuLayerState& ls : layers_) {
        const int64_t per_block = ls.shape.entries_per_block;
        if (per_block == 0) continue;
        const int64_t rows = kv_format_.bytes() * per_block, keys = key_format_.bytes() * per_block;
        cursor.piece(reinterpret_cast<uint8_t*>(ls.entries.data()) + block * rows, rows);
        if (ls.shape.has_index_keys())
            cursor.piece(reinterpret_cast<uint8_t*>(ls.index_keys.data()) + block * keys, keys);
    }
    cursor.finish("block");
}

void CpuBackend::transfer_snapshot_bytes(int32_t snapshot, std::span<std::byte> host, bool to_host) {
    DSV4_CHECK(snapshot >= 0 && snapshot < state_.num_snapshots, "tier copy: snapshot {} is outside [0, {})", snapshot,
               state_.num_snapshots);
    ByteCursor cursor(host, to_host);
    const int64_t window_bytes = int64_t{model_.sliding_window} * kv_format_.bytes();
    for (CpuLayerState& ls : layers_) {
        cursor.piece(reinterpret_cast<uint8_t*>(ls.snap_ring.data()) + snapshot * window_bytes, window_bytes);
        const int64_t n = ls.shape.snapshot_records;
        if (n == 0) continue;
        cursor.piece(ls.snap_main.data() + snapshot * n * ls.shape.main.record_floats(),
                     n * ls.shape.main.record_floats() * 4);
        cursor.piece(ls.snap_index.data() + snapshot * n * ls.shape.index.record_floats(),
                     n * ls.shape.index.record_floats() * 4);
    }
    cursor.finish("snapshot");
}

void CpuBackend::offload_block(int32_t block, std::span<std::byte> host) {
    transfer_block(block, host, true);
}

void CpuBackend::load_block(std::span<const std::byte> host, int32_t block) {
    // ByteCursor writes only in the to-host direction; loading reads `host`.
    transfer_block(block, {const_cast<std::byte*>(host.data()), host.size()}, false);
}

void CpuBackend::offload_snapshot(int32_t snapshot, std::span<std::byte> host) {
    transfer_snapshot_bytes(snapshot, host, true);
}

void CpuBackend::load_snapshot(std::span<const std::byte> host, int32_t snapshot) {
    transfer_snapshot_bytes(snapshot, {const_cast<std::byte*>(host.data()), host.size()}, false);
}

}  // namespace dsv4
