// The CUDA backend's sign-split FP4 layout (backend/fp4_layout.h) end to end: weights uploaded to the device are
// permuted there and every code in every column decodes as the CPU decodes the checkpoint; the expert tier's pinned
// host copies hold the permuted words and the CPU backend reads them (its host pairs) bit for bit as the checkpoint;
// synthetic weights hold the seed's codes in the layout on host and device alike. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>

#include "backend/fp4_layout.h"
#include "core/error.h"
#include "op_test_support.h"

namespace dsv4::ops_test {
namespace {

// An FP4 weight in checkpoint form whose code at (r, c) is (r + 5 c) % 16 (every code in every column of a word, -0
// included), with random per-32 scales; cols a multiple of 8, not necessarily of 32 (the last scale group short).
HostWeight every_code_weight(int64_t rows, int64_t cols) {
    HostWeight w;
    w.format = WeightFormat::kFp4Row;
    w.dtype = DType::kI8;
    w.rows = rows;
    w.cols = cols;
    w.block_cols = 32;
    const int64_t groups = (cols + 31) / 32;
    w.shape = {rows, cols / 2};
    w.scale_shape = {rows, groups};
    w.data.assign(rows * cols / 2, 0);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
            const auto code = static_cast<uint8_t>((r + 5 * c) % 16);
            w.data[(r * cols + c) / 2] |= static_cast<uint8_t>(c % 2 == 0 ? code : code << 4);
        }
    }
    std::uniform_int_distribution<int> scale(120, 132);
    w.scales.resize(rows * groups);
    for (auto& s : w.scales) s = static_cast<uint8_t>(scale(rng()));
    return w;
}

// y = x W^T on `b` for m rows of x (kF32Out: no activation rounding).
std::vector<float> linear_f32(Backend& b, const WeightRef& w, const std::vector<float>& x, int64_t m) {
    Tensor xt = make_tensor(b, {m, w.cols}, x), yt = make_tensor(b, {m, w.rows});
    b.linear(xt, w, LinearKind::kF32Out, yt);
    return read(b, yt);
}

TEST(CudaFp4Layout, EveryCodeInEveryColumnMatchesTheCpu) {
    DSV4_REQUIRE_GPU();
    struct Shape {
        int64_t rows, cols, m;
    };
    // cols 4096: the GEMVs (decode8_fp4_word) at 1 and 5 rows; cols 200: no 32-wide GEMV, the element path
    // (weight_at, fp4_code_at); 300 rows: the batched paths.
    for (const Shape s : {Shape{64, 4096, 1}, Shape{64, 4096, 5}, Shape{48, 200, 3}, Shape{96, 512, 300}}) {
        Pair p(Numerics::kExact);
        p.step(simple_batch(s.m));
        const HostWeight w = every_code_weight(s.rows, s.cols);
        const WeightRef wc = upload(*p.cpu, w), wg = upload(*p.gpu, w);
        EXPECT_EQ(wg.fp4_layout, Fp4Layout::kSignSplit);
        EXPECT_EQ(wc.fp4_layout, Fp4Layout::kCheckpoint);
        const std::vector<float> x = random_floats(s.m * s.cols);
        const double err = rel_l2(linear_f32(*p.gpu, wg, x, s.m), linear_f32(*p.cpu, wc, x, s.m));
        EXPECT_LE(err, kExactTol) << "[" << s.rows << " x " << s.cols << "] m " << s.m;
    }
}

TEST(CudaFp4Layout, RowsMustBeWholeWords) {
    DSV4_REQUIRE_GPU();
    auto gpu = make_cuda_backend(Numerics::kExact);
    const HostWeight w = every_code_weight(4, 12);  // 6 bytes a row: not whole 32-bit words
    EXPECT_THROW(upload(*gpu, w), Error);
}

TEST(CudaFp4Layout, HostCopiesAreSignSplitAndTheCpuReadsThem) {
    DSV4_REQUIRE_GPU();
    auto gpu = make_cuda_backend(Numerics::kExact);
    auto cpu = make_cpu_backend(Numerics::kReference, 0);  // as an expert tier computes host pairs
    const HostWeight w = every_code_weight(40, 1024);
    const TensorView scale = w.scale_view();
    const WeightRef host = gpu->upload_host_linear(w.view(), &scale, w.format, w.rows, w.cols, 1, 32);
    ASSERT_EQ(host.fp4_layout, Fp4Layout::kSignSplit);
    std::vector<uint8_t> want(w.data.size());
    fp4_words_from_checkpoint(w.data.data(), want.data(), static_cast<int64_t>(want.size() / 4));
    EXPECT_EQ(std::memcmp(host.data, want.data(), want.size()), 0) << "the pinned copy's words";
    EXPECT_EQ(std::memcmp(host.scales, w.scales.data(), w.scales.size()), 0) << "scales are copied as they are";

    const WeightRef own = upload(*cpu, w);
    const std::vector<float> x = random_floats(3 * w.cols);
    const std::vector<float> got = linear_f32(*cpu, host, x, 3), expected = linear_f32(*cpu, own, x, 3);
    for (float v : got) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
}

// The synthetic fill's value of element e (kernels_synthetic.cu normal_at: a hash, then Box-Muller in float), with
// the host's libm: a code may differ where a value sits within an ulp of an e2m1 rounding boundary.
uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}
float normal_at(uint64_t seed, uint64_t i) {
    const uint64_t h = mix64(seed ^ mix64(i));
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) * (1.0f / 16777217.0f);
    const float u2 = static_cast<float>((h >> 16) & 0xffffffu) * (1.0f / 16777216.0f);
    const auto c = static_cast<float>(std::cos(std::numbers::pi * static_cast<double>(2.0f * u2)));
    return std::sqrt(-2.0f * std::log(u1)) * c;
}

TEST(CudaFp4Layout, SyntheticWeightsHoldTheSeedsCodes) {
    DSV4_REQUIRE_GPU();
    Pair p(Numerics::kExact);  // its GPU side has the step scratch synthetic_host_linear builds in
    const int64_t rows = 24, cols = 2048;
    const float stddev = 0.03f;
    const uint64_t seed = 4242;
    const WeightRef host = p.gpu->synthetic_host_linear(WeightFormat::kFp4Row, rows, cols, stddev, seed);
    ASSERT_EQ(host.fp4_layout, Fp4Layout::kSignSplit);
    std::vector<uint8_t> codes(rows * cols / 2);
    fp4_words_to_checkpoint(host.data, codes.data(), static_cast<int64_t>(codes.size() / 4));
    const int e = static_cast<int>(std::ceil(std::log2(4.0f * stddev / 6.0f)));  // cuda_synthetic.cpp's scale
    ASSERT_EQ(host.scales[0], e + 127);
    int64_t mismatches = 0, nonzero = 0;
    for (int64_t i = 0; i < rows * cols; ++i) {
        const float v = std::fmin(std::fmax(normal_at(seed, i) * stddev * std::ldexp(1.0f, -e), -6.0f), 6.0f);
        uint8_t want = encode_e2m1(v);
        if (want == 8) want = 0;  // the fill writes +0 for a value that rounds to -0
        const uint8_t got = e2m1_code_at(codes.data(), i);
        mismatches += got != want;
        nonzero += (got & 7) != 0;
    }
    EXPECT_LE(mismatches, rows * cols / 1000) << "codes other than the seed's";
    EXPECT_GE(nonzero, rows * cols / 2);

    // The device copy (the same kernel and seed) read by the GPU's kernels equals the CPU reading the host copy.
    const WeightRef dev = p.gpu->synthetic_linear(WeightFormat::kFp4Row, rows, cols, stddev, seed);
    ASSERT_EQ(dev.fp4_layout, Fp4Layout::kSignSplit);
    for (int64_t m : {1, 4}) {
        p.step(simple_batch(m));
        const std::vector<float> x = random_floats(m * cols);
        EXPECT_LE(rel_l2(linear_f32(*p.gpu, dev, x, m), linear_f32(*p.cpu, host, x, m)), kExactTol) << "m " << m;
    }
}

}  // namespace
}  // namespace dsv4::ops_test
