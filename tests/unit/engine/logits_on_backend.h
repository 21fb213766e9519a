// Logits rows on the CPU backend for the tests of what sampling reads of them (step_logits_test,
// device_sampling_test).
#pragma once

#include <memory>
#include <random>
#include <type_traits>
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

// One of `values`, uniformly (the random parameter choices of the sampling tests).
template <typename... T>
std::common_type_t<T...> pick_one(std::mt19937_64& rng, T... values) {
    const std::vector<std::common_type_t<T...>> options{values...};
    return options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)];
}

}  // namespace dsv4
