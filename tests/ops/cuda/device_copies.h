// Raw device copies for the kernel-level CUDA tests (those that call a launch_* function on hand-made buffers rather
// than a backend op): a host vector into a new cudaMalloc'd buffer, and a device buffer back. Failures are test
// failures (EXPECT), not crashes.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace dsv4::ops_test {

// A new device buffer holding v (at least one element, so an empty vector still gives a valid pointer); the caller
// frees it.
template <typename T>
T* to_device(const std::vector<T>& v) {
    T* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, std::max<size_t>(v.size(), 1) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

template <typename T>
std::vector<T> to_host(const T* d, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
}

}  // namespace dsv4::ops_test
