// The cuBLASLt context of fast numerics' GEMMs (cublaslt_context.h).
#include "backend/cuda/cublaslt_context.h"

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace dsv4::cuda {

void check_lt(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS)
        fail("cuBLASLt error {} ({}) in {}", cublasGetStatusString(status), static_cast<int>(status), what);
}

void LtPlan::destroy() {
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
    *this = LtPlan{};
}

uint32_t lt_alignment(std::initializer_list<const void*> pointers) {
    uint32_t alignment = 256;
    for (const void* p : pointers) {
        while (alignment > 1 && reinterpret_cast<uintptr_t>(p) % alignment != 0) alignment /= 2;
    }
    return alignment;
}

LtPlan tn_plan() {
    LtPlan p;
    DSV4_LT(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set_lt_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    set_lt_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    return p;
}

LtContext::LtContext() {
    DSV4_LT(cublasLtCreate(&handle_));
    for (void*& w : workspaces_) DSV4_CUDA(cudaMalloc(&w, workspace_bytes_));
}

LtContext::~LtContext() {
    for (void* w : workspaces_) {
        if (w != nullptr) cudaFree(w);
    }
    if (handle_ != nullptr) cublasLtDestroy(handle_);
}

void* LtContext::workspace(int i) const {
    DSV4_CHECK(i >= 0 && i < kWorkspaces, "cuBLASLt: workspace {} of {}", i, kWorkspaces);
    return workspaces_[i];
}

void LtContext::choose_algo(LtPlan& p, uint32_t min_alignment) const {
    cublasLtMatmulPreference_t pref = nullptr;
    DSV4_LT(cublasLtMatmulPreferenceCreate(&pref));
    DSV4_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                                 sizeof(workspace_bytes_)));
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
        DSV4_LT(cublasLtMatmulPreferenceSetAttribute(pref, attr, &min_alignment, sizeof(min_alignment)));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    p.found = status == CUBLAS_STATUS_SUCCESS && found > 0;
    if (p.found) p.algo = result.algo;
}

}  // namespace dsv4::cuda
