// The streamed single-vector GEMV (kernels_gemv_stream.cu) against the register GEMV it replaces, bit for bit, on
// fresh random inputs: FP8 (OCP and FNUZ), FP4 and BF16 weights, tile sizes from one to eight rows, row counts that
// leave a partial last tile, grouped linears, the routed experts' per-pair GEMVs, an out-of-range expert id. Two CUDA
// backends that differ only in CudaOptions::gemv_stream. Skipped without a GPU.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/fp8_convert.h"
#include "op_test_support.h"

namespace dsv4::ops_test {
namespace {

// Two CUDA backends, streamed GEMV on and off, with the same state and numerics, and the CPU's exact numerics.
struct StreamedAndRegister {
    std::unique_ptr<Backend> on, off, cpu;
    StreamedAndRegister(Numerics n, Fp8Dialect dialect = Fp8Dialect::kOcp, int tile_bytes = 4096) {
        CudaOptions options = cuda_options_from_env({});
        options.fp8_dialect = dialect;
        options.gemv_stream_tile = tile_bytes;
        options.fp8_gemv = false;  // FP8 weights on the float32 GEMVs under test, not on the FP8 tensor cores
        options.gemv_stream_experts = options.gemv_stream_linears = true;
        on = make_cuda_backend(n, options);
        options.gemv_stream_experts = options.gemv_stream_linears = false;
        off = make_cuda_backend(n, options);
        cpu = make_cpu_backend(Numerics::kExact, 0, dialect);
        StateConfig s;
        s.max_slots = 1;
        s.num_blocks = 8;
        s.block_tokens = 256;
        s.rewind_capacity = 8;
        for (Backend* b : {on.get(), off.get(), cpu.get()}) {
            b->create_state(op_config(), s);
            b->begin_step(simple_batch(1));
        }
    }
};

// Same bits, every element written and finite.
void expect_same_bits(const std::vector<float>& streamed, const std::vector<float>& reg, const std::string& label) {
    ASSERT_EQ(streamed.size(), reg.size()) << label;
    for (size_t i = 0; i < reg.size(); ++i) {
        ASSERT_TRUE(std::isfinite(streamed[i])) << label << " element " << i;
        ASSERT_EQ(std::bit_cast<uint32_t>(streamed[i]), std::bit_cast<uint32_t>(reg[i]))
            << label << " element " << i << ": streamed " << streamed[i] << " register " << reg[i];
    }
}

struct StreamCase {
    WeightFormat format;
    int64_t rows, cols;
    int groups;  // > 1: grouped_linear, a vector per group
    int tile_bytes;
    Fp8Dialect dialect;
};

std::string label(const StreamCase& c) {
    return "format " + std::to_string(static_cast<int>(c.format)) + " [" + std::to_string(c.rows) + ", " +
           std::to_string(c.cols) + "] groups " + std::to_string(c.groups) + " tile " + std::to_string(c.tile_bytes) +
           (c.dialect == Fp8Dialect::kFnuz ? " fnuz" : "");
}

class CudaGemvStream : public ::testing::TestWithParam<StreamCase> {};

TEST_P(CudaGemvStream, EqualsRegisterGemv) {
    DSV4_REQUIRE_GPU();
    const StreamCase c = GetParam();
    for (Numerics numerics : {Numerics::kExact, Numerics::kFast}) {
        StreamedAndRegister b(numerics, c.dialect, c.tile_bytes);
        HostWeight w = make_weight(c.format, c.rows, c.cols);
        if (c.dialect == Fp8Dialect::kFnuz) {  // the backends hold FNUZ codes: convert as the loader does
            const HostWeight ocp = w;
            convert_fp8_blocks(ocp.data.data(), ocp.scales.data(), {c.rows, c.cols, 128, 128}, Fp8Dialect::kOcp,
                               Fp8Dialect::kFnuz, w.data.data(), w.scales.data());
        }
        const std::vector<float> x = random_floats(c.groups * c.cols);
        auto run = [&](Backend& backend) {
            const WeightRef wr = upload(backend, w);
            Tensor y = make_tensor(backend, {1, c.rows});  // NaN-poisoned
            if (c.groups > 1) {
                backend.grouped_linear(make_tensor(backend, {1, c.groups, c.cols}, x), wr, c.groups, y);
            } else {
                backend.linear(make_tensor(backend, {1, c.cols}, x), wr, LinearKind::kBf16Out, y);
            }
            return read(backend, y);
        };
        const std::string what = label(c) + " " + std::string(numerics_name(numerics));
        const std::vector<float> reg = run(*b.off), streamed = run(*b.on), cpu = run(*b.cpu);
        auto* off = dynamic_cast<cuda::CudaBackend*>(b.off.get());
        off->force_paths("generic", "");  // a third opinion: one warp per row, no GEMV code
        const std::vector<float> generic = run(*b.off);
        off->force_paths("", "");
        EXPECT_LE(rel_l2(generic, cpu), kExactTol) << what << " (generic kernel against the CPU)";
        EXPECT_LE(rel_l2(reg, cpu), kExactTol) << what << " (register GEMV against the CPU)";
        EXPECT_LE(rel_l2(streamed, cpu), kExactTol) << what << " (streamed GEMV against the CPU)";
        expect_same_bits(streamed, reg, what);
    }
}

const StreamCase kStreamCases[] = {
    {WeightFormat::kFp8Block, 32768, 1024, 1, 4096, Fp8Dialect::kOcp},  // wq_b: 4-row tiles
    {WeightFormat::kFp8Block, 1024, 4096, 1, 4096, Fp8Dialect::kOcp},   // wq_a: 1-row tiles
    {WeightFormat::kFp8Block, 4096, 8192, 1, 4096, Fp8Dialect::kOcp},   // wo_b: an 8 KB row, 64 passes
    {WeightFormat::kFp8Block, 8192, 4096, 8, 4096, Fp8Dialect::kOcp},   // wo_a: 8 groups
    {WeightFormat::kFp8Block, 300, 1024, 1, 8192, Fp8Dialect::kOcp},    // 8-row tiles, a partial last tile
    {WeightFormat::kFp8Block, 2048, 4096, 1, 4096, Fp8Dialect::kFnuz},  // FNUZ codes
    {WeightFormat::kFp4Row, 2048, 4096, 1, 4096, Fp8Dialect::kOcp},     // expert w1 shape: 2-row tiles
    {WeightFormat::kFp4Row, 4100, 2048, 1, 4096, Fp8Dialect::kOcp},     // w2 shape, partial tile
    {WeightFormat::kFp4Row, 77, 512, 1, 2048, Fp8Dialect::kOcp},        // 8-row tiles of 256 bytes
    {WeightFormat::kBF16, 1024, 4096, 1, 4096, Fp8Dialect::kOcp},       // compressor wkv: 8 KB rows
    {WeightFormat::kBF16, 1001, 256, 1, 4096, Fp8Dialect::kOcp},        // 512-byte rows, partial tile
    {WeightFormat::kBF16, 512, 1024, 4, 1024, Fp8Dialect::kOcp},        // grouped, 1-row tiles
};

INSTANTIATE_TEST_SUITE_P(Shapes, CudaGemvStream, ::testing::ValuesIn(kStreamCases));

// ModelOps::linears: the attention input's projections (two FP8, five BF16 weights of one width, an FP4 one that
// joins no group) in one launch per format, against one register GEMV each.
TEST(CudaGemvStreamMulti, LinearsEqualOneGemvEach) {
    DSV4_REQUIRE_GPU();
    const int64_t cols = 4096;
    const std::pair<WeightFormat, int64_t> shapes[] = {{WeightFormat::kFp8Block, 1024}, {WeightFormat::kBF16, 1024},
                                                       {WeightFormat::kFp8Block, 512},  {WeightFormat::kBF16, 1024},
                                                       {WeightFormat::kBF16, 256},      {WeightFormat::kBF16, 256},
                                                       {WeightFormat::kBF16, 64},       {WeightFormat::kFp4Row, 300}};
    for (Numerics numerics : {Numerics::kExact, Numerics::kFast}) {
        StreamedAndRegister b(numerics);
        std::vector<HostWeight> host;
        for (const auto& [format, rows] : shapes) host.push_back(make_weight(format, rows, cols));
        const std::vector<float> x = random_floats(cols);
        auto outputs = [&](Backend& backend, bool together) {
            std::vector<WeightRef> ws;
            for (const HostWeight& w : host) ws.push_back(upload(backend, w));
            std::vector<LinearTarget> targets;
            for (size_t i = 0; i < ws.size(); ++i) {
                targets.push_back({&ws[i], LinearKind::kF32Out, make_tensor(backend, {1, ws[i].rows})});
            }
            const Tensor xt = make_tensor(backend, {1, cols}, x);
            if (together) {
                backend.linears(xt, targets);
            } else {
                for (const LinearTarget& t : targets) backend.linear(xt, *t.w, t.kind, t.y);
            }
            std::vector<std::vector<float>> ys;
            for (const LinearTarget& t : targets) ys.push_back(read(backend, t.y));
            return ys;
        };
        const auto together = outputs(*b.on, true), apart = outputs(*b.off, false);
        for (size_t i = 0; i < together.size(); ++i) {
            expect_same_bits(together[i], apart[i],
                             std::string(numerics_name(numerics)) + " target " + std::to_string(i));
        }
    }
}

// The routed experts' per-pair GEMVs (w1, w3, w2 of every pair) streamed and not: same bits after the combine.
struct ExpertCase {
    WeightFormat format;
    int64_t d, inter, tokens;
};

TEST(CudaGemvStreamExperts, PerPairGemvsEqualRegisterGemvs) {
    DSV4_REQUIRE_GPU();
    const ExpertCase cases[] = {{WeightFormat::kFp4Row, 4096, 2048, 1},
                                {WeightFormat::kFp4Row, 1024, 512, 3},
                                {WeightFormat::kFp8Block, 1024, 512, 2}};
    for (const ExpertCase& ec : cases) {
        const std::string what = "format " + std::to_string(static_cast<int>(ec.format)) + " d " +
                                 std::to_string(ec.d) + " tokens " + std::to_string(ec.tokens);
        StreamedAndRegister b(Numerics::kFast);
        const int experts = 8, k = 6;
        std::deque<HostWeight> host;
        for (int e = 0; e < experts; ++e) {
            host.push_back(make_weight(ec.format, ec.inter, ec.d));
            host.push_back(make_weight(ec.format, ec.d, ec.inter));
            host.push_back(make_weight(ec.format, ec.inter, ec.d));
        }
        const std::vector<float> h = random_floats(ec.tokens * ec.d);
        std::vector<float> weights(ec.tokens * k);
        std::vector<int32_t> ids(ec.tokens * k);
        for (int64_t i = 0; i < ec.tokens * k; ++i) {
            ids[i] = static_cast<int32_t>((i * 5 + i / k) % experts);
            weights[i] = 0.1f + 0.05f * static_cast<float>(i % 7);
        }
        auto run = [&](Backend& backend) {
            MoeWeights mw;
            for (int e = 0; e < experts; ++e) {
                mw.experts.push_back(
                    {upload(backend, host[3 * e]), upload(backend, host[3 * e + 1]), upload(backend, host[3 * e + 2])});
            }
            auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend);
            cuda->force_paths("", "per_pair_gemv");
            Tensor ig = backend.alloc(DType::kI32, {ec.tokens, k});
            backend.from_host(ig, ids.data());
            Tensor y = make_tensor(backend, {ec.tokens, ec.d});
            backend.moe(make_tensor(backend, {ec.tokens, ec.d}, h), mw,
                        make_tensor(backend, {ec.tokens, static_cast<int64_t>(k)}, weights), ig, 7.0f, y);
            backend.synchronize();
            return read(backend, y);
        };
        expect_same_bits(run(*b.on), run(*b.off), what);
    }
}

// An expert id outside the table skips its pair in the streamed GEMV too and raises the step's error flag.
TEST(CudaGemvStreamExperts, OutOfRangeExpertIdRaisesTheFlag) {
    DSV4_REQUIRE_GPU();
    StreamedAndRegister b(Numerics::kFast);
    const int64_t d = 512, inter = 512, k = 6;
    std::deque<HostWeight> host;
    MoeWeights mw;
    for (int e = 0; e < 8; ++e) {
        const HostWeight& w1 = host.emplace_back(make_weight(WeightFormat::kFp4Row, inter, d));
        const HostWeight& w2 = host.emplace_back(make_weight(WeightFormat::kFp4Row, d, inter));
        const HostWeight& w3 = host.emplace_back(make_weight(WeightFormat::kFp4Row, inter, d));
        mw.experts.push_back({upload(*b.on, w1), upload(*b.on, w2), upload(*b.on, w3)});
    }
    auto* cuda = dynamic_cast<cuda::CudaBackend*>(b.on.get());
    cuda->force_paths("", "per_pair_gemv");
    std::vector<int32_t> ids = {0, 1, 2, 8, 4, 5};
    Tensor ig = b.on->alloc(DType::kI32, {1, k});
    b.on->from_host(ig, ids.data());
    Tensor y = make_tensor(*b.on, {1, d});
    b.on->moe(make_tensor(*b.on, {1, d}, random_floats(d)), mw, make_tensor(*b.on, {1, k}, std::vector<float>(k, 0.2f)),
              ig, 7.0f, y);
    try {
        b.on->synchronize();
        ADD_FAILURE() << "no error for expert id 8";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("flags 0x2"), std::string::npos) << e.what();
    }
}

// m vectors through one linear (or grouped linear) against each vector alone: the same bits, every element written
// (the outputs start as NaN).
void expect_vectors_equal_one_at_a_time(Backend& gpu, WeightFormat format, int64_t rows, int64_t cols, int groups,
                                        int64_t m) {
    const std::string what = "format " + std::to_string(static_cast<int>(format)) + " [" + std::to_string(rows) + ", " +
                             std::to_string(cols) + "] groups " + std::to_string(groups) + " vectors " +
                             std::to_string(m);
    HostWeight w = make_weight(format, rows * groups, cols);
    const WeightRef wg = upload(gpu, w);
    const auto x = random_floats(m * groups * cols);
    Tensor xg = make_tensor(gpu, {m, groups * cols}, x);
    Tensor yg = make_tensor(gpu, {m, rows * groups}, std::vector<float>(m * rows * groups, NAN));
    if (groups == 1) {
        gpu.linear(xg, wg, LinearKind::kF32Out, yg);
    } else {
        gpu.grouped_linear(xg.view({m, groups, cols}), wg, groups, yg);
    }
    const std::vector<float> together = read(gpu, yg);
    for (int64_t v = 0; v < m; ++v) {
        const std::vector<float> row(x.begin() + v * groups * cols, x.begin() + (v + 1) * groups * cols);
        Tensor x1 = make_tensor(gpu, {1, groups * cols}, row), y1 = make_tensor(gpu, {1, rows * groups});
        if (groups == 1) {
            gpu.linear(x1, wg, LinearKind::kF32Out, y1);
        } else {
            gpu.grouped_linear(x1.view({1, groups, cols}), wg, groups, y1);
        }
        const std::vector<float> want(together.begin() + v * rows * groups, together.begin() + (v + 1) * rows * groups);
        expect_same_bits(want, read(gpu, y1), what + " vector " + std::to_string(v));
    }
}

// Several vectors of an L2-resident weight run as one staged block row a vector (kernels_gemv.cu): each vector's
// outputs are the bits of that vector alone, for every weight format of the float32 GEMV, with 1 and with 3 groups
// (grouped_linear).
TEST(CudaGemvVectors, SideBySideEqualOneAtATime) {
    DSV4_REQUIRE_GPU();
    setenv("DSV4_LINEAR_PATH", "gemv", 1);  // the float32 GEMV at any row count (read when a backend is made)
    StreamedAndRegister b(Numerics::kExact);
    unsetenv("DSV4_LINEAR_PATH");
    for (WeightFormat format :
         {WeightFormat::kBF16, WeightFormat::kF32, WeightFormat::kFp8Block, WeightFormat::kFp4Row}) {
        for (int groups : {1, 3}) expect_vectors_equal_one_at_a_time(*b.off, format, 256, 512, groups, 5);
    }
}

// Several vectors of a weight larger than the L2-resident bound (16 MB: the lm head at batch 8) run on the kernel
// that stages the vectors and shares each lane step's activations across four rows (gemv_vectors_kernel): each
// vector's outputs are the bits of that vector alone (its single-vector path), for the BF16, F32 and FP4 weights it
// takes, row counts that leave a partial last block, 1 and 2 groups, 3 and 8 vectors.
TEST(CudaGemvVectors, LargeWeightVectorsEqualOneAtATime) {
    DSV4_REQUIRE_GPU();
    setenv("DSV4_LINEAR_PATH", "gemv", 1);
    StreamedAndRegister b(Numerics::kExact);
    unsetenv("DSV4_LINEAR_PATH");
    expect_vectors_equal_one_at_a_time(*b.off, WeightFormat::kBF16, 4150, 2048, 1, 8);
    expect_vectors_equal_one_at_a_time(*b.off, WeightFormat::kBF16, 2075, 2048, 2, 3);
    expect_vectors_equal_one_at_a_time(*b.off, WeightFormat::kF32, 2101, 2048, 1, 8);
    expect_vectors_equal_one_at_a_time(*b.off, WeightFormat::kFp4Row, 16430, 2048, 1, 8);
}

}  // namespace
}  // namespace dsv4::ops_test
