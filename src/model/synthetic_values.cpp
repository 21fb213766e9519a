#include "model/synthetic_values.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"
#include "core/float_formats.h"
#include "core/quant_sim.h"

namespace dsv4 {
namespace {

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// xoshiro256** seeded through splitmix64: a fast, well-mixed stream per (seed, tensor, row).
class RowRandom {
  public:
    RowRandom(uint64_t seed, uint64_t name_hash, uint64_t row) {
        uint64_t mix = seed ^ (name_hash * 0xD1B54A32D192ED03ull) ^ (row * 0x8CB92BA72F3D8DD7ull);
        mix = splitmix64(mix) ^ row;
        for (auto& word : s_) word = splitmix64(mix);
    }

    uint64_t next() {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }

    // Two independent standard normals (Box-Muller).
    void normal_pair(double& z0, double& z1) {
        const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
        const double u2 = uniform();
        const double radius = std::sqrt(-2.0 * std::log(u1));
        const double angle = 2.0 * std::numbers::pi * u2;
        z0 = radius * std::cos(angle);
        z1 = radius * std::sin(angle);
    }

  private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t s_[4];
};

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

SyntheticValueModel normal(double mean, double stddev) {
    return {SyntheticDistribution::kNormal, mean, stddev};
}

}  // namespace

uint64_t synthetic_name_hash(std::string_view name) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (char c : name) {
        h ^= static_cast<uint8_t>(c);
        h *= 0x100000001B3ull;
    }
    return h;
}

LogicalShape synthetic_logical_shape(const TensorSpec& spec) {
    LogicalShape shape;
    if (spec.shape.empty()) return shape;
    shape.cols = spec.shape.back();
    for (size_t i = 0; i + 1 < spec.shape.size(); ++i) shape.rows *= spec.shape[i];
    if (spec.dtype == DType::kI8 && !spec.is_scale) shape.cols *= 2;  // packed FP4: two codes per byte
    return shape;
}

SyntheticValueModel synthetic_value_model(const TensorSpec& spec) {
    DSV4_CHECK(!spec.is_scale, "tensor '{}' is a scale: its values follow from its weight", spec.name);
    const std::string_view name = spec.name;
    const double in = static_cast<double>(synthetic_logical_shape(spec).cols);
    if (spec.dtype == DType::kI64 && ends_with(name, "tid2eid")) return {SyntheticDistribution::kExpertTable, 0, 0};
    if (name == "embed.weight") return normal(0.0, 1.0);
    if (ends_with(name, "norm.weight")) return normal(1.0, 0.1);
    if (ends_with(name, "_fn")) return normal(0.0, 2.0 / std::sqrt(in));
    if (ends_with(name, "_base") || ends_with(name, "attn_sink") || ends_with(name, ".ape")) return normal(0.0, 0.5);
    if (ends_with(name, "_scale")) return {SyntheticDistribution::kUniform, 0.5, 2.0};
    if (ends_with(name, "gate.bias")) return normal(0.0, 0.1);
    if (ends_with(name, ".weight") && spec.shape.size() == 2) return normal(0.0, 1.0 / std::sqrt(in));
    fail("synthetic checkpoint: no value rule for tensor '{}' ({})", spec.name, dtype_name(spec.dtype));
}

void synthetic_rows(const TensorSpec& spec, uint64_t seed, int64_t row0, int64_t count, float* out) {
    const SyntheticValueModel model = synthetic_value_model(spec);
    DSV4_CHECK(model.distribution != SyntheticDistribution::kExpertTable,
               "tensor '{}' is an expert table, not "
               "float values",
               spec.name);
    const LogicalShape shape = synthetic_logical_shape(spec);
    DSV4_CHECK(row0 >= 0 && count >= 0 && row0 + count <= shape.rows, "tensor '{}': rows [{}, {}) outside [0, {})",
               spec.name, row0, row0 + count, shape.rows);
    const uint64_t name_hash = synthetic_name_hash(spec.name);
    for (int64_t r = 0; r < count; ++r) {
        RowRandom random(seed, name_hash, static_cast<uint64_t>(row0 + r));
        float* row = out + r * shape.cols;
        if (model.distribution == SyntheticDistribution::kUniform) {
            for (int64_t j = 0; j < shape.cols; ++j) {
                row[j] = static_cast<float>(model.a + (model.b - model.a) * random.uniform());
            }
            continue;
        }
        for (int64_t j = 0; j < shape.cols; j += 2) {
            double z0 = 0, z1 = 0;
            random.normal_pair(z0, z1);
            row[j] = static_cast<float>(model.a + model.b * z0);
            if (j + 1 < shape.cols) row[j + 1] = static_cast<float>(model.a + model.b * z1);
        }
    }
}

// Deals experts like cards from shuffled decks, k per token: each deck hands every expert out once, so loads differ
// by at most one deck's worth (one) between experts; a card already held by the token (possible only across a deck
// boundary) is swapped for the next one that is not.
std::vector<int64_t> synthetic_expert_table(int64_t vocab, int k, int experts, uint64_t seed, std::string_view name) {
    DSV4_CHECK(k >= 1 && k <= experts, "expert table: k = {} must be in [1, {}]", k, experts);
    RowRandom random(seed, synthetic_name_hash(name), 0);
    std::vector<int64_t> deck(static_cast<size_t>(experts));
    auto shuffle = [&] {
        for (int i = 0; i < experts; ++i) deck[i] = i;
        for (int i = experts - 1; i > 0; --i) std::swap(deck[i], deck[random.next() % static_cast<uint64_t>(i + 1)]);
    };
    shuffle();
    int pos = 0;
    std::vector<int64_t> table(static_cast<size_t>(vocab) * k);
    for (int64_t t = 0; t < vocab; ++t) {
        int64_t* chosen = &table[static_cast<size_t>(t) * k];
        for (int j = 0; j < k; ++j) {
            if (pos == experts) {
                shuffle();
                pos = 0;
            }
            int pick = pos;
            while (std::find(chosen, chosen + j, deck[pick]) != chosen + j) ++pick;  // < experts: see above
            std::swap(deck[pos], deck[pick]);
            chosen[j] = deck[pos++];
        }
    }
    return table;
}

void quantize_fp8_blocks(const float* values, int64_t rows, int64_t cols, int block_rows, int block_cols,
                         uint8_t* codes, uint8_t* scales) {
    DSV4_CHECK(block_rows >= 1 && block_cols >= 1, "FP8 block size must be positive");
    const int64_t scale_cols = (cols + block_cols - 1) / block_cols;
    for (int64_t r0 = 0; r0 < rows; r0 += block_rows) {
        const int64_t r1 = std::min(rows, r0 + block_rows);
        for (int64_t c0 = 0, sb = 0; c0 < cols; c0 += block_cols, ++sb) {
            const int64_t c1 = std::min(cols, c0 + block_cols);
            float amax = 0.0f;
            for (int64_t r = r0; r < r1; ++r) {
                for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(values[r * cols + c]));
            }
            // The weight formula: ceil(log2(amax / 448)) with no activation floor (an all-zero block gets 2^-127).
            const int e = pow2_scale_exponent(amax, 0x1p-126f, kE4M3Max);
            const float inverse = std::ldexp(1.0f, -e);
            scales[(r0 / block_rows) * scale_cols + sb] = static_cast<uint8_t>(e + 127);
            for (int64_t r = r0; r < r1; ++r) {
                for (int64_t c = c0; c < c1; ++c) codes[r * cols + c] = encode_e4m3(values[r * cols + c] * inverse);
            }
        }
    }
}

void quantize_fp4_rows(const float* values, int64_t rows, int64_t cols, int block, uint8_t* packed, uint8_t* scales) {
    DSV4_CHECK(block >= 2 && block % 2 == 0 && cols % block == 0,
               "FP4: {} columns are not a multiple of the even "
               "block {}",
               cols, block);
    for (int64_t r = 0; r < rows; ++r) {
        act_quant_fp4(values + r * cols, cols, block, packed + r * (cols / 2), scales + r * (cols / block));
    }
}

}  // namespace dsv4
