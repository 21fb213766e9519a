// The FP8 dialects on the GPU (issue 20): every e4m3 code of both dialects through the weight-decoding kernels
// (generic, GEMV, bf16 tensor-core GEMM) against the CPU backend in the same dialect; FNUZ activation quantisation in
// reference numerics; and FNUZ kept off the OCP tensor-core paths. The hardware's e4m3 is OCP: FNUZ codes are decoded
// in software (backend/cuda/cuda_common.cuh). Skipped without a GPU (the path-choice test runs anywhere).
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cuda/linear_plan.h"
#include "core/error.h"
#include "core/fp8_convert.h"
#include "op_test_support.h"

namespace dsv4::ops_test {
namespace {

// [256, 256] FP8 weight whose every column holds every code of the dialect once (W[r, j] = code (r + j) % 256), the
// dialect's NaN codes replaced by 0, one scale per 128x128 block from a range of binades.
HostWeight every_code_weight(Fp8Dialect dialect) {
    HostWeight w;
    w.format = WeightFormat::kFp8Block;
    w.rows = w.cols = 256;
    w.block_rows = w.block_cols = 128;
    w.dtype = DType::kF8E4M3;
    w.shape = {256, 256};
    w.scale_shape = {2, 2};
    w.scales = {120, 127, 131, 118};
    w.data.resize(256 * 256);
    for (int r = 0; r < 256; ++r) {
        for (int j = 0; j < 256; ++j) {
            const auto code = static_cast<uint8_t>((r + j) % 256);
            w.data[r * 256 + j] = std::isnan(decode_e4m3(code, dialect)) ? uint8_t{0} : code;
        }
    }
    return w;
}

// The CPU backend (exact numerics for fast) and a CUDA backend in `dialect` whose FP8 weights never take the FP8
// tensor cores (so both dialects run the same decoding kernels: GEMV, generic, bf16 GEMM).
Pair decoding_pair(Numerics numerics, Fp8Dialect dialect) {
    Pair p(numerics, op_config(), 2, 16, StateDtype::kF32, 0, dialect);
    CudaOptions options = cuda_options_from_env({});
    options.fp8_dialect = dialect;
    options.min_fp8_rows = int64_t{1} << 40;
    options.fp8_gemv = false;
    p.gpu = make_cuda_backend(numerics, options);
    StateConfig s;
    s.max_slots = 2;
    s.num_blocks = 16;
    s.block_tokens = 256;
    p.gpu->create_state(op_config(), s);
    return p;
}

TEST(CudaFp8Dialect, EveryCodeDecodesAsOnTheHost) {
    DSV4_REQUIRE_GPU();
    for (Fp8Dialect dialect : {Fp8Dialect::kOcp, Fp8Dialect::kFnuz}) {
        for (Numerics numerics : {Numerics::kExact, Numerics::kFast}) {
            for (int64_t m : {int64_t{1}, int64_t{7}, int64_t{96}}) {  // GEMV, generic / GEMV batch, tensor cores
                Pair p = decoding_pair(numerics, dialect);
                p.step(simple_batch(m));
                const HostWeight w = every_code_weight(dialect);
                const WeightRef wc = upload(*p.cpu, w), wg = upload(*p.gpu, w);
                ASSERT_EQ(wg.fp8_dialect, dialect);
                const std::vector<float> x = random_floats(m * 256);
                Tensor xc = make_tensor(*p.cpu, {m, 256}, x), yc = make_tensor(*p.cpu, {m, 256});
                Tensor xg = make_tensor(*p.gpu, {m, 256}, x), yg = make_tensor(*p.gpu, {m, 256});
                p.cpu->linear(xc, wc, LinearKind::kF32Out, yc);
                p.gpu->linear(xg, wg, LinearKind::kF32Out, yg);
                const double err = rel_l2(read(*p.gpu, yg), read(*p.cpu, yc));
                EXPECT_LE(err, tolerance(numerics))
                    << fp8_dialect_name(dialect) << " " << numerics_name(numerics) << " m " << m;
            }
        }
    }
}

// A dialect's NaN code makes its row's outputs NaN on the GPU, and only there: 0x80 in FNUZ (OCP: -0), 0x7F in OCP
// (FNUZ: 240).
TEST(CudaFp8Dialect, NanCodesAreTheDialects) {
    DSV4_REQUIRE_GPU();
    for (Fp8Dialect dialect : {Fp8Dialect::kOcp, Fp8Dialect::kFnuz}) {
        Pair p(Numerics::kExact, op_config(), 2, 16, StateDtype::kF32, 0, dialect);
        p.step(simple_batch(1));
        HostWeight w = make_weight(WeightFormat::kFp8Block, 4, 128);
        std::replace(w.data.begin(), w.data.end(), uint8_t{0x80}, uint8_t{0x00});
        std::replace(w.data.begin(), w.data.end(), uint8_t{0x7F}, uint8_t{0x7E});
        w.data[0 * 128 + 5] = 0x80;
        w.data[1 * 128 + 9] = 0x7F;
        const WeightRef wg = upload(*p.gpu, w);
        Tensor x = make_tensor(*p.gpu, {1, 128}, random_floats(128)), y = make_tensor(*p.gpu, {1, 4});
        p.gpu->linear(x, wg, LinearKind::kF32Out, y);
        const std::vector<float> out = read(*p.gpu, y);
        const bool fnuz = dialect == Fp8Dialect::kFnuz;
        EXPECT_EQ(std::isnan(out[0]), fnuz) << "0x80";
        EXPECT_EQ(std::isnan(out[1]), !fnuz) << "0x7F";
        EXPECT_TRUE(std::isfinite(out[2]) && std::isfinite(out[3]));
    }
}

// Reference numerics quantise activations per 128 to FNUZ with max 240 on the device as core does on the host.
TEST(CudaFp8Dialect, ReferenceActivationQuantisationInFnuz) {
    DSV4_REQUIRE_GPU();
    Pair p(Numerics::kReference, op_config(), 2, 16, StateDtype::kF32, 0, Fp8Dialect::kFnuz);
    for (int64_t m : {int64_t{1}, int64_t{33}}) {
        p.step(simple_batch(m));
        const HostWeight w = make_weight(WeightFormat::kFp8Block, 256, 512);
        // The OCP checkpoint's bytes are what make_weight writes; the backends hold FNUZ: convert as the loader does.
        HostWeight f = w;
        convert_fp8_blocks(w.data.data(), w.scales.data(), {256, 512, 128, 128}, Fp8Dialect::kOcp, Fp8Dialect::kFnuz,
                           f.data.data(), f.scales.data());
        const WeightRef wc = upload(*p.cpu, f), wg = upload(*p.gpu, f);
        const std::vector<float> x = random_floats(m * 512, 3.0f);
        Tensor xc = make_tensor(*p.cpu, {m, 512}, x), yc = make_tensor(*p.cpu, {m, 256});
        Tensor xg = make_tensor(*p.gpu, {m, 512}, x), yg = make_tensor(*p.gpu, {m, 256});
        p.cpu->linear(xc, wc, LinearKind::kQuantized, yc);
        p.gpu->linear(xg, wg, LinearKind::kQuantized, yg);
        EXPECT_LE(rel_l2(read(*p.gpu, yg), read(*p.cpu, yc)), kReferenceTol) << "m " << m;
    }
}

// FNUZ weights never reach the OCP FP8 tensor cores: the chooser falls back to the bf16 GEMM, and forcing an FP8
// path is an error naming the reason. Host code only: runs without a GPU.
TEST(CudaFp8Dialect, FnuzStaysOffTheOcpTensorCorePaths) {
    WeightRef w;
    w.format = WeightFormat::kFp8Block;
    w.rows = 1024;
    w.cols = 4096;
    w.block_rows = w.block_cols = 128;
    w.fp8_dialect = Fp8Dialect::kFnuz;
    const cuda::LinearTuning tuning{};
    const cuda::LinearProblem p{Numerics::kFast, w, 512, 4096};
    EXPECT_EQ(cuda::choose_linear_path(p, tuning, ""), cuda::LinearPath::kGemmBf16);
    try {
        cuda::choose_linear_path(p, tuning, "fp8_lt");
        ADD_FAILURE() << "fp8_lt accepted FNUZ weights";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("OCP FP8 weights"), std::string::npos) << e.what();
    }
    cuda::MoeProblem moe{Numerics::kFast, WeightFormat::kFp4Row, 4096, 4096, 2048, Fp8Dialect::kFnuz};
    EXPECT_EQ(cuda::choose_moe_path(moe, {}, ""), cuda::MoePath::kGroupedBf16);
    moe.dialect = Fp8Dialect::kOcp;
    EXPECT_EQ(cuda::choose_moe_path(moe, {}, ""), cuda::MoePath::kGroupedFp8);
}

}  // namespace
}  // namespace dsv4::ops_test
