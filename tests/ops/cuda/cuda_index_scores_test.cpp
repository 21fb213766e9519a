// The lightning indexer's scores on tensor cores with four tokens a block (IndexScoresArgs::token_tile)
// against one token a block: the same bits in every entry written and the same entries left unwritten, over a step of
// three sequences whose boundaries fall inside token tiles, fp8 and bf16 keys, ranges of 64, 256 and 1,024 entries
// and a block table with a hole (the error flag, -inf scores). Also against the float32 SIMT kernel within the MMA
// kernel's query split. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cuda/kernels.h"
#include "device_copies.h"
#include "op_test_support.h"

namespace dsv4::ops_test {
namespace {

constexpr int kDim = 128, kHeads = 64, kRatio = 4, kPerBlock = 64, kBlocks = 64;

// A step of sequences (starting position, tokens), each with its own block table of kBlocks / n blocks; `hole`: the
// last sequence's first block unmapped.
struct Step {
    std::vector<int32_t> positions, seq_of_token, seq_table_offset, seq_table_len, block_tables;
    std::vector<void*> owned;
    cuda::StepMeta meta;
    int32_t* error_flag = nullptr;

    Step(const std::vector<std::pair<int, int>>& seqs, bool hole) {
        const int per_seq = kBlocks / static_cast<int>(seqs.size());
        for (size_t s = 0; s < seqs.size(); ++s) {
            for (int i = 0; i < seqs[s].second; ++i) {
                positions.push_back(seqs[s].first + i);
                seq_of_token.push_back(static_cast<int32_t>(s));
            }
            seq_table_offset.push_back(static_cast<int32_t>(block_tables.size()));
            seq_table_len.push_back(per_seq);
            for (int b = 0; b < per_seq; ++b) block_tables.push_back(static_cast<int32_t>(s) * per_seq + b);
        }
        if (hole) block_tables[seq_table_offset.back()] = -1;
        error_flag = to_device(std::vector<int32_t>{0});
        meta.positions = track(to_device(positions));
        meta.seq_of_token = track(to_device(seq_of_token));
        meta.seq_table_offset = track(to_device(seq_table_offset));
        meta.seq_table_len = track(to_device(seq_table_len));
        meta.block_tables = track(to_device(block_tables));
        meta.n_tokens = static_cast<int32_t>(positions.size());
        meta.n_seqs = static_cast<int32_t>(seqs.size());
        meta.num_blocks = kBlocks;
        meta.error_flag = error_flag;
    }
    ~Step() {
        for (void* p : owned) cudaFree(p);
        cudaFree(error_flag);
    }
    template <typename T>
    const T* track(T* p) {
        owned.push_back(p);
        return p;
    }
    int32_t read_flag() const { return to_host(error_flag, 1)[0]; }
    void clear_flag() const { EXPECT_EQ(cudaMemset(error_flag, 0, sizeof(int32_t)), cudaSuccess); }
};

// Random stored keys: e4m3 codes (no NaN code) with a positive float scale after them, or bf16 values.
std::vector<uint8_t> random_keys(const cuda::RowFormatDev& f) {
    std::vector<uint8_t> keys(static_cast<size_t>(kBlocks) * kPerBlock * f.bytes);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.001f, 0.01f);
    const std::vector<float> values = random_floats(static_cast<int64_t>(kBlocks) * kPerBlock * kDim);
    for (int64_t r = 0; r < int64_t{kBlocks} * kPerBlock; ++r) {
        uint8_t* row = keys.data() + r * f.bytes;
        for (int i = 0; i < kDim; ++i) {
            if (f.dtype == cuda::kRowFp8) {
                int code = byte(rng());
                if ((code & 0x7f) == 0x7f) code &= 0xfe;  // 0x7f / 0xff are NaN in e4m3
                row[i] = static_cast<uint8_t>(code);
            } else {
                uint32_t bits;
                std::memcpy(&bits, &values[r * kDim + i], 4);
                const auto half = static_cast<uint16_t>(bits >> 16);
                std::memcpy(row + 2 * i, &half, 2);
            }
        }
        if (f.dtype == cuda::kRowFp8) {
            const float s = scale(rng());
            std::memcpy(row + kDim, &s, 4);
        }
    }
    return keys;
}

// The Euclidean norm of each stored key row's decoded values.
std::vector<double> key_norms(const cuda::RowFormatDev& f, const std::vector<uint8_t>& keys) {
    std::vector<double> norms(static_cast<size_t>(kBlocks) * kPerBlock);
    for (size_t r = 0; r < norms.size(); ++r) {
        const uint8_t* row = keys.data() + r * f.bytes;
        float scale = 1.0f;
        if (f.dtype == cuda::kRowFp8) std::memcpy(&scale, row + kDim, 4);
        double sum = 0.0;
        for (int i = 0; i < kDim; ++i) {
            uint16_t half = 0;
            if (f.dtype != cuda::kRowFp8) std::memcpy(&half, row + 2 * i, 2);
            const double v =
                f.dtype == cuda::kRowFp8 ? decode_e4m3(row[i]) * static_cast<double>(scale) : decode_bf16(half);
            sum += v * v;
        }
        norms[r] = std::sqrt(sum);
    }
    return norms;
}

// Scores of the step (sentinel where the kernel writes nothing) by the MMA kernel with `tile` tokens a block, or by
// the float32 SIMT kernel (tile 0).
std::vector<float> scores_of(const Step& step, cuda::IndexScoresArgs a, int tile) {
    const size_t n = static_cast<size_t>(step.meta.n_tokens) * a.max_entries;
    float* out = to_device(std::vector<float>(n, 12345.0f));
    a.scores = out;
    a.token_tile = tile > 0 ? tile : 1;
    cuda::launch_index_scores(nullptr, step.meta, a, tile > 0, false);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> got = to_host(out, n);
    cudaFree(out);
    return got;
}

void compare_tiles(const std::vector<std::pair<int, int>>& seqs, bool hole, int dtype, int64_t max_entries) {
    const std::string label = std::string(dtype == cuda::kRowFp8 ? "fp8" : "bf16") + " keys, " +
                              std::to_string(max_entries) + " entries" + (hole ? ", a hole" : "");
    Step step(seqs, hole);
    cuda::RowFormatDev f;
    f.dtype = dtype;
    f.dim = kDim;
    f.index_key = true;
    f.bytes = dtype == cuda::kRowFp8 ? kDim + 4 : 2 * kDim;
    const int64_t n = step.meta.n_tokens;
    const std::vector<float> q = random_floats(n * kHeads * kDim), w = random_floats(n * kHeads, 0.05f);
    const std::vector<uint8_t> keys = random_keys(f);
    cuda::IndexScoresArgs a;
    a.q = step.track(to_device(q));
    a.weights = step.track(to_device(w));
    a.keys = step.track(to_device(keys));
    a.key_format = f;
    a.heads = kHeads;
    a.ratio = kRatio;
    a.per_block = kPerBlock;
    a.max_entries = max_entries;
    const std::vector<float> one = scores_of(step, a, 1);
    const int32_t flag = step.read_flag();
    EXPECT_EQ(flag != 0, hole) << label;
    for (int tile : {4}) {
        step.clear_flag();
        const std::vector<float> got = scores_of(step, a, tile);
        EXPECT_EQ(std::memcmp(got.data(), one.data(), got.size() * sizeof(float)), 0) << label << ", tile " << tile;
        EXPECT_EQ(step.read_flag(), flag) << label << ", tile " << tile;
    }
    // Written entries: exactly each token's eligible ones; the float32 kernel agrees to the query split's precision,
    // -inf where a key is unmapped; no score is NaN. The precision is relative to the score's magnitude bound
    // sum_h |w_h| |q_h| |k| (Cauchy-Schwarz): a dot's split-query error is within ~2^-17 of sum_i |q_i k_i|, while the
    // score itself can be far smaller (the dims' and the heads' terms cancel), so a bound relative to the scores
    // would fail on some draws.
    const std::vector<float> simt = scores_of(step, a, 0);
    const std::vector<double> k_norm = key_norms(f, keys);
    int64_t written = 0, finite = 0;
    double worst = 0.0;
    for (int64_t t = 0; t < n; ++t) {
        const int64_t eligible = std::min<int64_t>((step.positions[t] + 1) / kRatio, max_entries);
        double head_mass = 0.0;  // sum_h |w_h| |q_h|
        for (int h = 0; h < kHeads; ++h) {
            double q2 = 0.0;
            for (int i = 0; i < kDim; ++i)
                q2 += static_cast<double>(q[(t * kHeads + h) * kDim + i]) * q[(t * kHeads + h) * kDim + i];
            head_mass += std::abs(static_cast<double>(w[t * kHeads + h])) * std::sqrt(q2);
        }
        const int32_t seq = step.seq_of_token[t];
        for (int64_t e = 0; e < max_entries; ++e) {
            const float v = one[t * max_entries + e], ref = simt[t * max_entries + e];
            ASSERT_FALSE(std::isnan(v)) << label << ", token " << t << " entry " << e;
            if (e >= eligible) {
                ASSERT_EQ(v, 12345.0f) << label << ", token " << t << " entry " << e << " past " << eligible;
                continue;
            }
            ++written;
            if (std::isinf(ref) || std::isinf(v)) {
                ASSERT_EQ(v, ref) << label << ", token " << t << " entry " << e;
                continue;
            }
            ++finite;
            const int32_t block = step.block_tables[step.seq_table_offset[seq] + e / kPerBlock];
            const double bound = head_mass * k_norm[static_cast<size_t>(block) * kPerBlock + e % kPerBlock];
            worst = std::max(worst, std::abs(static_cast<double>(v) - ref) / std::max(bound, 1e-30));
        }
    }
    EXPECT_GT(written, 0) << label;
    EXPECT_GT(finite, hole ? 0 : written - 1) << label;
    EXPECT_LT(worst, 3e-5) << label;  // two float32 sums and the query split: ~1.5e-5 of the bound at most
}

TEST(CudaIndexScores, TokenTilesGiveOneTokenBlocksBits) {
    DSV4_REQUIRE_GPU();
    // Three sequences: a prefill chunk from position 0 (301 tokens), a chunk continuing at 1,500 (130 tokens), a
    // chunk of 67 at 40: boundaries at tokens 301 and 431, inside tiles of four; 498 tokens.
    const std::vector<std::pair<int, int>> seqs = {{0, 301}, {1500, 130}, {40, 67}};
    for (int dtype : {cuda::kRowFp8, cuda::kRowBf16}) compare_tiles(seqs, false, dtype, 512);
    compare_tiles(seqs, true, cuda::kRowFp8, 512);  // the third sequence's first block unmapped
    // 2,200 tokens: one token a block takes ranges of 1,024 entries, four tokens a block ranges of 256.
    compare_tiles({{0, 2100}, {3000, 100}}, false, cuda::kRowFp8, 1024);
    // 78 tokens, mostly one sequence's: ranges of one chunk of 64 entries.
    compare_tiles({{200, 70}, {9, 3}, {900, 5}}, false, cuda::kRowFp8, 256);
}

}  // namespace
}  // namespace dsv4::ops_test
