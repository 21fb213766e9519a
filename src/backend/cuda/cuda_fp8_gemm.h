// cuBLASLt FP8 GEMMs with DeepSeek's block scaling (sm_90 only in cuBLAS 13.1): activations e4m3 with one float32
// scale per 1x128 block (VEC128_32F), weights e4m3 with one float32 scale per 128x128 block (BLK128x128_32F, the
// checkpoint's UE8M0 bytes expanded once when the weight is registered). The GEMM is TN in cuBLAS terms:
// D[n_w x M] = W[n_w x K] . X[M x K]^T, i.e. row-major y[M][n_w]; M and n_w multiples of 4 (the activations are
// padded, see kernels_fp8.h). Host code; one instance per CudaBackend.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "backend/cuda/cublaslt_context.h"
#include "backend/cuda/kernels_fp8.h"
#include "backend/weights.h"

namespace dsv4::cuda {

// One GEMM: y[r * y_stride + c] = sum_j X[r][x_col0 + j] * W[c][j] for r < x.rows, c < w.rows, j < w.cols.
struct Fp8LtGemm {
    const Fp8Act* x = nullptr;
    int64_t x_col0 = 0;  // first activation column (a group of a grouped projection); multiple of 128
    WeightRef w;
    float* y = nullptr;
    int64_t y_stride = 0;
    float* scratch = nullptr;  // rows_pad * w.rows floats when x.rows % 4 != 0 (the padded rows land there)
};

class Fp8LtGemms {
  public:
    explicit Fp8LtGemms(const LtContext& lt) : lt_(lt) {}
    ~Fp8LtGemms();
    Fp8LtGemms(const Fp8LtGemms&) = delete;
    Fp8LtGemms& operator=(const Fp8LtGemms&) = delete;

    // Expands the weight's UE8M0 block scales into float32 (device memory owned here); needs no stream order with
    // later GEMMs beyond `stream`. Weights of row slices (CudaBackend::weight_rows) find their parent's scales.
    void register_weight(cudaStream_t stream, const WeightRef& w);
    bool registered(const WeightRef& w) const { return find_scales(w) != nullptr; }
    // Why cuBLASLt cannot run this weight / activation pair, or null when it can.
    static const char* unmet(const WeightRef& w, int64_t k_cols);
    // Enqueues the GEMM; false (nothing enqueued) when cuBLASLt has no algorithm for the shape (remembered).
    // `workspace`: which of the context's workspaces, one for each stream that may run GEMMs at once.
    bool run(cudaStream_t stream, const Fp8LtGemm& g, int workspace = 0);

  private:
    struct ScaleEntry {
        float* data = nullptr;
        int64_t stride = 0;      // floats per 128-row block (K blocks rounded up to 4)
        int64_t src_stride = 0;  // UE8M0 bytes per 128-row block
        int64_t block_rows = 0;
    };
    const float* find_scales(const WeightRef& w) const;
    // The heuristic needs the scale pointers set (block scaling modes reject null ones).
    LtPlan& plan(int64_t n_w, int64_t k, int64_t m_pad, int64_t ldb, int64_t ldd, const float* w_scales,
                 const float* x_scales);

    const LtContext& lt_;
    std::map<const uint8_t*, ScaleEntry> scales_;  // by the weight's UE8M0 base pointer
    std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>, LtPlan> plans_;
};

}  // namespace dsv4::cuda
