// The StateStore tier role on the GPU (backend/cuda/cuda_tiers.cpp): a prefix's state, computed on the GPU, offloaded
// to pinned host bytes and loaded into other blocks and another snapshot, lets a new sequence continue with the
// logits of the sequence that computed it (bit for bit: the same kernels read the same bytes), and the bytes have the
// layout the CPU backend writes (what the CPU loads from them continues the same way, within the CPU-vs-GPU bound).
// Skipped without a GPU; not yet run on one (docs/gpu-validation.md).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "../../ops/cuda/require_gpu.h"
#include "backend/cuda/cuda_factory.h"
#include "golden_support.h"
#include "state/state_layout.h"

namespace dsv4::golden {
namespace {

constexpr int kBlock = 256;

StateConfig tier_state() {
    StateConfig s = test_state(2);
    s.num_snapshots = 2;
    return s;
}

// Feeds tokens [start, end) of slot `slot` (block table `table`) and returns the last position's logits.
std::vector<float> feed(DeepseekV4& model, int32_t slot, const std::vector<int32_t>& tokens, int64_t start, int64_t end,
                        const std::vector<int32_t>& table) {
    StepBatch b;
    b.add_sequence(slot, start, std::span(tokens).subspan(start, end - start), table);
    b.logit_rows.push_back(static_cast<int32_t>(end - start - 1));
    return model.logits(b);
}

TEST(CudaTiers, OffloadedPrefixResumesBitForBit) {
    DSV4_REQUIRE_GPU();
    auto backend = make_cuda_backend(Numerics::kExact);
    auto loaded = load_model(fixture_dir("flash_schedule"), *backend, tier_state());
    DeepseekV4& model = *loaded->model;
    const auto tokens = read_npy_i32((fixture_dir("flash_schedule") / "tokens.npy").string()).values;
    ASSERT_GE(tokens.size(), static_cast<size_t>(kBlock + 8));
    // Slot 0 computes [0, 256) in blocks {0}, saves the boundary snapshot, and continues to 264.
    backend->reset_slot(0);
    feed(model, 0, tokens, 0, kBlock, {0, 1});
    backend->save_snapshot(0, 0, kBlock);
    const std::vector<float> want = feed(model, 0, tokens, kBlock, kBlock + 8, {0, 1});
    // Its block and snapshot go to pinned host memory and come back as block 4 and snapshot 1.
    const StateLayout layout = compute_state_layout(model.config(), kBlock, 16, StateDtype::kF32);
    HostBuffer host = backend->allocate_host_buffer(layout.block_bytes + layout.snapshot_bytes);
    const auto block_bytes = host.span().subspan(0, static_cast<size_t>(layout.block_bytes));
    const auto snapshot_bytes = host.span().subspan(static_cast<size_t>(layout.block_bytes));
    backend->offload_block(0, block_bytes);
    backend->offload_snapshot(0, snapshot_bytes);
    backend->wait_tier_copies();
    backend->load_block(block_bytes, 4);
    backend->load_snapshot(snapshot_bytes, 1);
    backend->reset_slot(1);
    backend->restore_snapshot(1, 1, kBlock);
    const std::vector<float> got = feed(model, 1, tokens, kBlock, kBlock + 8, {4, 5});
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "GPU round trip";

    // The CPU backend, given the same bytes, continues the same sequence (the layout is shared).
    auto cpu = make_cpu_backend(Numerics::kExact, 0);
    auto cpu_loaded = load_model(fixture_dir("flash_schedule"), *cpu, tier_state());
    std::vector<std::byte> copy(host.span().begin(), host.span().end());
    cpu->load_block(std::span(copy).subspan(0, static_cast<size_t>(layout.block_bytes)), 0);
    cpu->load_snapshot(std::span(copy).subspan(static_cast<size_t>(layout.block_bytes)), 0);
    cpu->reset_slot(0);
    cpu->restore_snapshot(0, 0, kBlock);
    const std::vector<float> on_cpu = feed(*cpu_loaded->model, 0, tokens, kBlock, kBlock + 8, {0, 1});
    EXPECT_LT(relative_max_error(on_cpu, want), 1e-4);
}

}  // namespace
}  // namespace dsv4::golden
