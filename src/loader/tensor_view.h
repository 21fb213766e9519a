// TensorView: a non-owning view of one tensor's bytes inside a memory-mapped checkpoint file.
// Boundary: the loader hands these to the weight binder; nothing here owns memory. A view stays valid as long as the
// SafetensorsFile (or Checkpoint) it came from is alive; moving that owner does not invalidate it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/dtype.h"

namespace dsv4 {

struct TensorView {
    // Start of the tensor's bytes. safetensors does not align tensor data: read multi-byte elements with memcpy
    // (or copy to an aligned buffer) unless you have checked the alignment yourself.
    const uint8_t* data = nullptr;
    DType dtype = DType::kU8;
    std::span<const int64_t> shape;  // as stored; FP4 experts are I8 [out, in/2] (two e2m1 codes per byte)
    size_t nbytes = 0;               // == numel() * element size, validated when the file was opened

    int64_t numel() const {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;  // cannot overflow: validated against nbytes at open
        return n;
    }
    std::span<const uint8_t> bytes() const { return {data, nbytes}; }
};

}  // namespace dsv4
