// The sequence state stored as bf16 or fp8 (StateConfig::kv_dtype, backend/state_format.h) end to end on every
// fixture, on the CPU backend:
// - reference numerics: the reference already rounds K=V rows to FP8 (nope dims, per 64, on bf16 values) + bf16 (rope
//   dims) and indexer keys to FP4 x 2^e per 32 dims (bf16 values): both storage dtypes hold exactly those values (fp8
//   keys unless one key's block exponents span more than ~14 binades), so the logits equal the float32-state ones;
// - exact numerics: the storage rounding is the only change, so the logits stay close to the float32-state ones
//   (closer than the reference numerics are to exact), and every feeding mode (whole prompt, chunks that split
//   windows, prefill then decode) gives the same logits under one dtype (this step's rows are rounded exactly like
//   the ring's, so a query sees the same keys either way).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "golden_support.h"

namespace dsv4::golden {
namespace {

std::vector<float> logits_with(const std::string& name, Numerics numerics, StateDtype dtype, int64_t chunk,
                               int64_t decode_from) {
    Fixture f = open_fixture(name, numerics, "logits.npy", nullptr, dtype);
    return run_logits(f, chunk, decode_from);
}

double argmax_agreement(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
    const auto rows = static_cast<int64_t>(a.size()) / vocab;
    int64_t agree = 0;
    for (int64_t t = 0; t < rows; ++t) {
        auto argmax = [&](const std::vector<float>& v) {
            return std::max_element(v.begin() + t * vocab, v.begin() + (t + 1) * vocab) - (v.begin() + t * vocab);
        };
        agree += argmax(a) == argmax(b);
    }
    return static_cast<double>(agree) / static_cast<double>(rows);
}

// ||got - want|| / ||want||; infinite on NaN.
double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (!std::isfinite(got[i])) return INFINITY;
        const double d = static_cast<double>(got[i]) - want[i];
        num += d * d;
        den += static_cast<double>(want[i]) * want[i];
    }
    return std::sqrt(num / den);
}

size_t differing_bits(const std::vector<float>& a, const std::vector<float>& b) {
    size_t n = a.size() == b.size() ? 0 : std::max(a.size(), b.size());
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0 || std::isnan(a[i]);
    }
    return n;
}

int64_t fixture_vocab(const std::string& name) {
    return read_npy_f32((fixture_dir(name) / "logits.npy").string()).shape[1];
}

class KvDtypeGolden : public ::testing::TestWithParam<std::tuple<std::string, StateDtype>> {};

TEST_P(KvDtypeGolden, ReferenceNumericsMatchFloat32State) {
    const auto& [name, dtype] = GetParam();
    const std::vector<float> f32 = logits_with(name, Numerics::kReference, StateDtype::kF32, 0, -1);
    const std::vector<float> got = logits_with(name, Numerics::kReference, dtype, 0, -1);
    ASSERT_EQ(got.size(), f32.size());
    const double err = relative_max_error(got, f32);
    std::printf(
        "[ kv-dtype ] %s reference numerics, %s vs f32 state: max|diff|/max|logit| = %.3e, %zu of %zu logits "
        "differ in any bit\n",
        name.c_str(), std::string(state_dtype_name(dtype)).c_str(), err, differing_bits(got, f32), got.size());
    EXPECT_LE(err, 1e-5);
}

TEST_P(KvDtypeGolden, ExactNumericsStayCloseToFloat32State) {
    const auto& [name, dtype] = GetParam();
    const std::vector<float> f32 = logits_with(name, Numerics::kExact, StateDtype::kF32, 0, -1);
    const std::vector<float> got = logits_with(name, Numerics::kExact, dtype, 0, -1);
    ASSERT_EQ(got.size(), f32.size());
    const int64_t vocab = fixture_vocab(name);
    const double err = relative_max_error(got, f32), l2 = relative_l2(got, f32);
    const double top1 = argmax_agreement(got, f32, vocab);
    // The scale of this fixture's sensitivity: HF's reference-numerics logits (DeepSeek's roundings, the FP8 cache
    // among them) against its exact ones.
    const std::vector<float> hf_exact = read_npy_f32((fixture_dir(name) / "logits.npy").string()).values;
    const std::vector<float> hf_ref = read_npy_f32((fixture_dir(name) / "logits_reference.npy").string()).values;
    const double ref_l2 = relative_l2(hf_ref, hf_exact);
    std::printf(
        "[ kv-dtype ] %s exact numerics, %s vs f32 state: max|diff|/max|logit| = %.3e, rel. L2 %.3e, top-1 "
        "agreement %.4f (HF reference vs exact: rel. L2 %.3e, max %.3e, top-1 %.4f)\n",
        name.c_str(), std::string(state_dtype_name(dtype)).c_str(), err, l2, top1, ref_l2,
        relative_max_error(hf_ref, hf_exact), argmax_agreement(hf_ref, hf_exact, vocab));
    // Storing the state rounded must move the exact logits less than DeepSeek's own inference roundings (which round
    // the cache the same way and much else): fp8 measured at 0.32-0.49 of the reference's relative L2 distance, bf16
    // at 0.03-0.24 (2026-12 on the three fixtures), with the top-1 agreement above the reference's. max|diff| is
    // chaotic on the random fixtures (a rounded indexer key flips a top-k pick among near-ties), so it is bounded on
    // the tame fixture only: measured 6.8e-2 (fp8) and 2.1e-3 (bf16) of max|logit|.
    EXPECT_LE(l2, dtype == StateDtype::kBf16 ? ref_l2 / 2 : ref_l2);
    EXPECT_GE(top1, std::max(0.85, argmax_agreement(hf_ref, hf_exact, vocab)));
    if (name == "tame_reference") {
        EXPECT_LE(err, dtype == StateDtype::kBf16 ? 5e-3 : 0.1);
        EXPECT_GE(top1, 0.99);
    }
}

TEST_P(KvDtypeGolden, ExactNumericsFeedingModesAgree) {
    const auto& [name, dtype] = GetParam();
    const std::vector<float> whole = logits_with(name, Numerics::kExact, dtype, 0, -1);
    struct Mode {
        const char* name;
        int64_t chunk, decode_from;
    };
    for (const Mode& m : {Mode{"chunk5", 5, -1}, Mode{"chunk37", 37, -1}, Mode{"prefill130_decode", 0, 130}}) {
        const std::vector<float> got = logits_with(name, Numerics::kExact, dtype, m.chunk, m.decode_from);
        const double err = relative_max_error(got, whole);
        std::printf(
            "[ kv-dtype ] %s exact numerics, %s state, %s vs whole: max|diff|/max|logit| = %.3e (%zu logits "
            "differ in any bit)\n",
            name.c_str(), std::string(state_dtype_name(dtype)).c_str(), m.name, err, differing_bits(got, whole));
        EXPECT_LE(err, 1e-6) << m.name;
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KvDtypeGolden,
                         ::testing::Combine(::testing::ValuesIn(fixture_names()),
                                            ::testing::Values(StateDtype::kBf16, StateDtype::kFp8)),
                         [](const auto& param_info) {
                             return std::get<0>(param_info.param) + "_" +
                                    std::string(state_dtype_name(std::get<1>(param_info.param)));
                         });

// Reference numerics with fp8 storage: chunking and decoding reproduce the whole-prompt logits (tame fixture, as in
// golden_reference_test.cpp: the random fixtures' FP8 activation codes make reference runs chaotic elsewhere).
TEST(KvDtypeGoldenReference, Fp8FeedingModesAgree) {
    const std::vector<float> whole = logits_with("tame_reference", Numerics::kReference, StateDtype::kFp8, 0, -1);
    const std::vector<float> chunks = logits_with("tame_reference", Numerics::kReference, StateDtype::kFp8, 37, -1);
    const std::vector<float> decode = logits_with("tame_reference", Numerics::kReference, StateDtype::kFp8, 0, 250);
    EXPECT_LE(relative_max_error(chunks, whole), 1e-6);
    EXPECT_LE(relative_max_error(decode, whole), 1e-6);
}

}  // namespace
}  // namespace dsv4::golden
