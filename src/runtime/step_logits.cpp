#include "runtime/step_logits.h"

#include <algorithm>

#include "backend/tensor_reads.h"
#include "core/error.h"

namespace dsv4 {

StepLogits::StepLogits(ModelOps& ops, const Tensor& logits, std::span<const RequestRows> requests) {
    const size_t n = requests.size();
    const int64_t total = logits.numel() == 0 ? 0 : logits.size(0);
    int64_t rows = 0;
    for (const RequestRows& request : requests) {
        DSV4_CHECK(request.count >= 1, "step logits: a request with {} rows", request.count);
        first_row_.push_back(rows);
        count_.push_back(request.count);
        rows += request.count;
    }
    DSV4_CHECK(rows == total, "step logits: the requests' {} rows are not the {} logits rows", rows, total);
    host_first_.assign(n, -1);
    got_.assign(n, RowsRead::kNothing);
    if (total == 0) return;
    vocab_ = logits.numel() / total;
    if (std::any_of(requests.begin(), requests.end(),
                    [](const RequestRows& r) { return r.read == RowsRead::kArgmax; })) {
        argmax_ = read_argmax_rows(ops, logits);
    }
    std::vector<int32_t> copied;
    for (size_t i = 0; i < n; ++i) {
        got_[i] = requests[i].read;
        if (got_[i] == RowsRead::kNothing) continue;
        if (got_[i] == RowsRead::kArgmax) {
            const auto ids = argmax(i);
            if (std::find(ids.begin(), ids.end(), kNoArgmax) == ids.end()) continue;
            got_[i] = RowsRead::kRows;  // a fault: the sampler reads the rows and reports it
        }
        host_first_[i] = static_cast<int64_t>(copied.size());
        for (int64_t r = 0; r < count_[i]; ++r) copied.push_back(static_cast<int32_t>(first_row_[i] + r));
    }
    if (static_cast<int64_t>(copied.size()) == total) {
        host_ = read_f32(ops, logits);
    } else if (!copied.empty()) {
        const size_t mark = ops.scratch_mark();
        Tensor gathered = ops.alloc(DType::kF32, {static_cast<int64_t>(copied.size()), vocab_});
        ops.gather_rows(logits, copied, gathered);
        host_ = read_f32(ops, gathered);
        ops.scratch_release(mark);
    }
}

std::span<const int32_t> StepLogits::argmax(size_t request) const {
    DSV4_CHECK(!argmax_.empty(), "step logits: request {} has no argmax ids", request);
    return std::span<const int32_t>(argmax_).subspan(static_cast<size_t>(first_row_[request]),
                                                     static_cast<size_t>(count_[request]));
}

std::span<const float> StepLogits::rows(size_t request) const {
    DSV4_CHECK(host_first_[request] >= 0, "step logits: request {} read no rows", request);
    return std::span<const float>(host_).subspan(static_cast<size_t>(host_first_[request] * vocab_),
                                                 static_cast<size_t>(count_[request] * vocab_));
}

}  // namespace dsv4
