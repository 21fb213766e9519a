// The wide attention kernel (fast numerics, steps of 32 tokens or more: a block per token, or per token and key split,
// with all its heads; with one split its own sink merge and inverse RoPE; kernels_attention_wide.cu) against the
// 32-head split kernel and its merge (CudaOptions::mqa_wide off) on the same stored rows and queries, every (token,
// head) row compared on its own, and against the CPU's exact numerics; with key rows resolved 64 at a time (every
// chunk its own segment) it must give the same bits. The same for its wgmma form (CudaOptions::mqa_wgmma,
// kernels_attention_wgmma.cu). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <deque>
#include <numeric>
#include <random>

#include "op_test_support.h"

namespace dsv4::ops_test {
namespace {

constexpr int64_t kHd = 512;  // DeepSeek-V4's head dim (the wide kernel's largest)

// A CSA layer's picks on the host: for a token at position p, min(k, (p + 1) / 4) distinct entries below (p + 1) / 4
// in random order, the rest -1.
std::vector<int32_t> random_picks(const std::vector<int64_t>& positions, int k, std::mt19937& gen) {
    const auto n = static_cast<int64_t>(positions.size());
    std::vector<int32_t> picks(n * k, -1);
    for (int64_t t = 0; t < n; ++t) {
        std::vector<int32_t> entries((positions[t] + 1) / 4);
        std::iota(entries.begin(), entries.end(), 0);
        std::shuffle(entries.begin(), entries.end(), gen);
        const auto taken = std::min<int64_t>(static_cast<int64_t>(entries.size()), k);
        std::copy_n(entries.begin(), taken, picks.begin() + t * k);
    }
    return picks;
}

// Values whose bits differ (all of them when the sizes do).
int64_t differing_bits(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return static_cast<int64_t>(std::max(a.size(), b.size()));
    int64_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]);
    return n;
}

// Backends that differ only in mqa_wide and mqa_wgmma (and the CPU), fed the same steps.
struct WideRig {
    const ModelConfig c = op_config();
    const int heads;
    // CPU (exact), GPU split, GPU wide, GPU wide in 64-key segments, the same two on wgmma.
    static constexpr int kBackends = 6;
    static constexpr int kWide[2] = {2, 4};  // each wide kernel, its 64-key segments next
    std::unique_ptr<Backend> backends[kBackends];
    std::deque<std::vector<int64_t>> shapes;
    CompressorWeights csa[kBackends], hca[kBackends];
    VecRef sinks[kBackends];

    explicit WideRig(int n_heads) : heads(n_heads) {
        backends[0] = make_cpu_backend(Numerics::kExact, 0);
        for (int i = 1; i < kBackends; ++i) {
            CudaOptions o = cuda_options_from_env({});
            o.mqa_wide = i >= 2;
            o.mqa_wgmma = i >= 4;
            o.mqa_wide_segment = i == 3 || i == 5 ? 64 : 1024;
            backends[i] = make_cuda_backend(Numerics::kFast, o);
        }
        StateConfig s;
        s.max_slots = 2;
        s.num_blocks = 16;
        s.block_tokens = 256;
        s.rewind_capacity = 8;
        s.kv_dtype = StateDtype::kFp8;
        const auto ape_csa = random_floats(int64_t{4} * 2 * kHd, 0.5f), ape_hca = random_floats(128 * kHd, 0.5f);
        auto norm = random_floats(kHd, 0.1f);
        for (auto& v : norm) v += 1.0f;
        const auto sink_values = random_floats(heads, 2.0f);  // some sinks dominate their rows
        for (int i = 0; i < kBackends; ++i) {
            Backend& b = *backends[i];
            b.create_state(c, s);
            b.reset_slot(0);
            b.reset_slot(1);
            csa[i] = upload_compressor(b, 4, kHd, true, ape_csa, norm, shapes);
            hca[i] = upload_compressor(b, 128, kHd, false, ape_hca, norm, shapes);
            sinks[i] = upload_vec(b, sink_values, shapes.emplace_back());
        }
    }

    // One step: two sequences of lengths[0], lengths[1] tokens from their current positions; the compressors, then
    // every layer's attention (plain and unrotated) and its ring writes. Checks as it goes.
    void step(const int64_t (&lengths)[2], int64_t (&pos)[2], std::mt19937& gen) {
        StepBatch b;
        std::vector<int64_t> positions;
        for (int s = 0; s < 2; ++s) {
            std::vector<int32_t> table(8);
            std::iota(table.begin(), table.end(), s * 8);
            b.add_sequence(s, pos[s], std::vector<int32_t>(lengths[s], 7), table);
            for (int64_t i = 0; i < lengths[s]; ++i) positions.push_back(pos[s] + i);
            pos[s] += lengths[s];
        }
        for (auto& backend : backends) backend->begin_step(b);
        const int64_t n = b.n_tokens();
        const std::vector<float> inputs[3] = {random_floats(n * 2 * kHd), random_floats(n * 2 * kHd),
                                              random_floats(n * kHd)};
        for (int i = 0; i < kBackends; ++i) {
            Backend& be = *backends[i];
            auto t = [&](int which, int64_t width) { return make_tensor(be, {n, width}, inputs[which]); };
            be.compress(1, CompressorRole::kMain, t(0, 2 * kHd), t(1, 2 * kHd), csa[i], c.layers[1].rope, 1e-6f);
            be.compress(2, CompressorRole::kMain, t(2, kHd), t(2, kHd), hca[i], c.layers[2].rope, 1e-6f);
        }
        const std::vector<int32_t> picks = random_picks(positions, c.index_topk, gen);
        for (int layer = 0; layer < 3; ++layer) {
            const auto q = random_floats(n * heads * kHd), kv = random_floats(n * kHd);
            std::vector<float> out[kBackends], unrotated[kBackends];
            for (int i = 0; i < kBackends; ++i) {
                Backend& be = *backends[i];
                Tensor qt = make_tensor(be, {n, heads, kHd}, q), kt = make_tensor(be, {n, kHd}, kv);
                Tensor o = make_tensor(be, {n, heads, kHd}), u = make_tensor(be, {n, heads, kHd});
                Tensor topk = be.alloc(DType::kI32, {n, c.index_topk});
                be.from_host(topk, picks.data());
                const Tensor* tk = layer == 1 ? &topk : nullptr;
                be.attention(layer, c.layers[layer], qt, kt, sinks[i], tk, 0.0441942f, o);
                be.attention_unrotated(layer, c.layers[layer], qt, kt, sinks[i], tk, 0.0441942f, u);
                out[i] = read(be, o);
                unrotated[i] = read(be, u);
                be.store_window(layer, kt);
            }
            const std::string what =
                std::to_string(heads) + " heads, " + std::to_string(n) + " tokens, layer " + std::to_string(layer);
            for (const int w : kWide) {
                const std::string kernel = what + (w == 4 ? ", wgmma" : ", mma.sync");
                for (const auto* v : {&out[w], &unrotated[w]}) {
                    EXPECT_FALSE(std::any_of(v->begin(), v->end(), [](float x) { return std::isnan(x); })) << kernel;
                }
                // Every row: the same softmax up to the order of the float32 additions.
                int64_t worst_row = -1;
                double worst = 0.0;
                for (int64_t r = 0; r < n * heads; ++r) {
                    for (const auto* pair : {out, unrotated}) {
                        const std::vector<float> wide(pair[w].begin() + r * kHd, pair[w].begin() + (r + 1) * kHd);
                        const std::vector<float> split(pair[1].begin() + r * kHd, pair[1].begin() + (r + 1) * kHd);
                        const double d = rel_l2(wide, split);
                        if (!(d <= worst)) {
                            worst = d;
                            worst_row = r;
                        }
                    }
                }
                // mma.sync's scores have the split kernel's bits; wgmma sums each score's products in another order,
                // so a probability can round to the neighbouring bf16 value (2^-8 of its share of the row).
                const double row_tol = w == 4 ? 1e-4 : 1e-5;
                std::printf("[ wide ] %s: worst row %.3g\n", kernel.c_str(), worst);
                EXPECT_LE(worst, row_tol) << kernel << ": row " << worst_row << " (token " << worst_row / heads
                                          << ", head " << worst_row % heads << ")";
                EXPECT_LE(rel_l2(out[w], out[0]), kFastTol) << kernel << " against the CPU";
                EXPECT_EQ(differing_bits(out[w + 1], out[w]), 0) << kernel << ": 64-key segments";
                EXPECT_EQ(differing_bits(unrotated[w + 1], unrotated[w]), 0)
                    << kernel << ": 64-key segments, unrotated";
            }
        }
    }
};

// Two prefill-sized steps (440 and 330 tokens: one key split a token, the kernel's own merge): the second reads the
// first's ring rows and compressed entries; then batched-decode-sized steps (40 and 41 tokens: several key splits a
// token, partials and the merge kernel); CSA picks with -1 padding; 64 heads (Flash) and 40 (a partial warp row);
// sinks large enough to dominate some rows.
TEST(CudaAttentionWide, MatchesTheSplitKernelRowByRow) {
    DSV4_REQUIRE_GPU();
    std::mt19937 gen(20261205);
    for (int heads : {64, 40}) {
        WideRig rig(heads);
        int64_t pos[2] = {0, 0};
        rig.step({301, 139}, pos, gen);
        rig.step({290, 40}, pos, gen);
        rig.step({20, 20}, pos, gen);
        rig.step({1, 40}, pos, gen);
    }
}

}  // namespace
}  // namespace dsv4::ops_test
