// The FP8 tensor-core paths of fast numerics against host models of their roundings, on fresh random inputs:
// linears on cuBLASLt's block-scaled FP8 GEMM and on our wgmma kernel (M from 1 to 9,000, odd and non-multiple-of-4
// sizes, the Flash shapes, the grouped output projection), on the FP8 GEMV (1 to 8 tokens: also batch invariance,
// several weights in one launch, a NaN weight scale), and the routed experts on the W4A8 wgmma kernel (experts
// with 0, 1 and many tokens, per-32 scale spreads inside and outside the exponent window, NaN inputs). The model:
// activations rounded to bf16 then quantized per 128 to e4m3 with power-of-two scales (core act_quant_fp8_sim), sums
// in double. Outputs start as NaN, so an unwritten element fails. Skipped without a GPU.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <bit>
#include <deque>
#include <functional>
#include <memory>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/linear_plan.h"
#include "core/parallel.h"
#include "op_test_support.h"

namespace dsv4::ops_test {
namespace {

// bf16, then FP8 e4m3 per 128 with a power-of-two scale: the activation rounding of every FP8 / FP4 GEMM.
std::vector<float> quantized(const std::vector<float>& x, int64_t k) {
    std::vector<float> q(x.size());
    for (size_t i = 0; i < x.size(); ++i) q[i] = round_to_bf16(x[i]);
    for (size_t r = 0; r < x.size() / k; ++r) act_quant_fp8_sim(q.data() + r * k, k, 128, kOcpQuant);
    return q;
}

std::vector<float> dequantized(const HostWeight& w) {
    std::vector<float> v(w.rows * w.cols);
    for (int64_t r = 0; r < w.rows; ++r) {
        for (int64_t c = 0; c < w.cols; ++c) {
            float x = 0.0f;
            if (w.format == WeightFormat::kFp8Block) {
                x = decode_e4m3(w.data[r * w.cols + c]) *
                    decode_ue8m0(w.scales[(r / 128) * w.scale_shape[1] + c / 128]);
            } else {
                x = decode_e2m1(e2m1_code_at(w.data.data() + r * (w.cols / 2), c)) *
                    decode_ue8m0(w.scales[r * (w.cols / 32) + c / 32]);
            }
            v[r * w.cols + c] = x;
        }
    }
    return v;
}

// FP4 weights whose per-32 groups have magnitudes spread over `spread` binades (scale exponents differ by as much).
HostWeight spread_fp4_weight(int64_t rows, int64_t cols, int spread) {
    HostWeight w = make_weight(WeightFormat::kFp4Row, rows, cols);
    std::uniform_int_distribution<int> shift(-spread / 2, spread - spread / 2);
    for (auto& s : w.scales) s = static_cast<uint8_t>(std::clamp(static_cast<int>(s) + shift(rng()), 1, 254));
    return w;
}

constexpr double kFp8PathTol = 1e-3;  // against the host model of the same roundings

struct Fp8LinearCase {
    int64_t rows, cols, m;
};

class CudaFp8Linear : public ::testing::TestWithParam<std::tuple<std::string, Fp8LinearCase>> {};

TEST_P(CudaFp8Linear, MatchesReferenceRounding) {
    DSV4_REQUIRE_GPU();
    const auto& [path, c] = GetParam();
    ScopedEnv force("DSV4_LINEAR_PATH", path);
    auto gpu = make_cuda_backend(Numerics::kFast);
    HostWeight w = make_weight(WeightFormat::kFp8Block, c.rows, c.cols);
    const WeightRef wg = upload(*gpu, w);
    auto x = random_floats(c.m * c.cols, 2.0f);
    if (c.m > 3) x[2 * c.cols + 5] = NAN;  // row 2 must come out non-finite, the others unaffected
    Tensor xg = make_tensor(*gpu, {c.m, c.cols}, x), yg = make_tensor(*gpu, {c.m, c.rows});
    gpu->linear(xg, wg, LinearKind::kQuantized, yg);
    std::vector<float> got = read(*gpu, yg);
    std::vector<float> want = host_linear(quantized(x, c.cols), dequantized(w), c.m, c.rows, c.cols);
    if (c.m > 3) {
        for (int64_t r = 0; r < c.rows; ++r) {
            EXPECT_FALSE(std::isfinite(got[2 * c.rows + r])) << "NaN input row, column " << r;
            got[2 * c.rows + r] = want[2 * c.rows + r] = 0.0f;
        }
    }
    EXPECT_LE(rel_l2(got, want), kFp8PathTol) << path << " [" << c.rows << " x " << c.cols << "] m " << c.m;
}

const Fp8LinearCase kFp8LinearCases[] = {
    {256, 512, 1},    {256, 512, 2},    {256, 512, 3},    {256, 512, 5},      {256, 512, 31},   {256, 512, 64},
    {256, 512, 130},  {256, 512, 257},  {256, 512, 1000}, {256, 512, 4099},   {260, 384, 9000}, {1024, 4096, 33},
    {32768, 1024, 7}, {4096, 8192, 64}, {512, 4096, 300}, {2048, 4096, 2048},
};

INSTANTIATE_TEST_SUITE_P(Paths, CudaFp8Linear,
                         ::testing::Combine(::testing::Values(std::string("fp8_lt"), std::string("fp8_wgmma")),
                                            ::testing::ValuesIn(kFp8LinearCases)));

// The FP8 GEMV (1 to 8 tokens): row counts off the 16-row tile (200, 8, 130), the Flash shapes, K split over warps
// (8192) or not (1024).
const Fp8LinearCase kFp8GemvCases[] = {
    {256, 512, 1},  {256, 512, 2},    {256, 512, 3},   {256, 512, 5},   {200, 384, 8},   {8, 256, 1},
    {130, 8192, 6}, {32768, 1024, 1}, {4096, 8192, 8}, {1024, 4096, 4}, {2048, 4096, 7},
};

INSTANTIATE_TEST_SUITE_P(Gemv, CudaFp8Linear,
                         ::testing::Combine(::testing::Values(std::string("fp8_gemv")),
                                            ::testing::ValuesIn(kFp8GemvCases)));

// Same bits, every element written.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& label) {
    ASSERT_EQ(got.size(), want.size()) << label;
    for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << label << " element " << i << ": " << got[i] << " against " << want[i];
    }
}

// A token's outputs from the FP8 GEMV do not depend on the other tokens of its launch: every row of an 8-token and
// of a 3-token launch equals, bit for bit, the same token computed alone.
TEST(CudaFp8Gemv, BatchInvariant) {
    DSV4_REQUIRE_GPU();
    ScopedEnv force("DSV4_LINEAR_PATH", "fp8_gemv");
    auto gpu = make_cuda_backend(Numerics::kFast);
    const int64_t rows = 1000, cols = 2048;
    HostWeight w = make_weight(WeightFormat::kFp8Block, rows, cols);
    const WeightRef wg = upload(*gpu, w);
    for (int64_t m : {int64_t{8}, int64_t{3}}) {
        const auto x = random_floats(m * cols, 3.0f);
        Tensor xg = make_tensor(*gpu, {m, cols}, x), yg = make_tensor(*gpu, {m, rows});
        gpu->linear(xg, wg, LinearKind::kQuantized, yg);
        const std::vector<float> together = read(*gpu, yg);
        for (int64_t t = 0; t < m; ++t) {
            const std::vector<float> row(x.begin() + t * cols, x.begin() + (t + 1) * cols);
            Tensor x1 = make_tensor(*gpu, {1, cols}, row), y1 = make_tensor(*gpu, {1, rows});
            gpu->linear(x1, wg, LinearKind::kQuantized, y1);
            const std::vector<float> want(together.begin() + t * rows, together.begin() + (t + 1) * rows);
            expect_same_bits(read(*gpu, y1), want, "token " + std::to_string(t) + " of " + std::to_string(m));
        }
    }
}

// Several FP8 weights of one input in one launch (ModelOps::linears) give each weight's bits of a launch of its own;
// a BF16 weight in the list takes its own path; a NaN weight scale makes its 128-row block NaN and nothing else. At
// prefill sizes (300 rows) the FP8 weights share one quantization of the input on cuBLASLt: the same bits.
TEST(CudaFp8Gemv, SeveralWeightsInOneLaunch) {
    DSV4_REQUIRE_GPU();
    auto gpu = make_cuda_backend(Numerics::kFast);
    const int64_t cols = 4096;
    std::deque<HostWeight> host;
    host.push_back(make_weight(WeightFormat::kFp8Block, 1024, cols));
    host.push_back(make_weight(WeightFormat::kFp8Block, 512, cols));
    host.push_back(make_weight(WeightFormat::kFp8Block, 200, cols));
    host.push_back(make_weight(WeightFormat::kBF16, 64, cols));
    host[1].scales[0] = 0xff;  // rows 0..127 of the second weight: NaN
    std::vector<WeightRef> ws;
    for (const HostWeight& w : host) ws.push_back(upload(*gpu, w));
    for (int64_t m : {int64_t{1}, int64_t{3}, int64_t{300}}) {
        const auto x = random_floats(m * cols);
        Tensor xg = make_tensor(*gpu, {m, cols}, x);
        std::vector<Tensor> together, apart;
        std::vector<LinearTarget> targets;
        for (const WeightRef& w : ws) {
            together.push_back(make_tensor(*gpu, {m, w.rows}));
            apart.push_back(make_tensor(*gpu, {m, w.rows}));
            targets.push_back({&w, LinearKind::kQuantized, together.back()});
        }
        gpu->linears(xg, targets);
        for (size_t i = 0; i < ws.size(); ++i) {
            gpu->linear(xg, ws[i], LinearKind::kQuantized, apart[i]);
            const std::vector<float> got = read(*gpu, together[i]);
            expect_same_bits(got, read(*gpu, apart[i]), "weight " + std::to_string(i) + ", m " + std::to_string(m));
            for (int64_t t = 0; t < m; ++t) {
                for (int64_t r = 0; r < ws[i].rows; ++r) {
                    const bool nan_block = i == 1 && r < 128;
                    ASSERT_EQ(std::isnan(got[t * ws[i].rows + r]), nan_block) << "weight " << i << " row " << r;
                }
            }
        }
        const std::vector<float> want = host_linear(quantized(x, cols), dequantized(host[0]), m, 1024, cols);
        EXPECT_LE(rel_l2(read(*gpu, together[0]), want), kFp8PathTol) << "m " << m;
    }
}

// The TMA-fed wgmma kernel (fp8_wgmma): every output written exactly where it belongs (outputs poisoned with NaN
// beforehand; tiles past the edges of both operands, several tiles a persistent block), a NaN weight scale making its
// 128-row block NaN and nothing else, and the host model's values elsewhere.
TEST(CudaFp8, TmaGemmWritesEveryOutputOnce) {
    DSV4_REQUIRE_GPU();
    ScopedEnv force("DSV4_LINEAR_PATH", "fp8_wgmma");
    ScopedEnv tma("DSV4_FP8_TMA", "1");
    auto gpu = make_cuda_backend(Numerics::kFast);
    // 131 rows: an odd output stride, so the float2 stores meet unaligned pairs and the weight's last odd row.
    const Fp8LinearCase cases[] = {
        {260, 384, 1}, {131, 384, 67}, {384, 1024, 129}, {1152, 512, 4099}, {128, 256, 17000}};
    for (const Fp8LinearCase& c : cases) {
        HostWeight w = make_weight(WeightFormat::kFp8Block, c.rows, c.cols);
        if (c.rows > 128) w.scales[w.scale_shape[1] + (c.cols / 128) - 1] = 0xff;  // rows 128..255, last K block
        const WeightRef wg = upload(*gpu, w);
        const auto x = random_floats(c.m * c.cols, 2.0f);
        Tensor xg = make_tensor(*gpu, {c.m, c.cols}, x);
        Tensor yg = make_tensor(*gpu, {c.m, c.rows}, std::vector<float>(c.m * c.rows, NAN));
        gpu->linear(xg, wg, LinearKind::kQuantized, yg);
        std::vector<float> got = read(*gpu, yg);
        std::vector<float> want = host_linear(quantized(x, c.cols), dequantized(w), c.m, c.rows, c.cols);
        for (int64_t t = 0; t < c.m; ++t) {
            for (int64_t r = 0; r < c.rows; ++r) {
                const bool nan_block = c.rows > 128 && r >= 128 && r < 256;
                ASSERT_EQ(std::isnan(got[t * c.rows + r]), nan_block)
                    << "[" << c.rows << " x " << c.cols << "] token " << t << " row " << r;
                if (nan_block) got[t * c.rows + r] = want[t * c.rows + r] = 0.0f;
            }
        }
        EXPECT_LE(rel_l2(got, want), kFp8PathTol) << "[" << c.rows << " x " << c.cols << "] m " << c.m;
    }
}

// The grouped output projection (wo_a: 8 groups of 1024 rows over 4096-wide slices) with one quantization of the
// whole [n, 8 * 4096] input (each group's product reads its columns of it: the TMA kernel's column offset).
TEST(CudaFp8, GroupedProjection) {
    DSV4_REQUIRE_GPU();
    for (const std::string path : {"fp8_lt", "fp8_wgmma", "fp8_gemv", "fp8_wgmma_tma"}) {
        ScopedEnv force("DSV4_LINEAR_PATH", path == "fp8_wgmma_tma" ? "fp8_wgmma" : path);
        ScopedEnv tma("DSV4_FP8_TMA", path == "fp8_wgmma_tma" ? "1" : "0");
        auto gpu = make_cuda_backend(Numerics::kFast);
        const int64_t groups = 8, k = 4096, per = 1024;
        const std::vector<int64_t> tokens =
            path == "fp8_gemv" ? std::vector<int64_t>{1, 5} : std::vector<int64_t>{40, 301};
        for (int64_t n : tokens) {
            HostWeight w = make_weight(WeightFormat::kFp8Block, groups * per, k);
            const WeightRef wg = upload(*gpu, w);
            auto x = random_floats(n * groups * k);
            Tensor xg = make_tensor(*gpu, {n, groups, k}, x), yg = make_tensor(*gpu, {n, groups * per});
            gpu->grouped_linear(xg, wg, static_cast<int>(groups), yg);
            const std::vector<float> got = read(*gpu, yg), xq = quantized(x, groups * k), wd = dequantized(w);
            std::vector<float> want(n * groups * per);
            for (int64_t g = 0; g < groups; ++g) {
                std::vector<float> xs(n * k), ws(wd.begin() + g * per * k, wd.begin() + (g + 1) * per * k);
                for (int64_t t = 0; t < n; ++t) {
                    std::copy_n(xq.begin() + (t * groups + g) * k, k, xs.begin() + t * k);
                }
                const std::vector<float> yg_host = host_linear(xs, ws, n, per, k);
                for (int64_t t = 0; t < n; ++t) {
                    std::copy_n(yg_host.begin() + t * per, per, want.begin() + t * groups * per + g * per);
                }
            }
            EXPECT_LE(rel_l2(got, want), kFp8PathTol) << path << " tokens " << n;
        }
    }
}

// Host model of the grouped FP8 MoE path: x = Q(h); g, u = W1 x, W3 x; act = Q(bf16(silu(min(g, l)) * clamp(u) *
// weight)); routed = W2 act; plus the shared expert (FP8 path: same roundings; otherwise float32 GEMVs).
struct MoeModel {
    int64_t d = 0, inter = 0;
    std::vector<std::vector<float>> w1, w2, w3;
    std::vector<float> s1, s2, s3;
    int64_t shared_inter = 0;
    bool shared_fp8 = false;
    bool weight_after_w2 = false;  // the per-pair W4A8 path: act = Q(bf16(silu(min(g, l)) * clamp(u))), weight x out
};

std::vector<float> swiglu_host(const std::vector<float>& g, const std::vector<float>& u, float limit, float weight) {
    std::vector<float> a(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
        const float gv = std::min(g[i], limit), uv = std::clamp(u[i], -limit, limit);
        a[i] = round_to_bf16(gv / (1.0f + std::exp(-gv)) * uv * weight);
    }
    return a;
}

std::vector<float> moe_host(const MoeModel& m, const std::vector<float>& h, const std::vector<float>& weights,
                            const std::vector<int32_t>& ids, int64_t n, int64_t k, float limit) {
    const std::vector<float> xq = quantized(h, m.d);
    std::vector<float> y(n * m.d, 0.0f);
    parallel_for(n, [&](int64_t t) {
        const std::vector<float> x(xq.begin() + t * m.d, xq.begin() + (t + 1) * m.d);
        std::vector<double> acc(m.d, 0.0);
        for (int64_t j = 0; j < k; ++j) {
            const int32_t e = ids[t * k + j];
            const auto g = host_linear(x, m.w1[e], 1, m.inter, m.d), u = host_linear(x, m.w3[e], 1, m.inter, m.d);
            const float weight = weights[t * k + j];
            const auto act = quantized(swiglu_host(g, u, limit, m.weight_after_w2 ? 1.0f : weight), m.inter);
            const auto out = host_linear(act, m.w2[e], 1, m.d, m.inter);
            for (int64_t i = 0; i < m.d; ++i) acc[i] += (m.weight_after_w2 ? weight : 1.0f) * out[i];
        }
        if (m.shared_inter > 0) {
            const std::vector<float> hs(h.begin() + t * m.d, h.begin() + (t + 1) * m.d);
            const std::vector<float>& in = m.shared_fp8 ? x : hs;
            const auto g = host_linear(in, m.s1, 1, m.shared_inter, m.d);
            const auto u = host_linear(in, m.s3, 1, m.shared_inter, m.d);
            std::vector<float> a = swiglu_host(g, u, limit, 1.0f);
            if (m.shared_fp8) {
                a = quantized(a, m.shared_inter);
            } else {  // the float path does not round to bf16
                for (size_t i = 0; i < a.size(); ++i) {
                    const float gv = std::min(g[i], limit), uv = std::clamp(u[i], -limit, limit);
                    a[i] = gv / (1.0f + std::exp(-gv)) * uv;
                }
            }
            const auto out = host_linear(a, m.s2, 1, m.d, m.shared_inter);
            for (int64_t i = 0; i < m.d; ++i) acc[i] += out[i];
        }
        for (int64_t i = 0; i < m.d; ++i) y[t * m.d + i] = static_cast<float>(acc[i]);
    });
    return y;
}

// FP4 routed experts with per-32 scales spread over `spread` binades and an FP8 shared expert (256 wide), on a backend
// and as the host model's dequantized weights.
// The shared expert of one token takes its SwiGLU inside the down projection's FP8 GEMV (staged with the input's
// quantization); of three tokens, a SwiGLU launch, a quantization launch, then the GEMV. Batch invariance makes each
// token's output the same bits either way.
TEST(CudaFp8Gemv, SharedExpertSwigluStagedEqualsSeparateLaunches) {
    DSV4_REQUIRE_GPU();
    auto gpu = make_cuda_backend(Numerics::kFast);
    const int64_t d = 512, si = 256, n = 3;
    const float limit = 1.5f;  // low enough that the clamp acts on some of the up projection's outputs
    const HostWeight s1 = make_weight(WeightFormat::kFp8Block, si, d), s2 = make_weight(WeightFormat::kFp8Block, d, si),
                     s3 = make_weight(WeightFormat::kFp8Block, si, d);
    const ExpertWeights shared{upload(*gpu, s1), upload(*gpu, s2), upload(*gpu, s3)};
    ASSERT_EQ(cuda::choose_linear_path({Numerics::kFast, shared.w2, 1, si},
                                       cuda::LinearTuning::from(cuda_options_from_env({})), ""),
              cuda::LinearPath::kFp8Gemv);
    const auto h = random_floats(n * d, 2.0f);
    Tensor hg = make_tensor(*gpu, {n, d}, h), yg = make_tensor(*gpu, {n, d});
    gpu->moe_shared(hg, shared, limit, yg);
    const std::vector<float> together = read(*gpu, yg);
    for (float v : together) ASSERT_TRUE(std::isfinite(v));
    for (int64_t t = 0; t < n; ++t) {
        const std::vector<float> row(h.begin() + t * d, h.begin() + (t + 1) * d);
        Tensor h1 = make_tensor(*gpu, {1, d}, row), y1 = make_tensor(*gpu, {1, d});
        gpu->moe_shared(h1, shared, limit, y1);
        const std::vector<float> want(together.begin() + t * d, together.begin() + (t + 1) * d);
        expect_same_bits(read(*gpu, y1), want, "token " + std::to_string(t));
    }
}

struct MoeFixture {
    std::deque<HostWeight> host;  // the weights' host copies stay alive with the fixture
    MoeWeights mw;
    MoeModel model;
    MoeFixture(Backend& b, int64_t d, int64_t inter, int experts, int spread) {
        model.d = d;
        model.inter = inter;
        for (int e = 0; e < experts; ++e) {
            const HostWeight& w1 = host.emplace_back(spread_fp4_weight(inter, d, spread));
            const HostWeight& w2 = host.emplace_back(spread_fp4_weight(d, inter, spread));
            const HostWeight& w3 = host.emplace_back(spread_fp4_weight(inter, d, spread));
            mw.experts.push_back({upload(b, w1), upload(b, w2), upload(b, w3)});
            model.w1.push_back(dequantized(w1));
            model.w2.push_back(dequantized(w2));
            model.w3.push_back(dequantized(w3));
        }
        const int64_t si = 256;
        const HostWeight &s1 = host.emplace_back(make_weight(WeightFormat::kFp8Block, si, d)),
                         &s2 = host.emplace_back(make_weight(WeightFormat::kFp8Block, d, si)),
                         &s3 = host.emplace_back(make_weight(WeightFormat::kFp8Block, si, d));
        mw.shared = ExpertWeights{upload(b, s1), upload(b, s2), upload(b, s3)};
        model.s1 = dequantized(s1);
        model.s2 = dequantized(s2);
        model.s3 = dequantized(s3);
        model.shared_inter = si;
    }
};

int32_t read_clamps(Backend& b) {
    auto* cuda = dynamic_cast<cuda::CudaBackend*>(&b);
    int32_t v = -1;
    if (cuda != nullptr && cuda->fp8_clamp_counter() != nullptr) {
        b.synchronize();
        EXPECT_EQ(cudaMemcpy(&v, cuda->fp8_clamp_counter(), sizeof(v), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return v;
}

// Routing of n tokens to k of 8 experts with weights in [0.05, 0.5): pattern 0 = uniform over the first 6 experts
// (two get no token), 1 = every token's first pick is expert 0 (many tokens, several tiles) and expert 7 gets exactly
// one pair.
std::pair<std::vector<int32_t>, std::vector<float>> random_routing(int64_t n, int64_t k, int pattern) {
    std::vector<int32_t> ids(n * k);
    std::vector<float> weights(n * k);
    std::uniform_int_distribution<int> pick(0, 5);
    std::uniform_real_distribution<float> wdist(0.05f, 0.5f);
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t j = 0; j < k; ++j) {
            ids[t * k + j] = pattern == 1 && j == 0 ? 0 : (pattern == 1 ? 1 + static_cast<int>(j) % 5 : pick(rng()));
            weights[t * k + j] = wdist(rng());
        }
    }
    if (pattern == 1) ids[5 * k + 2] = 7;
    return {ids, weights};
}

// Token patterns: (tokens, pattern) of random_routing.
// far_tolerance: the relative L2 bound at 8 tokens or more when a K block's scale groups span 30 binades.
void expect_grouped_matches_host(const std::function<void(CudaOptions&)>& vary, double far_tolerance) {
    ScopedEnv force("DSV4_MOE_PATH", "grouped_fp8");
    CudaOptions options = cuda_options_from_env({});
    vary(options);
    const int64_t d = 512, inter = 256, k = 6, experts = 8;
    const float limit = 10.0f;
    for (int spread : {6, 30}) {  // per-32 scale exponents within / beyond the 15-binade window of a K block
        auto gpu = make_cuda_backend(Numerics::kFast, options);
        MoeFixture f(*gpu, d, inter, experts, spread);
        MoeWeights& mw = f.mw;
        MoeModel& model = f.model;
        const int32_t clamps_before = read_clamps(*gpu);
        for (auto [n, pattern] : {std::pair<int64_t, int>{1, 0}, {22, 0}, {200, 1}, {700, 0}}) {
            const cuda::LinearProblem shared_problem{Numerics::kFast, mw.shared->w1, n, d};
            const cuda::LinearPath sp =
                cuda::choose_linear_path(shared_problem, cuda::LinearTuning::from(cuda_options_from_env({})), "");
            model.shared_fp8 =
                sp == cuda::LinearPath::kFp8Lt || sp == cuda::LinearPath::kFp8Wgmma || sp == cuda::LinearPath::kFp8Gemv;
            auto h = random_floats(n * d);
            if (n > 20) h[17 * d + 3] = NAN;  // token 17's output must be non-finite, the others unaffected
            const auto [ids, weights] = random_routing(n, k, pattern);
            Tensor hg = make_tensor(*gpu, {n, d}, h), yg = make_tensor(*gpu, {n, d});
            Tensor wt = make_tensor(*gpu, {n, k}, weights), ig = gpu->alloc(DType::kI32, {n, k});
            gpu->from_host(ig, ids.data());
            const size_t mark = gpu->scratch_mark();
            gpu->moe(hg, mw, wt, ig, limit, yg);
            std::vector<float> got = read(*gpu, yg);
            gpu->scratch_release(mark);
            std::vector<float> want = moe_host(model, h, weights, ids, n, k, limit);
            if (n > 20) {
                for (int64_t i = 0; i < d; ++i) {
                    EXPECT_FALSE(std::isfinite(got[17 * d + i])) << "NaN token, element " << i;
                    got[17 * d + i] = want[17 * d + i] = 0.0f;
                }
            }
            // Hopper's FP8 wgmma keeps ~14 mantissa bits inside a K block: g and u differ from the double model by
            // ~1e-5 relative, which moves a few FP8 codes of the re-quantized activation by one step (up to 12.5% of
            // that activation). A single token averages over few of them, and one flipped large activation weighs a
            // lot: 6.0e-3 and 1.34e-2 seen at 1 token on fresh inputs (H200). A wrong expert, scale or tile is O(1).
            EXPECT_LE(rel_l2(got, want), n < 8          ? 3e-2
                                         : spread <= 14 ? 5e-3
                                                        : far_tolerance)
                << "tokens " << n << " pattern " << pattern << " spread " << spread;
        }
        const int32_t clamps = read_clamps(*gpu) - clamps_before;
        if (spread <= 14) {
            EXPECT_EQ(clamps, 0) << "spread " << spread;
        } else {
            EXPECT_GT(clamps, 0) << "spread " << spread;
        }
    }
}

// The staged kernel on every tile width.
TEST(CudaFp8, GroupedExpertsMatchHostRoundings) {
    DSV4_REQUIRE_GPU();
    expect_grouped_matches_host([](CudaOptions& o) { o.expert_register_weights = false; }, 5e-3);
}

// The register-weights kernel (the default for 16-token tiles: the fixture's 1 and 22 tokens; 200 and 700 take the
// wide staged tiles) against the same host model, and the launches chosen for these shapes. Its wgmma steps mix a K
// block's scale groups, so at a 30-binade spread a group far below the row's largest loses its products' low bits
// against it: 6.5e-3 seen once at 22 tokens (H200), where the staged kernel keeps 5e-3. A wrong lane, K order or
// scale is O(1).
TEST(CudaFp8, GroupedRegisterWeightsMatchHostRoundings) {
    cuda::ExpertGemmArgs up;
    up.format = WeightFormat::kFp4Row;
    up.tile_n = 16;
    up.k = 512;
    up.register_weights = true;
    EXPECT_EQ(cuda::choose_expert_kernel(up), cuda::ExpertKernel::kRegisterWeights);
    cuda::ExpertGemmArgs down = up;
    down.k = 256;
    EXPECT_EQ(cuda::choose_expert_kernel(down), cuda::ExpertKernel::kRegisterWeights);
    cuda::ExpertGemmArgs wide = up;
    wide.tile_n = 64;  // the staged kernel's SwiGLU wide tile
    EXPECT_EQ(cuda::choose_expert_kernel(wide), cuda::ExpertKernel::kStaged);
    wide.tile_n = 128;  // the staged kernel's plain wide tile
    EXPECT_EQ(cuda::choose_expert_kernel(wide), cuda::ExpertKernel::kStaged);
    cuda::ExpertGemmArgs huge = up;
    huge.k = 128 * 128;  // the activation tile (2 KB a K block) past shared memory: the staged kernel
    EXPECT_EQ(cuda::choose_expert_kernel(huge), cuda::ExpertKernel::kStaged);
    cuda::ExpertGemmArgs off = up;
    off.register_weights = false;
    EXPECT_EQ(cuda::choose_expert_kernel(off), cuda::ExpertKernel::kStaged);
    EXPECT_TRUE(cuda_options_from_env({}).expert_register_weights) << "the default";
    DSV4_REQUIRE_GPU();
    expect_grouped_matches_host([](CudaOptions& o) { o.expert_register_weights = true; }, 1e-2);
}

// g's moe over n = ids.size() / k tokens of h (d = h.size() / n wide), clamp 10: the output rows on the host.
std::vector<float> routed_moe(Backend& g, const MoeWeights& mw, const std::vector<float>& h,
                              const std::vector<int32_t>& ids, const std::vector<float>& weights, int64_t k) {
    const auto n = static_cast<int64_t>(ids.size()) / k, d = static_cast<int64_t>(h.size()) / n;
    Tensor hg = make_tensor(g, {n, d}, h), yg = make_tensor(g, {n, d});
    Tensor wt = make_tensor(g, {n, k}, weights), ig = g.alloc(DType::kI32, {n, k});
    g.from_host(ig, ids.data());
    const size_t mark = g.scratch_mark();
    g.moe(hg, mw, wt, ig, 10.0f, yg);
    std::vector<float> out = read(g, yg);
    g.scratch_release(mark);
    return out;
}

// A variant of the grouped W4A8 kernel (`vary` applied to the options) gives the default kernel's bits: both
// token-tile widths (22 tokens: 16; 200 and 700: the wide tiles), the SwiGLU up projection and the plain down
// projection, K of 512 / 256 and 2048 / 384 (fewer K blocks than a producer's raw ring, and more), per-32 scale
// spreads inside and beyond the exponent window (the same clamp counts), a NaN token. Routed experts only; outputs
// compared as bits.
// same_tiles: the variant keeps the tile widths, so the clamp counts (one a tile and scale group) match too; else
// only whether there are any.
void expect_grouped_variant_bits(const std::function<void(CudaOptions&)>& vary, bool registers, bool same_tiles) {
    ScopedEnv force("DSV4_MOE_PATH", "grouped_fp8");
    CudaOptions base = cuda_options_from_env({});
    base.expert_register_weights = registers;
    CudaOptions variant = base;
    vary(variant);
    const int64_t k = 6;
    for (auto [d, inter, spread] : {std::tuple<int64_t, int64_t, int>{512, 256, 6}, {2048, 384, 30}}) {
        auto a = make_cuda_backend(Numerics::kFast, base);
        auto b = make_cuda_backend(Numerics::kFast, variant);
        MoeFixture f(*a, d, inter, 8, spread);  // device weights of one process: both backends read them
        f.mw.shared.reset();  // routed experts only (the shared expert's cuBLASLt scales are registered with `a` alone)
        const int32_t clamps_a = read_clamps(*a), clamps_b = read_clamps(*b);
        for (auto [n, pattern] : {std::pair<int64_t, int>{1, 0}, {22, 0}, {200, 1}, {700, 0}}) {
            auto h = random_floats(n * d);
            if (n > 20) h[17 * d + 3] = NAN;
            const auto [ids, weights] = random_routing(n, k, pattern);
            const std::vector<float> out[2] = {routed_moe(*a, f.mw, h, ids, weights, k),
                                               routed_moe(*b, f.mw, h, ids, weights, k)};
            expect_same_bits(
                out[1], out[0],
                "tokens " + std::to_string(n) + " d " + std::to_string(d) + " spread " + std::to_string(spread));
            const auto nonfinite =
                std::count_if(out[1].begin(), out[1].end(), [](float v) { return !std::isfinite(v); });
            EXPECT_EQ(nonfinite, n > 20 ? d : 0) << "only the NaN token's row is non-finite; tokens " << n;
        }
        const int32_t counted_a = read_clamps(*a) - clamps_a, counted_b = read_clamps(*b) - clamps_b;
        if (same_tiles) {
            EXPECT_EQ(counted_b, counted_a) << "spread " << spread;
        } else {
            EXPECT_EQ(counted_b > 0, counted_a > 0) << "spread " << spread;
        }
    }
}

// The same, with the 16-token tiles on the staged kernel and on the register-weights one.
void expect_grouped_variant_bits(const std::function<void(CudaOptions&)>& vary, bool same_tiles = true) {
    for (bool registers : {false, true}) {
        SCOPED_TRACE(registers ? "register-weights decode tiles" : "staged decode tiles");
        expect_grouped_variant_bits(vary, registers, same_tiles);
    }
}

// The warp-specialized grouped W4A8 kernel (DSV4_EXPERT_WS).
TEST(CudaFp8, GroupedWarpSpecializedGivesTheTwoWarpgroupBits) {
    DSV4_REQUIRE_GPU();
    expect_grouped_variant_bits([](CudaOptions& o) { o.expert_ws = true; });
}

// The TMA-fed GEMMs over the experts' e4m3 copies (DSV4_EXPERT_TMA; the prefill tiles: the fixture's 200 and 700
// tokens) give the staged kernel's bits (their expansion is the staged kernel's, done once a step instead of once a
// tile, so the clamps are counted as often as experts, not tiles, expand them).
TEST(CudaFp8, GroupedTmaGivesTheStagedBits) {
    DSV4_REQUIRE_GPU();
    expect_grouped_variant_bits([](CudaOptions& o) { o.expert_tma = true; }, false);
}

// The same against the host model of the roundings, with the clamp counts of both spreads.
TEST(CudaFp8, GroupedTmaMatchesHostRoundings) {
    DSV4_REQUIRE_GPU();
    expect_grouped_matches_host(
        [](CudaOptions& o) {
            o.expert_tma = true;
            o.expert_register_weights = false;
        },
        5e-3);
}

// The down projection's prefill tiles at 48 tokens two blocks an SM and at 128 tokens one block an SM
// (DSV4_EXPERT_HALF_WIDE against the default's other choice), on the two-warpgroup and the warp-specialized kernels:
// the same bits (more tiles count more clamps: one a tile and scale group).
TEST(CudaFp8, GroupedHalfWideTilesGiveTheSameBits) {
    DSV4_REQUIRE_GPU();
    expect_grouped_variant_bits([](CudaOptions& o) { o.expert_half_wide = !o.expert_half_wide; }, false);
    expect_grouped_variant_bits(
        [](CudaOptions& o) {
            o.expert_half_wide = !o.expert_half_wide;
            o.expert_ws = true;
        },
        false);
}

// The FP4 weight loads' L2 prefetch-size hints (DSV4_EXPERT_L2_PREFETCH) against the default (256).
TEST(CudaFp8, GroupedL2PrefetchGivesTheSameBits) {
    DSV4_REQUIRE_GPU();
    for (int bytes : {0, 128}) {
        SCOPED_TRACE("prefetch " + std::to_string(bytes));
        expect_grouped_variant_bits([bytes](CudaOptions& o) { o.expert_l2_prefetch = bytes; });
    }
}

// The per-pair W4A8 GEMVs (decode sizes) against the host model of their roundings: h and the SwiGLU output quantized
// per 128, every per-32 scale exact (no exponent window: spreads of 6 and 30 binades alike), the routing weight after
// W2. Also the default choice below the grouping threshold.
TEST(CudaFp8, PerPairMmaExpertsMatchHostRoundings) {
    DSV4_REQUIRE_GPU();
    const int64_t d = 512, inter = 384, k = 6;
    const float limit = 10.0f;
    EXPECT_EQ(cuda::choose_moe_path({Numerics::kFast, WeightFormat::kFp4Row, 18, d, inter}, {}, ""),
              cuda::MoePath::kPerPairMma);
    ScopedEnv force("DSV4_MOE_PATH", "per_pair_mma");
    for (int spread : {6, 30}) {
        auto gpu = make_cuda_backend(Numerics::kFast);
        MoeFixture f(*gpu, d, inter, 8, spread);
        f.model.weight_after_w2 = true;
        for (int64_t n : {int64_t{1}, int64_t{3}}) {
            const cuda::LinearPath sp = cuda::choose_linear_path(
                {Numerics::kFast, f.mw.shared->w1, n, d}, cuda::LinearTuning::from(cuda_options_from_env({})), "");
            f.model.shared_fp8 = sp == cuda::LinearPath::kFp8Gemv;
            const auto h = random_floats(n * d);
            std::vector<int32_t> ids(n * k);
            std::vector<float> weights(n * k);
            for (int64_t i = 0; i < n * k; ++i) {
                ids[i] = static_cast<int32_t>((i * 5 + n) % 8);
                weights[i] = std::uniform_real_distribution<float>(0.05f, 0.5f)(rng());
            }
            Tensor hg = make_tensor(*gpu, {n, d}, h), yg = make_tensor(*gpu, {n, d});
            Tensor wt = make_tensor(*gpu, {n, k}, weights), ig = gpu->alloc(DType::kI32, {n, k});
            gpu->from_host(ig, ids.data());
            gpu->moe(hg, f.mw, wt, ig, limit, yg);
            const std::vector<float> got = read(*gpu, yg), want = moe_host(f.model, h, weights, ids, n, k, limit);
            for (float v : got) ASSERT_TRUE(std::isfinite(v)) << "tokens " << n << " spread " << spread;
            // mma.sync's FP8 sums are exact-ish per 32-term group; the model's are double. What moves is the rare
            // re-quantized activation code one step off (see GroupedExpertsMatchHostRoundings); a wrong lane, group
            // scale or expert is O(1).
            EXPECT_LE(rel_l2(got, want), 2e-2) << "tokens " << n << " spread " << spread;
        }
    }
}

// A NaN in a token's input makes its output row NaN on the per-pair W4A8 path, as on the CPU (the SwiGLU clamp used
// to turn it into the limit: fminf drops NaNs); the other tokens' rows stay finite.
TEST(CudaFp8, PerPairMmaNanTokenStaysNan) {
    DSV4_REQUIRE_GPU();
    ScopedEnv force("DSV4_MOE_PATH", "per_pair_mma");
    const int64_t d = 512, inter = 384, k = 6, n = 3;
    auto gpu = make_cuda_backend(Numerics::kFast);
    MoeFixture f(*gpu, d, inter, 8, 6);
    f.mw.shared.reset();  // routed experts only
    auto h = random_floats(n * d);
    h[d + 7] = NAN;
    const auto [ids, weights] = random_routing(n, k, 0);
    const std::vector<float> out = routed_moe(*gpu, f.mw, h, ids, weights, k);
    for (int64_t t = 0; t < n; ++t) {
        const auto row = out.begin() + t * d;
        const auto finite = std::count_if(row, row + d, [](float v) { return std::isfinite(v); });
        EXPECT_EQ(finite, t == 1 ? 0 : d) << "token " << t;
    }
}

// The chooser names the requirement a forced path misses.
TEST(CudaFp8, ForcedPathFailsNamingTheRequirement) {
    WeightRef w;
    w.format = WeightFormat::kFp8Block;
    w.rows = 256;
    w.cols = 64;
    w.block_rows = w.block_cols = 128;
    const cuda::LinearProblem p{Numerics::kFast, w, 100, 64};
    try {
        cuda::choose_linear_path(p, cuda::LinearTuning{}, "fp8_lt");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("multiple of 128"), std::string::npos) << e.what();
    }
    EXPECT_EQ(cuda::choose_linear_path(p, cuda::LinearTuning{}, ""), cuda::LinearPath::kGemmBf16);
    w.cols = 512;
    try {
        cuda::choose_linear_path({Numerics::kFast, w, 100, 512}, cuda::LinearTuning{}, "fp8_gemv");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("at most 8 activation rows"), std::string::npos) << e.what();
    }
    cuda::LinearTuning no_fp8_gemv;
    no_fp8_gemv.fp8_gemv = false;
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kFast, w, 1, 512}, cuda::LinearTuning{}, ""),
              cuda::LinearPath::kFp8Gemv);
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kFast, w, 8, 512}, cuda::LinearTuning{}, ""),
              cuda::LinearPath::kFp8Gemv);
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kFast, w, 9, 512}, cuda::LinearTuning{}, ""),
              cuda::LinearPath::kFp8Lt);
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kFast, w, 1, 512}, no_fp8_gemv, ""), cuda::LinearPath::kGemv);
    EXPECT_EQ(cuda::choose_linear_path({Numerics::kExact, w, 1, 512}, cuda::LinearTuning{}, ""),
              cuda::LinearPath::kGemv);
    w.cols = 64;
    const cuda::LinearProblem ref{Numerics::kReference, w, 100, 64};
    EXPECT_EQ(cuda::choose_linear_path(ref, cuda::LinearTuning{}, ""), cuda::LinearPath::kGeneric);
    const cuda::MoeProblem moe{Numerics::kFast, WeightFormat::kFp4Row, 600, 4096, 192};
    EXPECT_EQ(cuda::choose_moe_path(moe, {}, ""), cuda::MoePath::kGroupedBf16);
    try {
        cuda::choose_moe_path(moe, {}, "grouped_fp8");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("multiples of 128"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace dsv4::ops_test
