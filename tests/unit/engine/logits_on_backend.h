// Logits rows on the CPU backend for the tests of what sampling reads of them (step_logits_test,
// device_sampling_test).
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"

namespace dsv4 {

template <int64_t kVocab>
struct LogitsOnBackend {
    std::unique_ptr<Backend> backend = make_cpu_backend(Numerics::kExact, 1);
    // Rows of kVocab logits, x holding them one after another.
    Tensor upload(const std::vector<float>& x) {
        Tensor t = backend->alloc(DType::kF32, {static_cast<int64_t>(x.size()) / kVocab, kVocab});
        backend->from_host(t, x.data());
        return t;
    }
};

}  // namespace dsv4
