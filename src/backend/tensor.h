// Tensor: a non-owning, dense, row-major view of backend memory (host memory for the CPU backend, device memory for
// CUDA). Ownership stays with the backend's arenas and weight stores; a Tensor is two words and a shape.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "core/dtype.h"
#include "core/error.h"

namespace dsv4 {

struct Tensor {
    static constexpr int kMaxRank = 4;

    void* data = nullptr;
    DType dtype = DType::kF32;
    std::array<int64_t, kMaxRank> dims{};
    int rank = 0;

    Tensor() = default;
    Tensor(void* p, DType t, std::initializer_list<int64_t> shape) : data(p), dtype(t) {
        DSV4_CHECK(shape.size() <= kMaxRank, "tensor rank {} exceeds {}", shape.size(), kMaxRank);
        for (int64_t d : shape) dims[rank++] = d;
    }

    int64_t size(int i) const { return dims[i < 0 ? rank + i : i]; }
    int64_t numel() const {
        int64_t n = 1;
        for (int i = 0; i < rank; ++i) n *= dims[i];
        return n;
    }
    bool empty() const { return numel() == 0; }
    float* f32() const { return static_cast<float*>(data); }
    int32_t* i32() const { return static_cast<int32_t*>(data); }

    // Same memory, another shape with the same element count.
    Tensor view(std::initializer_list<int64_t> shape) const {
        Tensor t(data, dtype, shape);
        DSV4_CHECK(t.numel() == numel(), "view: {} elements cannot be viewed as {}", numel(), t.numel());
        return t;
    }
    // Rows [begin, begin + count) of the leading dimension.
    Tensor rows(int64_t begin, int64_t count) const {
        Tensor t = *this;
        int64_t row_elems = numel() / (dims[0] == 0 ? 1 : dims[0]);
        t.data = static_cast<char*>(data) + begin * row_elems * dtype_bits(dtype) / 8;
        t.dims[0] = count;
        return t;
    }
};

}  // namespace dsv4
