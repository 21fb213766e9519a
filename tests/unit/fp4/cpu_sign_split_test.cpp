// The CPU backend reads FP4 weights in the CUDA backend's sign-split layout (WeightRef::fp4_layout,
// backend/fp4_layout.h) as it reads the checkpoint's: an expert tier on a GPU hands its pinned host experts,
// sign-split, to a CPU backend for the host pairs. The same codes in either layout must give the same bits, in exact
// numerics (the row dot) and in reference numerics (the decoded row); a sign-split weight read as the checkpoint's must
// not.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/fp4_layout.h"
#include "core/error.h"

namespace dsv4 {
namespace {

constexpr int64_t kRows = 40, kCols = 256, kTokens = 3;

struct Fp4Case {
    std::vector<uint8_t> codes, scales;  // checkpoint form
    std::vector<int64_t> shape = {kRows, kCols / 2}, scale_shape = {kRows, kCols / 32};
    std::vector<float> x;
};

Fp4Case random_case(uint32_t seed) {
    std::mt19937 rng(seed);
    Fp4Case c;
    c.codes.resize(kRows * kCols / 2);
    for (auto& b : c.codes) b = static_cast<uint8_t>(rng());
    c.scales.resize(kRows * kCols / 32);
    for (auto& s : c.scales) s = static_cast<uint8_t>(120 + rng() % 12);
    std::normal_distribution<float> normal;
    c.x.resize(kTokens * kCols);
    for (auto& v : c.x) v = normal(rng);
    return c;
}

std::vector<float> run_linear(Backend& b, const WeightRef& w, const std::vector<float>& x) {
    Tensor xt = b.alloc(DType::kF32, {kTokens, kCols}), yt = b.alloc(DType::kF32, {kTokens, kRows});
    b.from_host(xt, x.data());
    b.linear(xt, w, LinearKind::kQuantized, yt);
    std::vector<float> y(kTokens * kRows);
    b.to_host(yt, y.data());
    return y;
}

class CpuSignSplit : public ::testing::TestWithParam<Numerics> {};

TEST_P(CpuSignSplit, SameCodesSameBits) {
    auto cpu = make_cpu_backend(GetParam(), 2);
    const Fp4Case c = random_case(7);
    const TensorView codes{c.codes.data(), DType::kI8, c.shape, c.codes.size()};
    const TensorView scales{c.scales.data(), DType::kF8E8M0, c.scale_shape, c.scales.size()};
    const WeightRef checkpoint = cpu->upload_linear(codes, &scales, WeightFormat::kFp4Row, kRows, kCols, 1, 32);
    ASSERT_EQ(checkpoint.fp4_layout, Fp4Layout::kCheckpoint);

    std::vector<uint8_t> split(c.codes.size());
    fp4_words_from_checkpoint(c.codes.data(), split.data(), static_cast<int64_t>(split.size() / 4));
    ASSERT_NE(split, c.codes);
    WeightRef sign_split = checkpoint;  // the CPU's own scales; the codes as a CUDA backend's host expert holds them
    sign_split.data = split.data();
    sign_split.fp4_layout = Fp4Layout::kSignSplit;

    const std::vector<float> want = run_linear(*cpu, checkpoint, c.x);
    const std::vector<float> got = run_linear(*cpu, sign_split, c.x);
    int nonzero = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(std::isfinite(want[i]) && std::isfinite(got[i])) << i;
        nonzero += want[i] != 0.0f;
    }
    EXPECT_GT(nonzero, static_cast<int>(want.size()) / 2);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);

    // The sign-split bytes read as checkpoint codes are other weights: the layout flag is what makes them right.
    WeightRef misread = sign_split;
    misread.fp4_layout = Fp4Layout::kCheckpoint;
    EXPECT_NE(std::memcmp(run_linear(*cpu, misread, c.x).data(), want.data(), want.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Numerics, CpuSignSplit, ::testing::Values(Numerics::kExact, Numerics::kReference));

TEST(CpuSignSplit, RowsMustBeWholeWords) {
    auto cpu = make_cpu_backend(Numerics::kExact, 1);
    std::vector<uint8_t> codes(2 * 6, 0x11), scales(2, 127);
    std::vector<float> x(12, 1.0f), y(2);
    WeightRef w;
    w.format = WeightFormat::kFp4Row;
    w.rows = 2;
    w.cols = 12;
    w.data = codes.data();
    w.scales = scales.data();
    w.scale_cols = 1;
    w.block_cols = 32;
    w.fp4_layout = Fp4Layout::kSignSplit;
    Tensor xt = cpu->alloc(DType::kF32, {1, 12}), yt = cpu->alloc(DType::kF32, {1, 2});
    cpu->from_host(xt, x.data());
    EXPECT_THROW(cpu->linear(xt, w, LinearKind::kF32Out, yt), Error);
    w.fp4_layout = Fp4Layout::kCheckpoint;  // the checkpoint's own layout has no such rule
    cpu->linear(xt, w, LinearKind::kF32Out, yt);
    cpu->to_host(yt, y.data());
    EXPECT_EQ(y[0], 12.0f * 0.5f);  // code 1 (0.5) everywhere, scale 2^0
}

}  // namespace
}  // namespace dsv4
