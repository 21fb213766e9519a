// Every CUDA op against the CPU backend on fresh random inputs, at small odd shapes and at the real
// DeepSeek-V4-Flash shapes. Outputs are poisoned with NaN before each op; NaN never passes. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <numeric>
#include <set>

#include "backend/cuda/linear_plan.h"
#include "op_test_support.h"

namespace dsv4::ops_test {
namespace {

// Fast numerics run FP8 weights on FP8 tensor cores once the chooser says so: activations rounded to bf16 and
// quantized per 128 to e4m3 (reference numerics' rounding). The CPU then computes on inputs rounded the same way.
bool fast_fp8_path(Numerics numerics, const WeightRef& w, int64_t m, int64_t k, bool grouped = false) {
    if (numerics != Numerics::kFast) return false;
    cuda::LinearProblem p{numerics, w, m, k, grouped};
    const cuda::LinearPath path = cuda::choose_linear_path(p, cuda::LinearTuning::from(cuda_options_from_env({})), "");
    return path == cuda::LinearPath::kFp8Lt || path == cuda::LinearPath::kFp8Wgmma ||
           path == cuda::LinearPath::kFp8Gemv;
}

std::vector<float> fp8_rounded(std::vector<float> x, int64_t k) {
    for (auto& v : x) v = round_to_bf16(v);
    for (size_t r = 0; r < x.size() / k; ++r) act_quant_fp8_sim(x.data() + r * k, k, 128, kOcpQuant);
    return x;
}

struct LinearCase {
    WeightFormat format;
    int64_t rows, cols, m;
};

class CudaLinear : public ::testing::TestWithParam<std::tuple<LinearCase, Numerics>> {};

TEST_P(CudaLinear, MatchesCpu) {
    DSV4_REQUIRE_GPU();
    const auto [lc, numerics] = GetParam();
    Pair p(numerics);
    p.step(simple_batch(lc.m));
    HostWeight w = make_weight(lc.format, lc.rows, lc.cols);
    WeightRef wc = upload(*p.cpu, w), wg = upload(*p.gpu, w);
    auto x = random_floats(lc.m * lc.cols);
    const bool fp8 = fast_fp8_path(numerics, wg, lc.m, lc.cols);
    const std::vector<float> x_cpu = fp8 ? fp8_rounded(x, lc.cols) : x;
    for (LinearKind kind : {LinearKind::kQuantized, LinearKind::kBf16Out, LinearKind::kF32Out}) {
        Tensor xc = make_tensor(*p.cpu, {lc.m, lc.cols}, x_cpu), yc = make_tensor(*p.cpu, {lc.m, lc.rows});
        Tensor xg = make_tensor(*p.gpu, {lc.m, lc.cols}, x), yg = make_tensor(*p.gpu, {lc.m, lc.rows});
        p.cpu->linear(xc, wc, kind, yc);
        p.gpu->linear(xg, wg, kind, yg);
        const double err = rel_l2(read(*p.gpu, yg), read(*p.cpu, yc));
        EXPECT_LE(err, fp8 ? 1e-3 : tolerance(numerics))
            << "kind " << static_cast<int>(kind) << " rows " << lc.rows << " cols " << lc.cols << " m " << lc.m;
    }
}

const LinearCase kLinearCases[] = {
    {WeightFormat::kFp8Block, 200, 96, 5},
    {WeightFormat::kFp4Row, 96, 160, 9},
    {WeightFormat::kBF16, 130, 70, 3},
    {WeightFormat::kF32, 33, 65, 17},
    {WeightFormat::kFp8Block, 1024, 4096, 3},    // wq_a
    {WeightFormat::kFp8Block, 32768, 1024, 1},   // wq_b
    {WeightFormat::kFp8Block, 4096, 8192, 2},    // wo_b
    {WeightFormat::kFp4Row, 2048, 4096, 2},      // expert w1
    {WeightFormat::kBF16, 1024, 4096, 4},        // CSA compressor wkv
    {WeightFormat::kFp8Block, 1024, 4096, 300},  // prefill-sized: tensor cores in fast numerics
    {WeightFormat::kFp4Row, 2048, 4096, 64},
    {WeightFormat::kBF16, 200, 96, 17},
    {WeightFormat::kFp8Block, 130, 256, 33},
    {WeightFormat::kBF16, 160, 4096, 64},  // the router's gate at batch 64: two blocks, K split 16 ways in fast
    {WeightFormat::kF32, 96, 1216, 40},    // a K split whose last split is shorter
};

INSTANTIATE_TEST_SUITE_P(Shapes, CudaLinear,
                         ::testing::Combine(::testing::ValuesIn(kLinearCases),
                                            ::testing::Values(Numerics::kExact, Numerics::kReference,
                                                              Numerics::kFast)));

TEST(CudaOps, GroupedLinearFlashShape) {
    DSV4_REQUIRE_GPU();
    // 3 tokens: per-group GEMVs; 40 tokens in fast numerics: per-group tensor-core GEMMs.
    for (auto [numerics, n] : {std::pair{Numerics::kExact, int64_t{3}}, std::pair{Numerics::kFast, int64_t{40}}}) {
        Pair p(numerics);
        const int64_t groups = 8, k = 4096;
        p.step(simple_batch(n));
        HostWeight w = make_weight(WeightFormat::kFp8Block, 8192, k);
        WeightRef wc = upload(*p.cpu, w), wg = upload(*p.gpu, w);
        auto x = random_floats(n * groups * k);
        WeightRef slice = wg;
        slice.rows = 1024;
        const bool fp8 = fast_fp8_path(numerics, slice, n, k, true);
        Tensor xc = make_tensor(*p.cpu, {n, groups, k}, fp8 ? fp8_rounded(x, k) : x),
               yc = make_tensor(*p.cpu, {n, 8192});
        Tensor xg = make_tensor(*p.gpu, {n, groups, k}, x), yg = make_tensor(*p.gpu, {n, 8192});
        p.gpu->grouped_linear(xg, wg, static_cast<int>(groups), yg);
        p.cpu->grouped_linear(xc, wc, static_cast<int>(groups), yc);
        EXPECT_LE(rel_l2(read(*p.gpu, yg), read(*p.cpu, yc)), numerics == Numerics::kExact ? kExactTol
                                                              : fp8                        ? 1e-3
                                                                                           : kFastTol)
            << numerics_name(numerics) << " tokens " << n;
    }
}

TEST(CudaOps, NormRopeAndSims) {
    DSV4_REQUIRE_GPU();
    for (Numerics numerics : {Numerics::kExact, Numerics::kReference}) {
        Pair p(numerics);
        const int64_t n = 4;
        StepBatch b = simple_batch(n);
        b.positions = {1048000, 5, 130000, 77};  // large positions: float32 angles as in the reference
        p.cpu->begin_step(b);
        p.gpu->begin_step(b);
        std::vector<int64_t> shape;
        auto wv = random_floats(512, 0.2f);
        for (auto& v : wv) v += 1.0f;
        VecRef wc = upload_vec(*p.cpu, wv, shape), wg = upload_vec(*p.gpu, wv, shape);
        auto x = random_floats(n * 8 * 512, 3.0f);
        Tensor xc = make_tensor(*p.cpu, {n, 8, 512}, x), xg = make_tensor(*p.gpu, {n, 8, 512}, x);
        p.cpu->rms_norm(xc, &wc, 1e-6f, xc);
        p.gpu->rms_norm(xg, &wg, 1e-6f, xg);
        const ModelConfig c = op_config();
        for (int l : {0, 1}) {
            p.cpu->rope(xc, c.layers[l].rope, l == 1);
            p.gpu->rope(xg, c.layers[l].rope, l == 1);
        }
        p.cpu->kv_cache_sim(xc.view({n * 8, 512}), 448);
        p.gpu->kv_cache_sim(xg.view({n * 8, 512}), 448);
        Tensor qc = xc.view({n * 32, 1, 128}), qg = xg.view({n * 32, 1, 128});
        p.cpu->indexer_query_sim(qc);
        p.gpu->indexer_query_sim(qg);
        EXPECT_LE(rel_l2(read(*p.gpu, xg), read(*p.cpu, xc)), numerics == Numerics::kExact ? kExactTol : kReferenceTol);
    }
}

TEST(CudaOps, HyperConnectionsFlashShape) {
    DSV4_REQUIRE_GPU();
    for (Numerics numerics : {Numerics::kExact, Numerics::kReference}) {
        Pair p(numerics);
        const int64_t n = 3, hc = 4, d = 4096, mixes = (2 + hc) * hc;
        p.step(simple_batch(n));
        std::vector<int64_t> s1, s2, s3;
        auto fn = random_floats(mixes * hc * d, 2.0f / std::sqrt(static_cast<float>(hc * d)));
        auto base = random_floats(mixes, 0.5f);
        std::vector<float> scale = {1.3f, 0.7f, 1.9f};
        MhcWeights wc{upload_vec(*p.cpu, fn, s1), upload_vec(*p.cpu, base, s2), upload_vec(*p.cpu, scale, s3)};
        MhcWeights wg{upload_vec(*p.gpu, fn, s1), upload_vec(*p.gpu, base, s2), upload_vec(*p.gpu, scale, s3)};
        auto x = random_floats(n * hc * d, 2.0f);
        auto y = random_floats(n * d);
        Tensor xc = make_tensor(*p.cpu, {n, hc, d}, x), xg = make_tensor(*p.gpu, {n, hc, d}, x);
        Tensor uc = make_tensor(*p.cpu, {n, d}), ug = make_tensor(*p.gpu, {n, d});
        Tensor pc = make_tensor(*p.cpu, {n, hc}), pg = make_tensor(*p.gpu, {n, hc});
        Tensor cc = make_tensor(*p.cpu, {n, hc, hc}), cg = make_tensor(*p.gpu, {n, hc, hc});
        p.cpu->hc_pre(xc, wc, 20, 1e-6f, 1e-6f, uc, pc, cc);
        p.gpu->hc_pre(xg, wg, 20, 1e-6f, 1e-6f, ug, pg, cg);
        const double tol = numerics == Numerics::kExact ? kExactTol : kReferenceTol;
        EXPECT_LE(rel_l2(read(*p.gpu, ug), read(*p.cpu, uc)), tol);
        EXPECT_LE(rel_l2(read(*p.gpu, pg), read(*p.cpu, pc)), 1e-5);
        EXPECT_LE(rel_l2(read(*p.gpu, cg), read(*p.cpu, cc)), 1e-5);
        Tensor yc = make_tensor(*p.cpu, {n, d}, y), yg = make_tensor(*p.gpu, {n, d}, y);
        p.cpu->hc_post(xc, yc, pc, cc);
        p.gpu->hc_post(xg, yg, pg, cg);
        EXPECT_LE(rel_l2(read(*p.gpu, xg), read(*p.cpu, xc)), tol);
        HcHeadWeights hc_head_c{upload_vec(*p.cpu, std::vector<float>(fn.begin(), fn.begin() + hc * hc * d), s1),
                                upload_vec(*p.cpu, std::vector<float>(base.begin(), base.begin() + hc), s2),
                                upload_vec(*p.cpu, std::vector<float>{1.1f}, s3)};
        HcHeadWeights hc_head_g{upload_vec(*p.gpu, std::vector<float>(fn.begin(), fn.begin() + hc * hc * d), s1),
                                upload_vec(*p.gpu, std::vector<float>(base.begin(), base.begin() + hc), s2),
                                upload_vec(*p.gpu, std::vector<float>{1.1f}, s3)};
        Tensor hcy = make_tensor(*p.cpu, {n, d}), hgy = make_tensor(*p.gpu, {n, d});
        p.cpu->hc_head(xc, hc_head_c, 1e-6f, 1e-6f, hcy);
        p.gpu->hc_head(xg, hc_head_g, 1e-6f, 1e-6f, hgy);
        EXPECT_LE(rel_l2(read(*p.gpu, hgy), read(*p.cpu, hcy)), tol);
    }
}

// Router + routed experts (FP4) + shared expert (FP8) at Flash widths, learned and hash routing.
TEST(CudaOps, MoeFlashWidths) {
    DSV4_REQUIRE_GPU();
    // (numerics, tokens): 5 tokens run the per-pair GEMV; from 22 tokens (132 pairs) fast numerics group the pairs by
    // expert for tensor-core GEMMs.
    const std::pair<Numerics, int64_t> cases[] = {{Numerics::kExact, 5},
                                                  {Numerics::kReference, 5},
                                                  {Numerics::kFast, 5},
                                                  {Numerics::kFast, 22},
                                                  {Numerics::kFast, 100}};
    for (auto [numerics, n] : cases) {
        ModelConfig c = op_config();
        c.n_routed_experts = 8;
        Pair p(numerics, c);
        const int64_t d = 4096, inter = 2048, k = 6;
        p.step(simple_batch(n));
        std::deque<HostWeight> host;  // the CPU backend reads weights in place: keep them alive
        MoeWeights mc, mg;
        host.push_back(make_weight(WeightFormat::kBF16, c.n_routed_experts, d));
        mc.gate = upload(*p.cpu, host.back());
        mg.gate = upload(*p.gpu, host.back());
        std::vector<int64_t> s1;
        auto bias = random_floats(c.n_routed_experts, 0.5f);
        mc.bias = upload_vec(*p.cpu, bias, s1);
        mg.bias = upload_vec(*p.gpu, bias, s1);
        for (int e = 0; e < c.n_routed_experts; ++e) {
            const HostWeight& w1 = host.emplace_back(make_weight(WeightFormat::kFp4Row, inter, d));
            const HostWeight& w2 = host.emplace_back(make_weight(WeightFormat::kFp4Row, d, inter));
            const HostWeight& w3 = host.emplace_back(make_weight(WeightFormat::kFp4Row, inter, d));
            mc.experts.push_back({upload(*p.cpu, w1), upload(*p.cpu, w2), upload(*p.cpu, w3)});
            mg.experts.push_back({upload(*p.gpu, w1), upload(*p.gpu, w2), upload(*p.gpu, w3)});
        }
        HostWeight s1w = make_weight(WeightFormat::kFp8Block, inter, d),
                   s2w = make_weight(WeightFormat::kFp8Block, d, inter),
                   s3w = make_weight(WeightFormat::kFp8Block, inter, d);
        mc.shared = ExpertWeights{upload(*p.cpu, s1w), upload(*p.cpu, s2w), upload(*p.cpu, s3w)};
        mg.shared = ExpertWeights{upload(*p.gpu, s1w), upload(*p.gpu, s2w), upload(*p.gpu, s3w)};
        auto h = random_floats(n * d);
        Tensor hc_ = make_tensor(*p.cpu, {n, d}, h), hg = make_tensor(*p.gpu, {n, d}, h);
        Tensor wc = make_tensor(*p.cpu, {n, k}), wgt = make_tensor(*p.gpu, {n, k});
        Tensor ic = p.cpu->alloc(DType::kI32, {n, k}), ig = p.gpu->alloc(DType::kI32, {n, k});
        p.cpu->route(hc_, mc, c, RoutingType::kLearned, wc, ic);
        p.gpu->route(hg, mg, c, RoutingType::kLearned, wgt, ig);
        // Fast numerics compute the router logits on tensor cores (bf16 activations), so a near-tie between two
        // experts may pick differently: there the experts are compared under the CPU's routing instead.
        if (numerics != Numerics::kFast) {
            EXPECT_LE(rel_l2(read(*p.gpu, wgt), read(*p.cpu, wc)), 1e-5);
        }
        if (numerics == Numerics::kFast) {
            p.gpu->from_host(wgt, wc.data);
            p.gpu->from_host(ig, ic.data);
        }
        // Same picks (as sets per token).
        std::vector<int32_t> ids_c(n * k), ids_g(n * k);
        std::memcpy(ids_c.data(), ic.data, ids_c.size() * 4);
        p.gpu->synchronize();
        std::vector<float> tmp(n * k);
        p.gpu->to_host(Tensor(ig.data, DType::kF32, {n, k}), tmp.data());
        std::memcpy(ids_g.data(), tmp.data(), ids_g.size() * 4);
        EXPECT_EQ(ids_c, ids_g);
        Tensor yc = make_tensor(*p.cpu, {n, d}), yg = make_tensor(*p.gpu, {n, d});
        const cuda::MoePath path = cuda::choose_moe_path({numerics, WeightFormat::kFp4Row, n * k, d, inter},
                                                         cuda::LinearTuning::from(cuda_options_from_env({})).moe, "");
        p.cpu->moe(hc_, mc, wc, ic, 10.0f, yc);
        p.gpu->moe(hg, mg, wgt, ig, 10.0f, yg);
        // The FP8 grouped path quantizes the activations per 128 to e4m3 twice (the input, and the SwiGLU output
        // before W2): against float32 (exact) that is a few percent; cuda_fp8_test.cpp checks it against a host
        // model of the same roundings to 5e-3.
        // The per-pair W4A8 GEMVs (fewer pairs) quantize the same two inputs; the shared expert's FP8 linears run on
        // FP8 tensor cores too (activations quantized the same way).
        const bool fp8 = path == cuda::MoePath::kGroupedFp8 || path == cuda::MoePath::kPerPairMma ||
                         fast_fp8_path(numerics, mg.shared->w1, n, d);
        EXPECT_LE(rel_l2(read(*p.gpu, yg), read(*p.cpu, yc)), fp8 ? 8e-2 : tolerance(numerics)) << "tokens " << n;
    }
}

// The router kernel against the CPU at the expert counts of real models and past them (160, 256: eight scores a lane;
// 300: the kernel's wide form), every scoring function, with and without the selection bias, whatever the ids' order.
// Exact numerics: the logits agree to float32 rounding, so the picks are the CPU's (random scores have no near-ties).
TEST(CudaOps, RouterMatchesCpuAtModelExpertCounts) {
    DSV4_REQUIRE_GPU();
    const int64_t n = 3, d = 256, k = 6;
    for (int experts : {160, 256, 300}) {
        for (const char* func : {"sqrtsoftplus", "sigmoid", "softmax"}) {
            for (bool with_bias : {true, false}) {
                const std::string label = std::to_string(experts) + " experts, " + func + (with_bias ? ", bias" : "");
                ModelConfig c = op_config(d);
                c.n_routed_experts = experts;
                c.n_experts_per_tok = static_cast<int>(k);
                c.scoring_func = func;
                Pair p(Numerics::kExact, c);
                p.step(simple_batch(n));
                const HostWeight gate = make_weight(WeightFormat::kBF16, experts, d);
                MoeWeights mc, mg;
                mc.gate = upload(*p.cpu, gate);
                mg.gate = upload(*p.gpu, gate);
                std::vector<int64_t> shape;
                const auto bias = random_floats(experts, 0.5f);  // outlives the CPU's reads in place
                if (with_bias) {
                    mc.bias = upload_vec(*p.cpu, bias, shape);
                    mg.bias = upload_vec(*p.gpu, bias, shape);
                }
                const auto h = random_floats(n * d);
                Tensor hc_ = make_tensor(*p.cpu, {n, d}, h), hg = make_tensor(*p.gpu, {n, d}, h);
                Tensor wc = make_tensor(*p.cpu, {n, k}), wg = make_tensor(*p.gpu, {n, k});
                Tensor ic = p.cpu->alloc(DType::kI32, {n, k}), ig = p.gpu->alloc(DType::kI32, {n, k});
                p.cpu->route(hc_, mc, c, RoutingType::kLearned, wc, ic);
                p.gpu->route(hg, mg, c, RoutingType::kLearned, wg, ig);
                p.gpu->synchronize();
                std::vector<int32_t> ids_c(n * k), ids_g(n * k);
                std::memcpy(ids_c.data(), ic.data, ids_c.size() * 4);
                std::vector<float> raw(n * k);
                p.gpu->to_host(Tensor(ig.data, DType::kF32, {n, k}), raw.data());
                std::memcpy(ids_g.data(), raw.data(), ids_g.size() * 4);
                EXPECT_EQ(ids_c, ids_g) << label;
                for (int32_t id : ids_g) EXPECT_TRUE(id >= 0 && id < experts) << label;
                EXPECT_LE(rel_l2(read(*p.gpu, wg), read(*p.cpu, wc)), 1e-5) << label;
            }
        }
    }
}

// Expert ids outside [0, n_experts) (a corrupt routing table, a bad hash table) never index the expert table: every
// MoE path skips them and sets the device error flag, and the step fails at its synchronisation with a clear error.
TEST(CudaOps, MoeFlagsOutOfRangeExpertIds) {
    DSV4_REQUIRE_GPU();
    // (numerics, tokens): exact / reference run one warp per (pair, output row); fast decode-sized steps the per-pair
    // GEMV; 24 tokens x 6 = 144 pairs the grouped tensor-core GEMMs (device-side grouping by expert).
    const std::pair<Numerics, int64_t> cases[] = {
        {Numerics::kExact, 4}, {Numerics::kReference, 4}, {Numerics::kFast, 4}, {Numerics::kFast, 24}};
    for (auto [numerics, n] : cases) {
        const std::string label = std::string(numerics_name(numerics)) + " tokens " + std::to_string(n);
        ModelConfig c = op_config(256);
        c.n_routed_experts = 8;
        Pair p(numerics, c);
        const int64_t d = 256, inter = 128, k = 6;
        p.step(simple_batch(n));
        std::deque<HostWeight> host;
        MoeWeights mg;
        for (int e = 0; e < c.n_routed_experts; ++e) {
            const HostWeight& w1 = host.emplace_back(make_weight(WeightFormat::kFp4Row, inter, d));
            const HostWeight& w2 = host.emplace_back(make_weight(WeightFormat::kFp4Row, d, inter));
            const HostWeight& w3 = host.emplace_back(make_weight(WeightFormat::kFp4Row, inter, d));
            mg.experts.push_back({upload(*p.gpu, w1), upload(*p.gpu, w2), upload(*p.gpu, w3)});
        }
        Tensor h = make_tensor(*p.gpu, {n, d}, random_floats(n * d));
        Tensor weights = make_tensor(*p.gpu, {n, k}, std::vector<float>(n * k, 1.0f / k));
        Tensor ids = p.gpu->alloc(DType::kI32, {n, k}), y = make_tensor(*p.gpu, {n, d});
        std::vector<int32_t> host_ids(n * k);
        for (int64_t i = 0; i < n * k; ++i) host_ids[i] = static_cast<int32_t>(i % c.n_routed_experts);
        p.gpu->from_host(ids, host_ids.data());
        p.gpu->moe(h, mg, weights, ids, 10.0f, y);
        EXPECT_NO_THROW(p.gpu->synchronize()) << label;
        const std::vector<float> valid = read(*p.gpu, y);
        const int32_t good = host_ids[n * k / 2];
        for (int32_t bad : {c.n_routed_experts, -1}) {
            host_ids[n * k / 2] = bad;
            p.gpu->from_host(ids, host_ids.data());
            p.gpu->moe(h, mg, weights, ids, 10.0f, y);
            try {
                p.gpu->synchronize();
                ADD_FAILURE() << label << ": no error for expert id " << bad;
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find("flags 0x2"), std::string::npos) << label << ": " << e.what();
            }
        }
        // The failed launches left nothing behind (the fused combine's and the K splits' arrival counters among it):
        // the valid ids again give the same bits.
        host_ids[n * k / 2] = good;
        p.gpu->from_host(ids, host_ids.data());
        p.gpu->moe(h, mg, weights, ids, 10.0f, y);
        EXPECT_NO_THROW(p.gpu->synchronize()) << label;
        const std::vector<float> again = read(*p.gpu, y);
        EXPECT_EQ(std::memcmp(again.data(), valid.data(), valid.size() * sizeof(float)), 0) << label;
    }
}

// Decode's per-pair MoE with the shared expert on its side stream (CudaOptions::side_stream, joined before
// the down projection that adds it) gives the bits of the one-stream order, at 1 and 5 tokens.
TEST(CudaOps, SharedExpertStreamEqualsOneStream) {
    DSV4_REQUIRE_GPU();
    ModelConfig c = op_config();
    c.n_routed_experts = 8;
    const int64_t d = 4096, inter = 2048, k = 6;
    std::deque<HostWeight> host;
    for (int e = 0; e < 3 * c.n_routed_experts; ++e) {
        const int64_t rows = e % 3 == 1 ? d : inter;
        host.push_back(make_weight(WeightFormat::kFp4Row, rows, e % 3 == 1 ? inter : d));
    }
    const HostWeight s1 = make_weight(WeightFormat::kFp8Block, inter, d),
                     s2 = make_weight(WeightFormat::kFp8Block, d, inter),
                     s3 = make_weight(WeightFormat::kFp8Block, inter, d);
    for (int64_t n : {1, 5}) {
        const auto h = random_floats(n * d), weights = random_floats(n * k, 0.2f);
        std::vector<int32_t> ids(n * k);
        for (int64_t i = 0; i < n * k; ++i) ids[i] = static_cast<int32_t>((i * 5 + i / k) % c.n_routed_experts);
        std::vector<float> out[2];
        for (bool side : {false, true}) {
            CudaOptions o = cuda_options_from_env({});
            o.side_stream = side;
            o.workspace_mib = 512;
            std::unique_ptr<Backend> gpu = make_cuda_backend(Numerics::kFast, o);
            StateConfig state;
            state.max_slots = 1;
            state.num_blocks = 8;
            gpu->create_state(c, state);
            gpu->begin_step(simple_batch(n));
            MoeWeights w;
            for (int e = 0; e < c.n_routed_experts; ++e) {
                w.experts.push_back(
                    {upload(*gpu, host[3 * e]), upload(*gpu, host[3 * e + 1]), upload(*gpu, host[3 * e + 2])});
            }
            w.shared = ExpertWeights{upload(*gpu, s1), upload(*gpu, s2), upload(*gpu, s3)};
            Tensor hg = make_tensor(*gpu, {n, d}, h), wg = make_tensor(*gpu, {n, k}, weights),
                   y = make_tensor(*gpu, {n, d});
            Tensor ig = gpu->alloc(DType::kI32, {n, k});
            gpu->from_host(ig, ids.data());
            gpu->moe(hg, w, wg, ig, 10.0f, y);
            out[side] = read(*gpu, y);
        }
        EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)), 0) << "tokens " << n;
        EXPECT_FALSE(std::any_of(out[1].begin(), out[1].end(), [](float v) { return std::isnan(v); }))
            << "tokens " << n;
    }
}

}  // namespace
}  // namespace dsv4::ops_test
