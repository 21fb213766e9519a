// StateLayout: the byte formulas against model-spec 5.4 (the full Flash model) and against what the CPU backend
// actually allocates (fixtures).
#include "state/state_layout.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace dsv4 {
namespace {

std::filesystem::path source(const std::string& rel) {
    return std::filesystem::path(DSV4_SOURCE_DIR) / rel;
}

TEST(StateLayout, FlashFp8MatchesTheSpecPerTokenBytes) {
    const ModelConfig c = load_model_config(source("tests/data/deepseek_v4_flash_config.json"));
    const StateLayout fp8 = compute_state_layout(c, 256, 0, StateDtype::kFp8);
    EXPECT_EQ(fp8.row_bytes, 584);
    EXPECT_EQ(fp8.indexer_key_bytes, 132);
    // model-spec 5.4: 21 * (584 + 132) / 4 + 20 * 584 / 128 = 3,850.25 B per token of context.
    EXPECT_DOUBLE_EQ(static_cast<double>(fp8.block_bytes) / 256.0, 21.0 * (584 + 132) / 4 + 20.0 * 584 / 128);
    const StateLayout bf16 = compute_state_layout(c, 256, 0, StateDtype::kBf16);
    EXPECT_DOUBLE_EQ(static_cast<double>(bf16.block_bytes) / 256.0, 6880.0);
    // Fixed state (no rewind): compressor records 21 x (64 + 16) KiB + 20 x 512 KiB = 11.64 MiB, plus the rings.
    const int64_t records = 21 * (64 + 16) * 1024 + 20 * 512 * 1024;
    EXPECT_EQ(bf16.slot_bytes, records + 43 * 128 * 1024);
    EXPECT_EQ(fp8.slot_bytes, records + 43 * 128 * 584);
    EXPECT_EQ(bf16.snapshot_bytes, 43 * 128 * 1024 + 21 * 4 * (2048 + 512) * 4);
}

// Bytes the CPU backend holds per slot / block / snapshot, read back from its state, for every storage dtype.
TEST(StateLayout, MatchesTheCpuBackendAllocation) {
    for (const char* name : {"flash_schedule", "odd_dims"}) {
        const ModelConfig c = load_model_config(source(std::string("tests/fixtures/") + name + "/config.json"));
        for (StateDtype dtype : {StateDtype::kF32, StateDtype::kBf16, StateDtype::kFp8}) {
            StateConfig s;
            s.max_slots = 3;
            s.num_blocks = 5;
            s.block_tokens = 128;
            s.rewind_capacity = 16;
            s.num_snapshots = 2;
            s.kv_dtype = dtype;
            CpuBackend cpu(Numerics::kExact, 1, fp8_sites(Fp8Dialect::kOcp));
            cpu.create_state(c, s);
            const StateBytes held = cpu.allocated_state_bytes();
            const StateLayout layout = compute_state_layout(c, 128, 16, dtype);
            const std::string what = std::string(name) + " " + std::string(state_dtype_name(dtype));
            EXPECT_EQ(layout.slot_bytes, held.slot) << what;
            EXPECT_EQ(layout.block_bytes, held.block) << what;
            EXPECT_EQ(layout.snapshot_bytes, held.snapshot) << what;
            if (dtype == StateDtype::kF32) {  // the hook against the raw vectors once
                int64_t slot = 0;
                for (int l = 0; l < c.num_layers; ++l) {
                    const CpuLayerState& ls = cpu.layer_state(l);
                    slot += static_cast<int64_t>(ls.ring.size() + ls.main_pending.size() + ls.index_pending.size());
                }
                EXPECT_EQ(held.slot, slot * 4 / 3) << what;
            }
        }
    }
}

TEST(StateLayout, Fp8RowsOfTheFixtures) {
    // flash_schedule: d 128 (64 rope), di 128; odd_dims: d 80 (16 rope), di 32.
    const ModelConfig flash = load_model_config(source("tests/fixtures/flash_schedule/config.json"));
    const ModelConfig odd = load_model_config(source("tests/fixtures/odd_dims/config.json"));
    EXPECT_EQ(compute_state_layout(flash, 256, 0, StateDtype::kFp8).row_bytes, 64 + 128 + 8);
    EXPECT_EQ(compute_state_layout(flash, 256, 0, StateDtype::kFp8).indexer_key_bytes, 132);
    EXPECT_EQ(compute_state_layout(odd, 256, 0, StateDtype::kFp8).row_bytes, 64 + 32 + 8);
    EXPECT_EQ(compute_state_layout(odd, 256, 0, StateDtype::kFp8).indexer_key_bytes, 36);
    EXPECT_EQ(compute_state_layout(odd, 256, 0, StateDtype::kBf16).row_bytes, 160);
}

TEST(StateLayout, Fp8RejectsNopeDimsOutsideBlocksOf64) {
    ModelConfig c = load_model_config(source("tests/fixtures/odd_dims/config.json"));
    c.head_dim = 96;  // 80 nope dims
    EXPECT_THROW(compute_state_layout(c, 256, 0, StateDtype::kFp8), Error);
    EXPECT_NO_THROW(compute_state_layout(c, 256, 0, StateDtype::kBf16));
    StateConfig s;
    s.num_blocks = 2;
    s.block_tokens = 128;
    s.kv_dtype = StateDtype::kBf16;
    CpuBackend cpu(Numerics::kExact, 1, fp8_sites(Fp8Dialect::kOcp));
    EXPECT_NO_THROW(cpu.create_state(c, s));
    s.kv_dtype = StateDtype::kFp8;
    try {
        cpu.create_state(c, s);
        ADD_FAILURE() << "fp8 state with 80 nope dims was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("blocks of 64"), std::string::npos) << e.what();
    }
}

TEST(StateLayout, LayerShapesFollowTheSpec) {
    const ModelConfig c = load_model_config(source("tests/fixtures/flash_schedule/config.json"));
    const int rewind = 16, block = 256;
    for (int l = 0; l < c.num_layers; ++l) {
        const LayerConfig& lc = c.layers[l];
        const LayerStateShape s = layer_state_shape(c, l, block, rewind);
        EXPECT_EQ(s.ring_rows, c.sliding_window + rewind);
        EXPECT_EQ(s.snapshot_ring_rows, c.sliding_window);
        EXPECT_EQ(s.ratio, lc.compress_ratio);
        if (lc.attention == AttentionType::kCsa) {
            EXPECT_EQ(s.main.rows, 2 * lc.compress_ratio + rewind);
            EXPECT_EQ(s.main.width, 2 * c.head_dim);
            EXPECT_EQ(s.index.rows, 2 * lc.compress_ratio + rewind);
            EXPECT_EQ(s.index.width, 2 * c.index_head_dim);
            EXPECT_EQ(s.snapshot_records, lc.compress_ratio);
            EXPECT_TRUE(s.has_index_keys());
        } else if (lc.attention == AttentionType::kHca) {
            EXPECT_EQ(s.main.rows, lc.compress_ratio + rewind);
            EXPECT_EQ(s.main.width, c.head_dim);
            EXPECT_EQ(s.index.rows, 0);
            EXPECT_EQ(s.snapshot_records, 0);
        } else {
            EXPECT_EQ(s.main.rows, 0);
            EXPECT_EQ(s.entries_per_block, 0);
        }
        if (lc.compress_ratio > 0) {
            EXPECT_EQ(s.entries_per_block, block / lc.compress_ratio);
        }
    }
    // A block size that is not a multiple of a compression ratio, and layers outside the model, are errors.
    EXPECT_THROW(layer_state_shape(c, 2, 130, rewind), Error);
    EXPECT_THROW(layer_state_shape(c, c.num_layers, block, rewind), Error);
    EXPECT_THROW(layer_state_shape(c, 0, block, -1), Error);
}

}  // namespace
}  // namespace dsv4
