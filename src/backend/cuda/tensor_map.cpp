// Tensor maps for the TMA (tensor_map.h).
#include "backend/cuda/tensor_map.h"

#include <cuda_runtime.h>

#include "core/error.h"

namespace dsv4::cuda {
namespace {

using EncodeTiled = decltype(&cuTensorMapEncodeTiled);

// The driver's encoder, looked up once (CUDA 12.0's signature, which 13.x keeps).
EncodeTiled encode_tiled() {
    static const EncodeTiled fn = [] {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult found{};
        const cudaError_t err =
            cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found);
        DSV4_CHECK(err == cudaSuccess && found == cudaDriverEntryPointSuccess && p != nullptr,
                   "the CUDA driver has no cuTensorMapEncodeTiled (TMA tensor maps need a CUDA 12 driver): {}",
                   cudaGetErrorString(err));
        return reinterpret_cast<EncodeTiled>(p);
    }();
    return fn;
}

}  // namespace

CUtensorMap tensor_map_bytes_sw128(const void* base, uint64_t rows, uint64_t cols, uint64_t row_stride,
                                   uint32_t box_rows, uint32_t box_cols) {
    DSV4_CHECK(reinterpret_cast<uintptr_t>(base) % 16 == 0 && row_stride % 16 == 0 && box_cols <= 128 &&
                   box_rows >= 1 && box_rows <= 256 && cols <= row_stride,
               "tensor map: base {} / row stride {} not 16-byte aligned, or box [{}, {}] over the TMA's limits", base,
               row_stride, box_rows, box_cols);
    CUtensorMap map{};
    const cuuint64_t dims[2] = {cols, rows};
    const cuuint64_t strides[1] = {row_stride};
    const cuuint32_t box[2] = {box_cols, box_rows};
    const cuuint32_t element_strides[2] = {1, 1};
    const CUresult r = encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides,
                                      box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    DSV4_CHECK(r == CUDA_SUCCESS,
               "tensor map of a [{}, {}] byte matrix ({} bytes a row, box [{}, {}]): driver error {}", rows, cols,
               row_stride, box_rows, box_cols, static_cast<int>(r));
    return map;
}

}  // namespace dsv4::cuda
