// Tensor maps for the TMA's tiled copies (cp.async.bulk.tensor): the driver's cuTensorMapEncodeTiled, reached through
// the runtime's entry-point query so that the backend does not link libcuda itself.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace dsv4::cuda {

// A row-major byte matrix [rows][cols] (rows `row_stride` bytes apart, base and stride multiples of 16) read in boxes
// of [box_rows][box_cols] bytes (box_cols <= 128) that land in shared memory with the 128-byte swizzle (16-byte chunk
// c of box row r at chunk c ^ (r % 8)), the layout wgmma's K-major descriptors read (wgmma_fp8.cuh); box elements
// past the matrix's edges land as zeros. Fails naming the shape when the driver refuses it.
CUtensorMap tensor_map_bytes_sw128(const void* base, uint64_t rows, uint64_t cols, uint64_t row_stride,
                                   uint32_t box_rows, uint32_t box_cols);

}  // namespace dsv4::cuda
