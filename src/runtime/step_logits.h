// StepLogits: what a step's sampling reads of its logits rows, brought to the host. A request whose sample is the
// raw row's argmax (sampler.h samples_raw_argmax: greedy, no logprobs, no logits processor) gets its argmax chosen
// where the logits are (ModelOps::argmax_rows): 4 bytes per row come to the host instead of the row (vocab floats,
// 33 MB a step at batch 64, four times that for a k = 3 verify step). Every other row is copied whole, and so is
// every row of a request whose argmax found a fault (NaN, +inf, only -inf), so that the sampler reports it as
// without this path. A request sampled on the device reads nothing here.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/model_ops.h"

namespace dsv4 {

// What a request reads of its rows: the rows themselves, their argmax ids, or nothing (it was sampled on the device,
// runtime/device_sampling.h).
enum class RowsRead { kRows, kArgmax, kNothing };

// One request's part of the logits: its count of consecutive rows (requests in row order, from row 0), and what it
// reads of them.
struct RequestRows {
    int64_t count = 1;
    RowsRead read = RowsRead::kRows;
};

class StepLogits {
  public:
    // Reads `logits` [rows, vocab] for `requests`.
    StepLogits(ModelOps& ops, const Tensor& logits, std::span<const RequestRows> requests);

    // What request i got: argmax ids (then argmax(i)), rows (then rows(i)) or nothing. A request that asked for ids
    // gets rows when its argmax found a fault.
    RowsRead got(size_t request) const { return got_[request]; }
    // Request i's argmax ids, one per row (valid ids: a fault sends the request to the row path).
    std::span<const int32_t> argmax(size_t request) const;
    // Request i's rows, [count * vocab] floats.
    std::span<const float> rows(size_t request) const;

    int64_t host_rows() const {  // rows copied whole
        return vocab_ == 0 ? 0 : static_cast<int64_t>(host_.size()) / vocab_;
    }

  private:
    int64_t vocab_ = 0;
    std::vector<int64_t> first_row_, count_;  // per request: its first logits row and row count
    std::vector<RowsRead> got_;
    std::vector<int64_t> host_first_;  // per request: its first row among the copied ones, or -1
    std::vector<int32_t> argmax_;      // per logits row (empty when no request took the argmax path)
    std::vector<float> host_;          // the copied rows, in row order
};

}  // namespace dsv4
