// cuBLASLt bf16 GEMMs for the float linears of fast numerics at prefill sizes (the compressors' projections, the
// indexer's head weights, the router's gate: bf16 weights in the checkpoint): activations rounded to bf16, the weight's
// bf16 values, float32 accumulation and output, the roundings of our mma.sync GEMM (kernels_gemm.cu) in cuBLAS's
// summation order. TN in cuBLAS terms, as the FP8 GEMMs (cuda_fp8_gemm.h): D[n_w x M] = W[n_w x K] . X[M x K]^T,
// i.e. row-major y[M][n_w]. Host code; one instance per CudaBackend.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "backend/cuda/cublaslt_context.h"
#include "backend/weights.h"

namespace dsv4::cuda {

// One GEMM: y[r * y_stride + c] = sum_j x[r * x_stride + j] * W[c][j] for r < m, c < w.rows, j < w.cols, x bf16.
struct Bf16LtGemm {
    const uint16_t* x = nullptr;  // bf16 bits
    int64_t x_stride = 0;
    int64_t m = 0;
    WeightRef w;  // WeightFormat::kBF16
    float* y = nullptr;
    int64_t y_stride = 0;
};

class Bf16LtGemms {
  public:
    explicit Bf16LtGemms(const LtContext& lt) : lt_(lt) {}
    ~Bf16LtGemms();
    Bf16LtGemms(const Bf16LtGemms&) = delete;
    Bf16LtGemms& operator=(const Bf16LtGemms&) = delete;

    // Why cuBLASLt cannot run this weight, or null when it can.
    static const char* unmet(const WeightRef& w);
    // Enqueues the GEMM; false (nothing enqueued) when cuBLASLt has no algorithm for the shape (remembered).
    // `workspace`: which of the context's workspaces, one for each stream that may run GEMMs at once.
    bool run(cudaStream_t stream, const Bf16LtGemm& g, int workspace = 0);

  private:
    LtPlan& plan(int64_t n_w, int64_t k, int64_t m, int64_t ldb, int64_t ldd, uint32_t alignment);

    const LtContext& lt_;
    // By shape, strides and the operands' alignment (lt_alignment: activations and outputs may be views).
    std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t>, LtPlan> plans_;
};

}  // namespace dsv4::cuda
