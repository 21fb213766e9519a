// Dense FP8 GEMM on TMA-fed, warp-specialized wgmma (kernels_fp8_gemm_tma.cu): y[t][r] = sum over 128-wide K blocks
// b of (sum_{j in b} W[r][j] * X[t][j]) * ws[r / 128][b] * xs[b][t], the roundings of cuBLASLt's block-scaled FP8
// GEMM (LinearPath::kFp8Lt) and of the staged wgmma kernel: e4m3 products summed in float32 by the tensor cores within
// a K block, promoted (scaled) in float32 once per block in block order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backend/cuda/kernels_fp8.h"

namespace dsv4::cuda {

struct Fp8TmaGemmParams {
    const uint8_t* w_codes = nullptr;   // [rows][k] e4m3 (OCP), rows k bytes apart
    const uint8_t* w_scales = nullptr;  // UE8M0, [ceil(rows / 128)][w_scale_cols], one per 128 x 128 block
    int64_t w_scale_cols = 0;
    int64_t rows = 0;    // output features
    int64_t k = 0;       // reduction, a multiple of 128
    Fp8Act x;            // activations quantized per 1 x 128 (x.rows tokens)
    int64_t x_col0 = 0;  // first column of x this product reads (a multiple of 128)
    float* y = nullptr;  // y[t * y_stride + r]
    int64_t y_stride = 0;
};

// The requirement of the TMA kernel that `p` misses (empty when it can run).
std::string fp8_tma_gemm_unmet(const Fp8TmaGemmParams& p);
void launch_fp8_tma_gemm(cudaStream_t stream, const Fp8TmaGemmParams& p);

}  // namespace dsv4::cuda
