// The values of a synthetic checkpoint: what each tensor's numbers are drawn from (mirroring the fixture generator
// tools/fixtures/make_fixtures.py so activations stay O(1) through any depth), a counter-based random stream that
// makes every row reproducible on its own (same seed -> same bytes, whatever the shard count, chunking or thread
// count), and the quantisers into the checkpoint's formats (model-spec 4.3).
//
//   linear weights (FP8, FP4, BF16), head, router, compressor and indexer projections   N(0, in^-1/2)
//   embed.weight                                                                       N(0, 1)
//   every *norm.weight                                                                 N(1, 0.1)
//   mHC fn (hc_attn_fn, hc_ffn_fn, hc_head_fn)                                         N(0, 2 in^-1/2)
//   mHC base, attn_sink, compressor ape                                                N(0, 0.5)
//   mHC scale                                                                          U(0.5, 2)
//   router bias (ffn.gate.bias)                                                        N(0, 0.1)
//   tid2eid                                        each token k distinct experts, every expert used equally (+-1)
//
// FP8 weights: per 128x128 block (the config's weight_block_size) s = 2^ceil(log2(amax / 448)), code = e4m3(w / s).
// FP4 experts: per row and 32 inputs s = 2^ceil(log2(amax / 6)), code = e2m1(w / s), two codes per byte, low nibble
// first. Scales are stored as UE8M0 bytes (exponent + 127).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/tensor_spec.h"

namespace dsv4 {

enum class SyntheticDistribution : uint8_t { kNormal, kUniform, kExpertTable };

struct SyntheticValueModel {
    SyntheticDistribution distribution = SyntheticDistribution::kNormal;
    double a = 0.0;  // normal: mean; uniform: low
    double b = 1.0;  // normal: standard deviation; uniform: high
};

// The logical [rows, cols] matrix a tensor's values are drawn as: FP4 weights are [out, in] (twice the stored I8
// columns), 1-D tensors are one row, higher ranks fold the leading dimensions into rows.
struct LogicalShape {
    int64_t rows = 1;
    int64_t cols = 1;
};
LogicalShape synthetic_logical_shape(const TensorSpec& spec);

// What a (non-scale) tensor's values follow. Throws dsv4::Error for a scale tensor or a name it has no rule for.
SyntheticValueModel synthetic_value_model(const TensorSpec& spec);

// The generating (pre-quantisation) values of rows [row0, row0 + count) of a tensor: out[count * cols], float32.
// Depends only on (seed, spec.name, row).
void synthetic_rows(const TensorSpec& spec, uint64_t seed, int64_t row0, int64_t count, float* out);

// tid2eid [vocab, k] for `experts` experts: every row k distinct ids, loads balanced to within one.
std::vector<int64_t> synthetic_expert_table(int64_t vocab, int k, int experts, uint64_t seed, std::string_view name);

// Quantisers. `values` is [rows, cols] row-major.
// FP8: codes [rows, cols]; scales [ceil(rows / block_rows), ceil(cols / block_cols)] UE8M0 for this row range (rows
// must start on a block boundary; the last block may be short).
void quantize_fp8_blocks(const float* values, int64_t rows, int64_t cols, int block_rows, int block_cols,
                         uint8_t* codes, uint8_t* scales);
// FP4: packed [rows, cols / 2], scales [rows, cols / block] UE8M0; cols a multiple of block, block even.
void quantize_fp4_rows(const float* values, int64_t rows, int64_t cols, int block, uint8_t* packed, uint8_t* scales);

// 64-bit FNV-1a of a name (the per-tensor stream id).
uint64_t synthetic_name_hash(std::string_view name);

}  // namespace dsv4
