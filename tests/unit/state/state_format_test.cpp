// The stored-row formats of backend/state_format.h: the fp8_ds_mla K=V record and the FP8 indexer key are byte-exact
// to the reference roundings (core/quant_sim.h), bf16 rows round to nearest even, and the dtype names parse.
#include "state/state_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/float_formats.h"
#include "core/quant_sim.h"

namespace dsv4 {
namespace {

ModelConfig dims(int head_dim, int rope_dim, int index_head_dim) {
    ModelConfig c;
    c.head_dim = head_dim;
    c.rope_head_dim = rope_dim;
    c.index_head_dim = index_head_dim;
    return c;
}

// Random rows that exercise every block shape: normal values, whole-zero blocks, tiny blocks (below the 1e-4 amax
// floor), huge values, subnormals, mixed magnitudes within a block, and signed zeros.
std::vector<float> random_row(std::mt19937& rng, int n, int kind) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> exponent(-30.0f, 30.0f);
    std::vector<float> x(n);
    for (int j = 0; j < n; ++j) {
        const float v = normal(rng);
        switch (kind % 6) {
            case 0:
                x[j] = v;
                break;
            case 1:
                x[j] = (j / 64) % 2 == 0 ? 0.0f : v * 3.0f;
                break;  // zero blocks
            case 2:
                x[j] = v * 1e-6f;
                break;  // under the amax floor
            case 3:
                x[j] = v * 1e30f;
                break;  // huge
            case 4:
                x[j] = v * std::exp2(exponent(rng));
                break;  // mixed magnitudes
            default:
                x[j] = j % 3 == 0 ? -0.0f : v * std::numeric_limits<float>::denorm_min() * 1000.0f;
                break;
        }
    }
    return x;
}

bool same_bits(float a, float b) {
    return std::memcmp(&a, &b, sizeof(float)) == 0;
}

constexpr Fp8Dialect kDialects[] = {Fp8Dialect::kOcp, Fp8Dialect::kFnuz};

TEST(StateFormat, Fp8KvRecordIsTheReferenceRounding) {
    std::mt19937 rng(11);
    for (auto [d, r, dialect] : {std::tuple{512, 64, Fp8Dialect::kOcp}, std::tuple{128, 64, Fp8Dialect::kOcp},
                                 std::tuple{80, 16, Fp8Dialect::kOcp}, std::tuple{64, 0, Fp8Dialect::kOcp},
                                 std::tuple{512, 64, Fp8Dialect::kFnuz}, std::tuple{80, 16, Fp8Dialect::kFnuz}}) {
        const Fp8Quant quant = kv_record_fp8_quant(dialect);
        const StateRowFormat f = kv_row_format(StateDtype::kFp8, dims(d, r, 128), quant);
        const int nope = d - r;
        ASSERT_EQ(f.bytes(), nope + 2 * r + (nope / 64 + 7) / 8 * 8);
        for (int kind = 0; kind < 60; ++kind) {
            const std::vector<float> x = random_row(rng, d, kind);
            std::vector<uint8_t> record(f.bytes(), 0xAB);
            f.encode(x.data(), record.data());
            // Codes and scale bytes: act_quant_fp8 of the bf16-rounded nope dims.
            std::vector<float> rounded(x.begin(), x.begin() + nope);
            for (float& v : rounded) v = round_to_bf16(v);
            std::vector<uint8_t> codes(nope), scales((nope + 63) / 64);
            act_quant_fp8(rounded.data(), nope, 64, quant, codes.data(), scales.data());
            for (int j = 0; j < nope; ++j) {
                ASSERT_EQ(record[j], codes[j]) << "d " << d << " kind " << kind << " j " << j;
            }
            for (size_t b = 0; b < scales.size(); ++b) ASSERT_EQ(record[nope + 2 * r + b], scales[b]);
            for (int64_t p = nope + 2 * r + static_cast<int64_t>(scales.size()); p < f.bytes(); ++p) {
                ASSERT_EQ(record[p], 0) << "padding";
            }
            // Decoded: exactly fp8_sim_bf16_input(nope) ++ bf16(rope).
            std::vector<float> want(x);
            fp8_sim_bf16_input(want.data(), nope, 64, quant);
            for (int j = nope; j < d; ++j) want[j] = round_to_bf16(x[j]);
            std::vector<float> got(d);
            f.decode(record.data(), got.data());
            for (int j = 0; j < d; ++j) {
                ASSERT_TRUE(same_bits(got[j], want[j])) << "d " << d << " kind " << kind << " j " << j << ": " << got[j]
                                                        << " vs " << want[j] << " (x " << x[j] << ")";
            }
        }
    }
}

TEST(StateFormat, Fp8KvRecordNanAndInfPolicy) {
    const StateRowFormat f = kv_row_format(StateDtype::kFp8, dims(128, 64, 128), kOcpQuant);
    std::vector<float> x(128, 0.5f);
    x[3] = std::numeric_limits<float>::quiet_NaN();
    x[4] = -std::numeric_limits<float>::quiet_NaN();
    x[70] = std::numeric_limits<float>::infinity();  // rope dim: bf16 inf
    x[10] = 256.0f;
    std::vector<uint8_t> record(f.bytes());
    f.encode(x.data(), record.data());
    EXPECT_EQ(record[3], 0x7F);  // e4m3 NaN, sign kept
    EXPECT_EQ(record[4], 0xFF);
    EXPECT_EQ(record[64 + 2 * 64], pow2_scale_exponent(256.0f, kFp8AmaxFloor, 448.0f) + 127);  // NaN not in the amax
    std::vector<float> got(128);
    f.decode(record.data(), got.data());
    EXPECT_TRUE(std::isnan(got[3]) && std::isnan(got[4]));
    EXPECT_EQ(got[10], 256.0f);
    EXPECT_EQ(got[70], std::numeric_limits<float>::infinity());
    // An infinite nope element: e = 127, the inf survives.
    x[3] = x[4] = 1.0f;
    x[5] = -std::numeric_limits<float>::infinity();
    f.encode(x.data(), record.data());
    EXPECT_EQ(record[64 + 2 * 64], 254);
    f.decode(record.data(), got.data());
    EXPECT_EQ(got[5], -std::numeric_limits<float>::infinity());
    // FNUZ: both NaNs are the one FNUZ NaN code, and the scale follows its 240 maximum.
    const StateRowFormat fnuz =
        kv_row_format(StateDtype::kFp8, dims(128, 64, 128), kv_record_fp8_quant(Fp8Dialect::kFnuz));
    x[3] = std::numeric_limits<float>::quiet_NaN();
    x[4] = -std::numeric_limits<float>::quiet_NaN();
    x[5] = 1.0f;
    fnuz.encode(x.data(), record.data());
    EXPECT_EQ(record[3], 0x80);
    EXPECT_EQ(record[4], 0x80);
    EXPECT_EQ(record[64 + 2 * 64], pow2_scale_exponent(256.0f, kFp8AmaxFloor, 240.0f) + 127);
    fnuz.decode(record.data(), got.data());
    EXPECT_TRUE(std::isnan(got[3]) && std::isnan(got[4]));
    EXPECT_EQ(got[10], 256.0f);
}

TEST(StateFormat, Fp8IndexKeyIsOneBlockOfBf16RoundedValues) {
    std::mt19937 rng(5);
    for (auto [di, dialect] :
         {std::pair{128, Fp8Dialect::kOcp}, std::pair{32, Fp8Dialect::kOcp}, std::pair{128, Fp8Dialect::kFnuz}}) {
        const Fp8Quant quant = index_key_fp8_quant(dialect);
        const StateRowFormat f = index_key_format(StateDtype::kFp8, dims(512, 64, di), quant);
        ASSERT_EQ(f.bytes(), di + 4);
        for (int kind = 0; kind < 60; ++kind) {
            const std::vector<float> x = random_row(rng, di, kind);
            std::vector<uint8_t> record(f.bytes());
            f.encode(x.data(), record.data());
            std::vector<float> rounded(x);
            for (float& v : rounded) v = round_to_bf16(v);
            std::vector<uint8_t> codes(di);
            uint8_t scale_byte = 0;
            act_quant_fp8(rounded.data(), di, di, quant, codes.data(), &scale_byte);
            for (int j = 0; j < di; ++j) ASSERT_EQ(record[j], codes[j]) << "kind " << kind << " j " << j;
            float scale;
            std::memcpy(&scale, record.data() + di, 4);
            ASSERT_TRUE(same_bits(scale, decode_ue8m0(scale_byte)));
            std::vector<float> want(rounded);
            act_quant_fp8_sim(want.data(), di, di, quant);
            std::vector<float> got(di);
            f.decode(record.data(), got.data());
            for (int j = 0; j < di; ++j) ASSERT_TRUE(same_bits(got[j], want[j])) << "kind " << kind << " j " << j;
        }
    }
}

// The reference's indexer keys are FP4-simulated per 32 dims: the FP8 key holds them exactly when the block scales
// of one key span few enough binades, in both dialects (FNUZ's 224 maximum keeps the same binades as OCP's 448; FNUZ
// has no -0, so an FP4 -0 comes back as +0, the same value).
TEST(StateFormat, Fp8IndexKeyHoldsFp4SimulatedKeysExactly) {
    std::mt19937 rng(9);
    for (int trial = 0; trial < 200; ++trial) {
        const StateRowFormat f =
            index_key_format(StateDtype::kFp8, dims(512, 64, 128), index_key_fp8_quant(kDialects[trial % 2]));
        std::vector<float> x = random_row(rng, 128, 0);
        hadamard_inplace(x.data(), 128);
        fp4_sim(x.data(), 128, 32);
        std::vector<uint8_t> record(f.bytes());
        f.encode(x.data(), record.data());
        std::vector<float> got(128);
        f.decode(record.data(), got.data());
        for (int j = 0; j < 128; ++j) {
            if (f.fp8.dialect == Fp8Dialect::kOcp) {
                ASSERT_TRUE(same_bits(got[j], x[j])) << "trial " << trial << " j " << j;
            } else {
                ASSERT_EQ(got[j], x[j]) << "trial " << trial << " j " << j;
            }
        }
    }
}

TEST(StateFormat, Bf16RowsRoundToNearestEven) {
    std::mt19937 rng(3);
    for (bool key : {false, true}) {
        const ModelConfig c = dims(80, 16, 32);
        const StateRowFormat f =
            key ? index_key_format(StateDtype::kBf16, c, kOcpQuant) : kv_row_format(StateDtype::kBf16, c, kOcpQuant);
        ASSERT_EQ(f.bytes(), 2 * f.dim);
        const std::vector<float> x = random_row(rng, f.dim, 4);
        std::vector<uint8_t> record(f.bytes());
        f.encode(x.data(), record.data());
        std::vector<float> got(f.dim);
        f.decode(record.data(), got.data());
        for (int j = 0; j < f.dim; ++j) EXPECT_TRUE(same_bits(got[j], round_to_bf16(x[j])));
    }
}

TEST(StateFormat, F32RowsAreCopies) {
    const StateRowFormat f = kv_row_format(StateDtype::kF32, dims(80, 16, 32), kOcpQuant);
    ASSERT_EQ(f.bytes(), 320);
    std::vector<float> x(80);
    for (int j = 0; j < 80; ++j) x[j] = 0.1f * static_cast<float>(j) - 3.0f;
    std::vector<uint8_t> record(f.bytes());
    f.encode(x.data(), record.data());
    EXPECT_EQ(std::memcmp(record.data(), x.data(), 320), 0);
}

TEST(StateFormat, Fp8NeedsNopeDimsInBlocksOf64) {
    EXPECT_THROW(kv_row_format(StateDtype::kFp8, dims(96, 16, 32), kOcpQuant), Error);  // 80 nope dims
    EXPECT_NO_THROW(kv_row_format(StateDtype::kBf16, dims(96, 16, 32), kOcpQuant));
    try {
        kv_row_format(StateDtype::kFp8, dims(96, 16, 32), kOcpQuant);
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("blocks of 64"), std::string::npos) << e.what();
    }
}

TEST(StateFormat, DtypeNames) {
    for (StateDtype d : {StateDtype::kF32, StateDtype::kBf16, StateDtype::kFp8}) {
        EXPECT_EQ(parse_state_dtype(state_dtype_name(d)), d);
    }
    for (const char* bad : {"", "fp16", "FP8", "float32", "auto"}) EXPECT_THROW(parse_state_dtype(bad), Error) << bad;
}

}  // namespace
}  // namespace dsv4
