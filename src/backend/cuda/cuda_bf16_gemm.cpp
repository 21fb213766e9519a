// cuBLASLt bf16 GEMMs (cuda_bf16_gemm.h).
#include "backend/cuda/cuda_bf16_gemm.h"

#include <cstdio>

#include "core/error.h"

namespace dsv4::cuda {

Bf16LtGemms::~Bf16LtGemms() {
    for (auto& [key, p] : plans_) p.destroy();
}

const char* Bf16LtGemms::unmet(const WeightRef& w) {
    if (w.format != WeightFormat::kBF16) return "a bf16 weight";
    if (w.cols % 8 != 0) return "a reduction dim that is a multiple of 8 (16-byte rows)";
    if ((reinterpret_cast<uintptr_t>(w.data) & 15) != 0) return "a 16-byte aligned weight";
    return nullptr;
}

LtPlan& Bf16LtGemms::plan(int64_t n_w, int64_t k, int64_t m, int64_t ldb, int64_t ldd, uint32_t alignment) {
    const auto key = std::make_tuple(n_w, k, m, ldb, ldd, alignment);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    LtPlan p = tn_plan();
    DSV4_LT(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k, n_w, k));   // W^T: column-major K x n_w
    DSV4_LT(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, k, m, ldb));   // X: column-major K x M
    DSV4_LT(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, n_w, m, ldd));  // y: column-major n_w x M
    lt_.choose_algo(p, alignment);
    if (!p.found) {
        std::fprintf(stderr, "cuBLASLt: no bf16 algorithm for [%lld x %lld] x [%lld x %lld]; using the mma.sync GEMM\n",
                     static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n_w),
                     static_cast<long long>(k));
    }
    return plans_.emplace(key, p).first->second;
}

bool Bf16LtGemms::run(cudaStream_t stream, const Bf16LtGemm& g, int workspace) {
    if (g.m == 0) return true;
    const char* why = unmet(g.w);
    DSV4_CHECK(why == nullptr, "bf16 cuBLASLt GEMM needs {}", why);
    DSV4_CHECK(g.x_stride >= g.w.cols && g.y_stride >= g.w.rows,
               "bf16 cuBLASLt GEMM: strides {} / {} below the weight's [{}, {}]", g.x_stride, g.y_stride, g.w.rows,
               g.w.cols);
    LtPlan& p = plan(g.w.rows, g.w.cols, g.m, g.x_stride, g.y_stride, lt_alignment({g.x, g.w.data, g.y}));
    if (!p.found) return false;
    const float alpha = 1.0f, beta = 0.0f;
    DSV4_LT(cublasLtMatmul(lt_.handle(), p.desc, &alpha, g.w.data, p.a, g.x, p.b, &beta, g.y, p.d, g.y, p.d, &p.algo,
                           lt_.workspace(workspace), lt_.workspace_bytes(), stream));
    return true;
}

}  // namespace dsv4::cuda
