// Held-out scoring (bits per byte): the negative log-likelihood of token rows under the model, each row fed as one
// fresh sequence. Used by `dsv4 bpb` and the demo model's quality tests (docs/demo-model.md).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/deepseek_v4.h"

namespace dsv4 {

// sum over i >= 1 of -ln softmax(logits[i - 1])[tokens[i]] in double, for `tokens` fed whole from position 0 in
// state slot 0 (blocks [0, blocks_per_slot)). tokens[0] (BOS) is context only.
double sequence_nats(DeepseekV4& model, std::span<const int32_t> tokens, int32_t blocks_per_slot);

// Scores every row of a [rows, row_len] token matrix (row-major); returns the nats of each row.
std::vector<double> row_nats(DeepseekV4& model, std::span<const int32_t> matrix, int64_t rows, int64_t row_len);

// nats / ln 2 / bytes.
double bits_per_byte(double nats, int64_t bytes);

}  // namespace dsv4
