// The StateStore tier role on the CPU backend (backend/state_store.h): a block's and a snapshot's state go to host
// bytes of exactly the planned size (state/state_layout.h) and come back bit for bit into another block or snapshot;
// a span of the wrong size is a clear error. (That a prefix restored this way gives the logits of a cold run is
// tests/unit/engine/kv_tiers_exact_test.cpp.)
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace dsv4 {
namespace {

// Fills every float of `v` with a distinct pattern (bit patterns, not values: rows of any dtype).
void fill(std::vector<float>& v, uint32_t seed) {
    for (size_t i = 0; i < v.size(); ++i) {
        const uint32_t bits = static_cast<uint32_t>(i * 2654435761u) ^ seed;
        std::memcpy(&v[i], &bits, 4);
    }
}

// The part of a per-id array that belongs to `id` of `count`.
std::vector<uint8_t> part(const std::vector<float>& v, int id, int count) {
    const size_t per = v.size() / static_cast<size_t>(count);
    const auto* bytes = reinterpret_cast<const uint8_t*>(v.data() + per * static_cast<size_t>(id));
    return {bytes, bytes + per * 4};
}

class TierCopies : public ::testing::TestWithParam<StateDtype> {};

TEST_P(TierCopies, BlocksAndSnapshotsRoundTripThroughHostBytes) {
    const ModelConfig c =
        load_model_config(std::filesystem::path(DSV4_SOURCE_DIR) / "tests/fixtures/flash_schedule/config.json");
    StateConfig s;
    s.max_slots = 1;
    s.num_blocks = 3;
    s.block_tokens = 128;
    s.num_snapshots = 2;
    s.kv_dtype = GetParam();
    CpuBackend b(Numerics::kExact, 1, fp8_sites(Fp8Dialect::kOcp));
    b.create_state(c, s);
    for (int l = 0; l < c.num_layers; ++l) {
        CpuLayerState& ls = b.layer_state(l);
        for (auto* v : {&ls.entries, &ls.index_keys, &ls.snap_ring, &ls.snap_main, &ls.snap_index}) fill(*v, l * 7 + 1);
    }
    const StateLayout layout = compute_state_layout(c, 128, s.rewind_capacity, s.kv_dtype);
    std::vector<std::byte> block(static_cast<size_t>(layout.block_bytes));
    std::vector<std::byte> snapshot(static_cast<size_t>(layout.snapshot_bytes));
    b.offload_block(1, block);
    b.load_block(block, 2);
    b.offload_snapshot(0, snapshot);
    b.load_snapshot(snapshot, 1);
    for (int l = 0; l < c.num_layers; ++l) {
        const CpuLayerState& ls = b.layer_state(l);
        EXPECT_EQ(part(ls.entries, 2, 3), part(ls.entries, 1, 3)) << "layer " << l;
        if (!ls.index_keys.empty()) {
            EXPECT_EQ(part(ls.index_keys, 2, 3), part(ls.index_keys, 1, 3)) << l;
        }
        EXPECT_EQ(part(ls.snap_ring, 1, 2), part(ls.snap_ring, 0, 2)) << "layer " << l;
        if (!ls.snap_main.empty()) {
            EXPECT_EQ(part(ls.snap_main, 1, 2), part(ls.snap_main, 0, 2)) << l;
            EXPECT_EQ(part(ls.snap_index, 1, 2), part(ls.snap_index, 0, 2)) << l;
        }
        if (!ls.entries.empty()) {
            EXPECT_NE(part(ls.entries, 0, 3), part(ls.entries, 1, 3)) << "the pattern differs between blocks";
        }
    }
    std::vector<std::byte> short_block(block.size() - 4);
    EXPECT_THROW(b.offload_block(0, short_block), Error);
    EXPECT_THROW(b.load_block(block, 3), Error);
    EXPECT_THROW(b.load_snapshot(snapshot, 2), Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TierCopies, ::testing::Values(StateDtype::kF32, StateDtype::kFp8));

}  // namespace
}  // namespace dsv4
