// What the cuBLASLt GEMMs of fast numerics share (the FP8 block-scaled ones, cuda_fp8_gemm.h, and the bf16 ones,
// cuda_bf16_gemm.h): one handle, a workspace for each stream that may run GEMMs at once, the error check, and a plan
// (descriptors and the heuristic's algorithm) per shape. Host code; one context per CudaBackend.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace dsv4::cuda {

// Fails (core/error.h) naming the call and cuBLAS's status unless it succeeded.
void check_lt(cublasStatus_t status, const char* what);
#define DSV4_LT(call) ::dsv4::cuda::check_lt((call), #call)

template <typename T>
void set_lt_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
    DSV4_LT(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

// One GEMM shape's descriptors (D = op(A) . B, D's layout for C as well) and the algorithm cuBLASLt chose for them.
struct LtPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool found = false;
    void destroy();
};

// The largest power of two up to 256 that divides every address: the operand alignment a GEMM's algorithm may assume.
uint32_t lt_alignment(std::initializer_list<const void*> pointers);

// A plan's descriptor for D = A^T . B with float32 compute and scale (the TN GEMMs of both paths); layouts unset.
LtPlan tn_plan();

class LtContext {
  public:
    static constexpr int kWorkspaces = 2;  // the backend's stream and its side stream
    LtContext();
    ~LtContext();
    LtContext(const LtContext&) = delete;
    LtContext& operator=(const LtContext&) = delete;

    cublasLtHandle_t handle() const { return handle_; }
    // Workspace `i` (< kWorkspaces), failing on another index; workspace_bytes() each.
    void* workspace(int i) const;
    size_t workspace_bytes() const { return workspace_bytes_; }
    // Sets p.found and p.algo from cuBLASLt's heuristic for p's descriptors (its first choice within the workspace)
    // among the algorithms that take operands aligned to `min_alignment` bytes (cuBLASLt's default: 256).
    void choose_algo(LtPlan& p, uint32_t min_alignment = 256) const;

  private:
    cublasLtHandle_t handle_ = nullptr;
    void* workspaces_[kWorkspaces] = {};
    size_t workspace_bytes_ = size_t{32} << 20;
};

}  // namespace dsv4::cuda
