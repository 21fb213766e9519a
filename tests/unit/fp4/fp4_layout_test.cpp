// backend/fp4_layout.h on the host: the sign-split permutation and its inverse, the per-column code, the host model
// of PTX prmt, and the 7-instruction expansion against (a) the checkpoint-nibble expansion it replaced
// (cuda_common.cuh's expand_e2m1_word up to 14a9685, written out below with CUDA's __byte_perm) and (b) a per-code
// reference, for every magnitude table the expert kernels build (build_lut) and the GEMVs use.
#include "backend/fp4_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/float_formats.h"

namespace dsv4 {
namespace {

constexpr int kRandomWords = 100000;

uint32_t nibble(uint32_t w, int i) {
    return (w >> (4 * i)) & 0xfu;
}

// CUDA's __byte_perm(x, y, s): byte n of the result is byte s[4n+2:4n] of {x, y}; bit 4n+3 is ignored.
uint32_t cuda_byte_perm(uint32_t x, uint32_t y, uint32_t s) {
    const uint64_t bytes = static_cast<uint64_t>(y) << 32 | x;
    uint32_t out = 0;
    for (int n = 0; n < 4; ++n) out |= static_cast<uint32_t>((bytes >> (8 * ((s >> (4 * n)) & 7u))) & 0xffu) << (8 * n);
    return out;
}

// The expansion of a checkpoint word before the sign-split layout (cuda_common.cuh expand_e2m1_word, 14a9685).
Fp4Bytes old_expand_e2m1_word(uint32_t w, uint32_t lo, uint32_t hi) {
    const uint32_t mag_lo = cuda_byte_perm(lo, hi, w & 0x7777u);
    const uint32_t mag_hi = cuda_byte_perm(lo, hi, (w >> 16) & 0x7777u);
    const uint32_t sign_lo = cuda_byte_perm(0x8000u, 0u, (w >> 3) & 0x1111u);
    const uint32_t sign_hi = cuda_byte_perm(0x8000u, 0u, (w >> 19) & 0x1111u);
    return {mag_lo | sign_lo, mag_hi | sign_hi};
}

// Code by code: byte i of the result is the table's byte of code i's magnitude with the code's sign as bit 7.
Fp4Bytes reference_expand(uint32_t checkpoint, uint32_t lo, uint32_t hi) {
    const uint64_t table = static_cast<uint64_t>(hi) << 32 | lo;
    uint32_t out[2] = {0, 0};
    for (int i = 0; i < 8; ++i) {
        const uint32_t code = nibble(checkpoint, i);
        const uint32_t byte = static_cast<uint32_t>((table >> (8 * (code & 7u))) & 0xffu) | (code & 8u) << 4;
        out[i / 4] |= byte << (8 * (i % 4));
    }
    return {out[0], out[1]};
}

// The byte tables of the expert kernels' LUT (expert_gemm_tile.cuh build_lut: the e4m3 codes, RNE and saturated, of
// each magnitude times 2^k for k = -13 .. 6), the GEMVs' unscaled table and the per-pair GEMV's 2^-6 one.
std::vector<std::array<uint32_t, 2>> expansion_tables() {
    static constexpr float kMagnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    std::vector<std::array<uint32_t, 2>> tables;
    for (int k = -13; k <= 6; ++k) {
        std::array<uint32_t, 2> t = {0, 0};
        for (int m = 0; m < 8; ++m) {
            t[m / 4] |= static_cast<uint32_t>(encode_e4m3(std::ldexp(kMagnitudes[m], k))) << (8 * (m % 4));
        }
        tables.push_back(t);
    }
    tables.push_back({kE2m1E4m3Lo, kE2m1E4m3Hi});
    tables.push_back({kE2m1E4m3Down6Lo, kE2m1E4m3Down6Hi});
    return tables;
}

// Words that put every code in every position (the others random), all-equal words, single bits and random words.
std::vector<uint32_t> test_words(std::mt19937& rng) {
    std::vector<uint32_t> words = {0u,          0xffffffffu, 0x88888888u, 0x77777777u, 0x80808080u,
                                   0x08080808u, 0x12345678u, 0x87654321u, 0xfedcba98u, 0x01234567u};
    for (int b = 0; b < 32; ++b) words.push_back(1u << b);
    for (uint32_t code = 0; code < 16; ++code) {
        words.push_back(code * 0x11111111u);
        for (int i = 0; i < 8; ++i) {
            for (int rep = 0; rep < 4; ++rep) words.push_back((rng() & ~(0xfu << (4 * i))) | code << (4 * i));
        }
    }
    for (int i = 0; i < kRandomWords; ++i) words.push_back(static_cast<uint32_t>(rng()));
    return words;
}

TEST(Fp4Layout, SignsLandWhereTheLayoutSays) {
    constexpr int kSignBit[8] = {7, 15, 23, 31, 3, 11, 19, 27};  // the header's table, written out
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(fp4_word_from_checkpoint(8u << (4 * i)), 1u << kSignBit[i]) << "sign of code " << i;
        EXPECT_EQ(fp4_word_from_checkpoint(7u << (4 * i)), 7u << (4 * i)) << "magnitude of code " << i;
        EXPECT_EQ(fp4_word_to_checkpoint(1u << kSignBit[i]), 8u << (4 * i)) << "sign of code " << i;
    }
}

TEST(Fp4Layout, PermutationIsABijectionAndItsInverse) {
    std::mt19937 rng(1);
    for (uint32_t w : test_words(rng)) {
        ASSERT_EQ(fp4_word_to_checkpoint(fp4_word_from_checkpoint(w)), w) << std::hex << w;
        ASSERT_EQ(fp4_word_from_checkpoint(fp4_word_to_checkpoint(w)), w) << std::hex << w;
    }
    // Every pattern of each half (codes 0..3, codes 4..7) and of the two halves' sign nibbles together.
    for (uint32_t half = 0; half < (1u << 16); ++half) {
        for (const uint32_t w : {half, half << 16, (half & 0x8888u) * 0x10001u}) {
            ASSERT_EQ(fp4_word_to_checkpoint(fp4_word_from_checkpoint(w)), w) << std::hex << w;
            ASSERT_EQ(fp4_word_from_checkpoint(fp4_word_to_checkpoint(w)), w) << std::hex << w;
        }
    }
}

TEST(Fp4Layout, CodeAtIsTheCheckpointNibble) {
    std::mt19937 rng(2);
    for (uint32_t w : test_words(rng)) {
        const uint32_t s = fp4_word_from_checkpoint(w);
        for (int i = 0; i < 8; ++i) ASSERT_EQ(fp4_code_at(s, i), nibble(w, i)) << std::hex << w << " column " << i;
    }
}

TEST(Fp4Layout, HostPrmtFollowsPtx) {
    const uint32_t a = 0x33221100u, b = 0x77665544u;
    EXPECT_EQ(prmt_b32(a, b, 0x3210u), a);
    EXPECT_EQ(prmt_b32(a, b, 0x7654u), b);
    EXPECT_EQ(prmt_b32(a, b, 0x0426u), 0x00442266u);
    EXPECT_EQ(prmt_b32(a, b, 0xabcd3210u), a) << "only the low 16 bits select";
    // Bit 3 of a selector nibble: the selected byte's top bit in all eight bits.
    EXPECT_EQ(prmt_b32(0x00008000u, 0x7f000000u, 0x0f09u), 0x000000ffu);
    EXPECT_EQ(prmt_b32(0x00008000u, 0xff000000u, 0x0f09u), 0x00ff00ffu);
    for (uint32_t s = 0; s < (1u << 16); ++s) {  // without sign bits it is CUDA's __byte_perm
        const uint32_t plain = s & 0x7777u;
        ASSERT_EQ(prmt_b32(a, b, plain), cuda_byte_perm(a, b, plain)) << std::hex << plain;
    }
}

void expect_same(const Fp4Bytes& got, const Fp4Bytes& want, uint32_t checkpoint, const std::array<uint32_t, 2>& t,
                 const char* what) {
    ASSERT_TRUE(got.lo == want.lo && got.hi == want.hi)
        << what << ": word " << std::hex << checkpoint << " table " << t[0] << " " << t[1] << ": got " << got.lo << " "
        << got.hi << ", want " << want.lo << " " << want.hi;
}

TEST(Fp4Layout, ExpansionMatchesTheCheckpointExpansion) {
    std::mt19937 rng(3);
    const std::vector<uint32_t> words = test_words(rng);
    for (const auto& t : expansion_tables()) {
        for (uint32_t w : words) {
            const Fp4Bytes want = reference_expand(w, t[0], t[1]);
            ASSERT_NO_FATAL_FAILURE(expect_same(old_expand_e2m1_word(w, t[0], t[1]), want, w, t, "old vs reference"));
            ASSERT_NO_FATAL_FAILURE(
                expect_same(expand_fp4_word(fp4_word_from_checkpoint(w), t[0], t[1]), want, w, t, "sign-split"));
        }
        // Every pattern of codes 0..3 and of codes 4..7 (the other half random).
        for (uint32_t half = 0; half < (1u << 16); ++half) {
            for (const uint32_t w : {half | (static_cast<uint32_t>(rng()) & 0xffff0000u),
                                     half << 16 | (static_cast<uint32_t>(rng()) & 0xffffu)}) {
                ASSERT_NO_FATAL_FAILURE(expect_same(expand_fp4_word(fp4_word_from_checkpoint(w), t[0], t[1]),
                                                    old_expand_e2m1_word(w, t[0], t[1]), w, t, "sign-split vs old"));
            }
        }
    }
}

// The tables hold what their comments say: the e2m1 magnitudes, and the same times 2^-6.
TEST(Fp4Layout, TablesDecodeToTheMagnitudes) {
    static constexpr float kMagnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const uint64_t plain = static_cast<uint64_t>(kE2m1E4m3Hi) << 32 | kE2m1E4m3Lo;
    const uint64_t down6 = static_cast<uint64_t>(kE2m1E4m3Down6Hi) << 32 | kE2m1E4m3Down6Lo;
    for (int m = 0; m < 8; ++m) {
        EXPECT_EQ(decode_e4m3(static_cast<uint8_t>(plain >> (8 * m))), kMagnitudes[m]) << m;
        EXPECT_EQ(decode_e4m3(static_cast<uint8_t>(down6 >> (8 * m))), std::ldexp(kMagnitudes[m], -6)) << m;
        EXPECT_EQ(decode_e2m1(static_cast<uint8_t>(m)), kMagnitudes[m]) << m;
    }
}

TEST(Fp4Layout, HostWordLoopsAtAnyAlignment) {
    std::mt19937 rng(4);
    constexpr int kWords = 1000;
    std::vector<uint8_t> src(4 * kWords + 1), dst(4 * kWords + 1), back(4 * kWords + 1);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    fp4_words_from_checkpoint(src.data() + 1, dst.data() + 1, kWords);
    for (int i = 0; i < kWords; ++i) {
        uint32_t w, s;
        std::memcpy(&w, src.data() + 1 + 4 * i, 4);
        std::memcpy(&s, dst.data() + 1 + 4 * i, 4);
        ASSERT_EQ(s, fp4_word_from_checkpoint(w)) << i;
    }
    fp4_words_to_checkpoint(dst.data() + 1, back.data() + 1, kWords);
    EXPECT_TRUE(std::equal(src.begin() + 1, src.end(), back.begin() + 1));
    fp4_words_to_checkpoint(dst.data() + 1, dst.data() + 1, kWords);  // in place
    EXPECT_TRUE(std::equal(src.begin() + 1, src.end(), dst.begin() + 1));
}

}  // namespace
}  // namespace dsv4
