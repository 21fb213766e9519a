#include "runtime/heldout_score.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "runtime/sequence_runner.h"

namespace dsv4 {
namespace {

// -ln softmax(row)[target], with the log-sum-exp in double.
double token_nats(std::span<const float> row, int32_t target) {
    const double max = *std::max_element(row.begin(), row.end());
    double sum = 0.0;
    for (float v : row) sum += std::exp(static_cast<double>(v) - max);
    return std::log(sum) + max - static_cast<double>(row[static_cast<size_t>(target)]);
}

}  // namespace

double sequence_nats(DeepseekV4& model, std::span<const int32_t> tokens, int32_t blocks_per_slot) {
    DSV4_CHECK(tokens.size() >= 2, "a scored row needs at least 2 tokens, got {}", tokens.size());
    const int64_t vocab = model.config().vocab_size;
    for (size_t i = 0; i < tokens.size(); ++i) {
        DSV4_CHECK(tokens[i] >= 0 && tokens[i] < vocab, "token {} at index {} is outside the vocabulary [0, {})",
                   tokens[i], i, vocab);
    }
    SequenceRunner runner(model, 0, blocks_per_slot);
    const std::vector<float> logits = runner.feed(tokens, true);
    double nats = 0.0;
    for (size_t i = 1; i < tokens.size(); ++i) {
        nats += token_nats(std::span(logits).subspan((i - 1) * static_cast<size_t>(vocab), vocab), tokens[i]);
    }
    return nats;
}

std::vector<double> row_nats(DeepseekV4& model, std::span<const int32_t> matrix, int64_t rows, int64_t row_len) {
    DSV4_CHECK(rows >= 0 && row_len >= 2 && matrix.size() >= static_cast<size_t>(rows * row_len),
               "row_nats: {} values cannot hold {} rows of {} tokens", matrix.size(), rows, row_len);
    const int32_t block_tokens = model.backend().state_config().block_tokens;
    const auto blocks = static_cast<int32_t>((row_len + block_tokens - 1) / block_tokens);
    std::vector<double> out;
    out.reserve(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
        out.push_back(sequence_nats(model, matrix.subspan(static_cast<size_t>(r * row_len), row_len), blocks));
    }
    return out;
}

double bits_per_byte(double nats, int64_t bytes) {
    DSV4_CHECK(bytes > 0, "bits per byte of {} bytes", bytes);
    return nats / std::log(2.0) / static_cast<double>(bytes);
}

}  // namespace dsv4
