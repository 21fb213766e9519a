// The CUDA backend's fused ops against the op sequences they replace (ModelOps' default implementations), on the GPU
// and on the CPU reference, on fresh random inputs: hc_post_pre (one launch per mHC site boundary in fast numerics),
// norm_rope and add_to_streams. Outputs are poisoned with NaN first; NaN never passes. Skipped without a GPU.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "op_test_support.h"

namespace dsv4::ops_test {
namespace {

struct MhcHost {
    std::vector<float> fn, base, scale, norm;
};

MhcHost random_mhc(int64_t hc, int64_t d) {
    const int64_t mixes = (2 + hc) * hc;
    MhcHost m;
    m.fn = random_floats(mixes * hc * d, 2.0f / std::sqrt(static_cast<float>(hc * d)));
    m.base = random_floats(mixes, 0.5f);
    m.scale = {1.3f, 0.7f, 1.9f};
    m.norm = random_floats(d, 0.2f);
    for (auto& v : m.norm) v += 1.0f;
    return m;
}

// One backend's copy of the mHC weights and the tensors of a site boundary.
struct BoundarySide {
    std::vector<int64_t> shapes[4];
    MhcWeights w;
    VecRef norm;
    Tensor x, y, prev_post, prev_comb, u, post, comb;

    BoundarySide(Backend& b, const MhcHost& m, int64_t n, int64_t hc, int64_t d, const std::vector<float>& x0,
                 const std::vector<float>& y0, const std::vector<float>& post0, const std::vector<float>& comb0) {
        w = {upload_vec(b, m.fn, shapes[0]), upload_vec(b, m.base, shapes[1]), upload_vec(b, m.scale, shapes[2])};
        norm = upload_vec(b, m.norm, shapes[3]);
        x = make_tensor(b, {n, hc, d}, x0);
        y = make_tensor(b, {n, d}, y0);
        prev_post = make_tensor(b, {n, hc}, post0);
        prev_comb = make_tensor(b, {n, hc, hc}, comb0);
        u = make_tensor(b, {n, d});
        post = make_tensor(b, {n, hc});
        comb = make_tensor(b, {n, hc, hc});
    }
    // The boundary through `ops` (the backend's own hc_post_pre, or ModelOps' unfused default).
    void run(ModelOps& ops, bool with_prev, bool fused) {
        const HcPostInputs prev{y, prev_post, prev_comb};
        const HcPostInputs* p = with_prev ? &prev : nullptr;
        if (fused) {
            ops.hc_post_pre(x, p, w, norm, 20, 1e-6f, 1e-6f, u, post, comb);
        } else {
            ops.ModelOps::hc_post_pre(x, p, w, norm, 20, 1e-6f, 1e-6f, u, post, comb);
        }
    }
};

struct BoundaryCase {
    int64_t n, hc, d;
};

// Random streams x [n, hc, d], previous sub-layer output y [n, d], post [n, hc] (around 1) and comb [n, hc, hc].
struct BoundaryInputs {
    std::vector<float> x, y, post, comb;
};
BoundaryInputs random_boundary_inputs(int64_t n, int64_t hc, int64_t d) {
    BoundaryInputs in{random_floats(n * hc * d, 2.0f), random_floats(n * d), random_floats(n * hc, 0.5f),
                      random_floats(n * hc * hc, 0.3f)};
    for (auto& v : in.post) v += 1.0f;
    return in;
}

class CudaHcPostPre : public ::testing::TestWithParam<BoundaryCase> {};

// Fast numerics: the fused kernel against the GPU's unfused ops (same float arithmetic, other summation orders) and
// against the CPU; twice in a row, so the per-token arrival counters must have been left at zero.
TEST_P(CudaHcPostPre, FusedMatchesTheUnfusedOpsAndTheCpu) {
    DSV4_REQUIRE_GPU();
    const auto [n, hc, d] = GetParam();
    Pair p(Numerics::kFast);
    p.step(simple_batch(n));
    const MhcHost m = random_mhc(hc, d);
    const BoundaryInputs in = random_boundary_inputs(n, hc, d);
    const auto& [x0, y0, post0, comb0] = in;
    for (bool with_prev : {false, true}) {
        BoundarySide fused(*p.gpu, m, n, hc, d, x0, y0, post0, comb0),
            unfused(*p.gpu, m, n, hc, d, x0, y0, post0, comb0), cpu(*p.cpu, m, n, hc, d, x0, y0, post0, comb0);
        unfused.run(*p.gpu, with_prev, false);
        cpu.run(*p.cpu, with_prev, false);
        for (int repeat = 0; repeat < 2; ++repeat) {
            if (repeat == 1) p.gpu->from_host(fused.x, x0.data());
            fused.run(*p.gpu, with_prev, true);
            const std::string what = "n " + std::to_string(n) + " hc " + std::to_string(hc) + " d " +
                                     std::to_string(d) + (with_prev ? " with" : " without") + " a previous site, run " +
                                     std::to_string(repeat);
            for (auto [got, gpu_ops, cpu_ops] :
                 {std::tuple{fused.x, unfused.x, cpu.x}, std::tuple{fused.u, unfused.u, cpu.u},
                  std::tuple{fused.post, unfused.post, cpu.post}, std::tuple{fused.comb, unfused.comb, cpu.comb}}) {
                const std::vector<float> g = read(*p.gpu, got);
                EXPECT_LE(rel_l2(g, read(*p.gpu, gpu_ops)), 1e-5) << what;
                EXPECT_LE(rel_l2(g, read(*p.cpu, cpu_ops)), 1e-5) << what;
            }
        }
    }
}

const BoundaryCase kBoundaryCases[] = {
    {1, 4, 4096},    {5, 4, 4096}, {64, 4, 4096},  // DeepSeek-V4-Flash: decode and batched decode
    {1203, 4, 4096},                               // and prefill (token tiles, the last one partial)
    {3, 4, 200},     {2, 3, 130},  {1, 8, 300},   {4, 1, 257}, {7, 2, 64},
};
INSTANTIATE_TEST_SUITE_P(Shapes, CudaHcPostPre, ::testing::ValuesIn(kBoundaryCases));

// A token's boundary does not depend on its batch: kBig tokens, and their first three and their last three alone
// (every block collapses its own channels), give the same bits.
void boundary_bits_alone_and_batched(int64_t kBig) {
    constexpr int64_t kHc = 4, kD = 4096, kSmall = 3;
    Pair p(Numerics::kFast);
    p.step(simple_batch(kBig));
    const MhcHost m = random_mhc(kHc, kD);
    const BoundaryInputs in = random_boundary_inputs(kBig, kHc, kD);
    const auto& [x0, y0, post0, comb0] = in;
    BoundarySide big(*p.gpu, m, kBig, kHc, kD, x0, y0, post0, comb0);
    big.run(*p.gpu, true, true);
    for (int64_t first : {int64_t{0}, kBig - kSmall}) {
        // Tokens [first, first + kSmall) of a [kBig, ...] vector of `per_token` values each.
        auto part = [&](const std::vector<float>& v, int64_t per_token) {
            return std::vector<float>(v.begin() + first * per_token, v.begin() + (first + kSmall) * per_token);
        };
        BoundarySide small(*p.gpu, m, kSmall, kHc, kD, part(x0, kHc * kD), part(y0, kD), part(post0, kHc),
                           part(comb0, kHc * kHc));
        small.run(*p.gpu, true, true);
        const std::tuple<Tensor, Tensor, int64_t> outputs[] = {{big.x, small.x, kHc * kD},
                                                               {big.u, small.u, kD},
                                                               {big.post, small.post, kHc},
                                                               {big.comb, small.comb, kHc * kHc}};
        for (const auto& [whole, alone, per_token] : outputs) {
            EXPECT_EQ(read(*p.gpu, alone), part(read(*p.gpu, whole), per_token))
                << kBig << " tokens, from token " << first;
        }
    }
}

// 64 tokens: more blocks than fit on the device at once, the last block of each token collapses it.
TEST(CudaHcPostPre, BitsDoNotDependOnTheBatch) {
    DSV4_REQUIRE_GPU();
    boundary_bits_alone_and_batched(64);
}

// Prefill sizes: a block per tile of 8 tokens (the last tile partial), the same bits as each token alone.
TEST(CudaHcPostPre, TokenTilesGiveTheBitsOfTokensAlone) {
    DSV4_REQUIRE_GPU();
    boundary_bits_alone_and_batched(2001);
}

// A step of one token a sequence at these positions on both backends; returns the token count.
int64_t step_at(Pair& p, std::vector<int32_t> positions) {
    const auto n = static_cast<int64_t>(positions.size());
    StepBatch b = simple_batch(n);
    b.positions = std::move(positions);
    p.step(b);
    return n;
}

// norm_rope (a warp a row) is rms_norm (a block a row) then rope in one launch with the same arithmetic: the same
// bits in every numerics mode.
TEST(CudaFusedOps, NormRopeEqualsNormThenRope) {
    DSV4_REQUIRE_GPU();
    for (Numerics numerics : {Numerics::kExact, Numerics::kReference, Numerics::kFast}) {
        Pair p(numerics);
        const int64_t n = step_at(p, {1048000, 5, 130000, 77});
        const ModelConfig c = op_config();
        for (int64_t heads : {int64_t{1}, int64_t{3}, int64_t{8}}) {  // 3: rows past a block of 8 (a warp a row)
            for (bool weighted : {false, true}) {
                std::vector<int64_t> shape;
                auto wv = random_floats(512, 0.2f);
                for (auto& v : wv) v += 1.0f;
                const VecRef wg = upload_vec(*p.gpu, wv, shape), wc = upload_vec(*p.cpu, wv, shape);
                const auto x = random_floats(n * heads * 512, 3.0f);
                Tensor fused = make_tensor(*p.gpu, {n, heads, 512}, x), ops = make_tensor(*p.gpu, {n, heads, 512}, x),
                       cpu = make_tensor(*p.cpu, {n, heads, 512}, x);
                p.gpu->norm_rope(fused, weighted ? &wg : nullptr, 1e-6f, c.layers[1].rope);
                p.gpu->rms_norm(ops, weighted ? &wg : nullptr, 1e-6f, ops);
                p.gpu->rope(ops, c.layers[1].rope, false);
                p.cpu->norm_rope(cpu, weighted ? &wc : nullptr, 1e-6f, c.layers[1].rope);
                const std::vector<float> got = read(*p.gpu, fused);
                EXPECT_EQ(got, read(*p.gpu, ops)) << numerics_name(numerics) << " heads " << heads;
                EXPECT_LE(rel_l2(got, read(*p.cpu, cpu)), numerics == Numerics::kReference ? kReferenceTol : kExactTol)
                    << numerics_name(numerics) << " heads " << heads;
            }
        }
    }
}

// norm_ropes: a norm-only target (q_norm's shape) and a norm + rope target (the K=V head's) in one launch give the
// bits of rms_norm and norm_rope run apart, in every numerics mode.
TEST(CudaFusedOps, NormRopesEqualTheOpsApart) {
    DSV4_REQUIRE_GPU();
    for (Numerics numerics : {Numerics::kExact, Numerics::kReference, Numerics::kFast}) {
        Pair p(numerics);
        const int64_t n = step_at(p, {70000, 9, 4100});
        const ModelConfig c = op_config();
        std::vector<int64_t> shape;
        auto w1 = random_floats(1024, 0.2f), w2 = random_floats(512, 0.2f);
        const VecRef q_norm = upload_vec(*p.gpu, w1, shape), kv_norm = upload_vec(*p.gpu, w2, shape);
        const auto q = random_floats(n * 1024, 3.0f), kv = random_floats(n * 512, 3.0f);
        Tensor q_fused = make_tensor(*p.gpu, {n, 1, 1024}, q), kv_fused = make_tensor(*p.gpu, {n, 1, 512}, kv);
        Tensor q_apart = make_tensor(*p.gpu, {n, 1, 1024}, q), kv_apart = make_tensor(*p.gpu, {n, 1, 512}, kv);
        const NormRopeTarget targets[] = {{q_fused, &q_norm, nullptr}, {kv_fused, &kv_norm, &c.layers[1].rope}};
        p.gpu->norm_ropes(targets, 1e-6f);
        p.gpu->rms_norm(q_apart, &q_norm, 1e-6f, q_apart);
        p.gpu->norm_rope(kv_apart, &kv_norm, 1e-6f, c.layers[1].rope);
        const std::vector<float> qf = read(*p.gpu, q_fused), kf = read(*p.gpu, kv_fused);
        for (float v : qf) ASSERT_TRUE(std::isfinite(v)) << numerics_name(numerics);
        EXPECT_EQ(qf, read(*p.gpu, q_apart)) << numerics_name(numerics) << " norm alone";
        EXPECT_EQ(kf, read(*p.gpu, kv_apart)) << numerics_name(numerics) << " norm + rope";
    }
}

// add_to_streams (the MTP drafter's Z_j += e, one recordable launch) gives hc_post's bits at post = 1 and comb =
// identity (ModelOps' default), in fast and in reference numerics (bf16-rounded stores), on the GPU and the CPU.
TEST(CudaFusedOps, AddToStreamsIsHcPostWithIdentity) {
    DSV4_REQUIRE_GPU();
    for (Numerics numerics : {Numerics::kFast, Numerics::kReference}) {
        for (auto [n, hc, d] : {std::tuple<int64_t, int64_t, int64_t>{1, 4, 4096}, {7, 4, 4096}, {3, 2, 130}}) {
            Pair p(numerics);
            p.step(simple_batch(n));
            const std::vector<float> x0 = random_floats(n * hc * d, 2.0f), y0 = random_floats(n * d);
            Tensor direct = make_tensor(*p.gpu, {n, hc, d}, x0), via_post = make_tensor(*p.gpu, {n, hc, d}, x0);
            Tensor cpu_x = make_tensor(*p.cpu, {n, hc, d}, x0);
            const Tensor y = make_tensor(*p.gpu, {n, d}, y0), cpu_y = make_tensor(*p.cpu, {n, d}, y0);
            p.gpu->add_to_streams(direct, y);
            p.gpu->ModelOps::add_to_streams(via_post, y);
            p.cpu->add_to_streams(cpu_x, cpu_y);
            const std::vector<float> got = read(*p.gpu, direct), want = read(*p.gpu, via_post);
            const std::string what = std::string(numerics == Numerics::kFast ? "fast" : "reference") + " n " +
                                     std::to_string(n) + " hc " + std::to_string(hc) + " d " + std::to_string(d);
            ASSERT_EQ(got.size(), want.size());
            for (size_t i = 0; i < got.size(); ++i) {
                ASSERT_FALSE(std::isnan(got[i])) << what << " element " << i;
                ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
                    << what << " element " << i;
            }
            EXPECT_LE(rel_l2(got, read(*p.cpu, cpu_x)), tolerance(numerics)) << what;
        }
    }
}

}  // namespace
}  // namespace dsv4::ops_test
