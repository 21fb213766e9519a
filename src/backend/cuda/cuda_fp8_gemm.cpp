// cuBLASLt FP8 block-scaled GEMMs (cuda_fp8_gemm.h).
#include "backend/cuda/cuda_fp8_gemm.h"

#include <cstdio>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace dsv4::cuda {

Fp8LtGemms::~Fp8LtGemms() {
    for (auto& [key, p] : plans_) p.destroy();
    for (auto& [key, e] : scales_) cudaFree(e.data);
}

const char* Fp8LtGemms::unmet(const WeightRef& w, int64_t k_cols) {
    if (w.format != WeightFormat::kFp8Block) return "an FP8 block-scaled weight";
    if (w.block_rows != 128 || w.block_cols != 128) return "128x128 weight scale blocks";
    if (w.cols % 128 != 0 || k_cols % 128 != 0) return "a reduction dim that is a multiple of 128";
    if (w.rows % 4 != 0) return "weight rows that are a multiple of 4";
    return nullptr;
}

void Fp8LtGemms::register_weight(cudaStream_t stream, const WeightRef& w) {
    if (w.format != WeightFormat::kFp8Block || w.scales == nullptr || scales_.count(w.scales) != 0) return;
    ScaleEntry e;
    e.block_rows = (w.rows + w.block_rows - 1) / w.block_rows;
    const int64_t blocks_k = (w.cols + w.block_cols - 1) / w.block_cols;
    e.stride = (blocks_k + 3) / 4 * 4;  // cuBLASLt: the K-block stride of BLK128x128 scales is a multiple of 4
    e.src_stride = w.scale_cols;
    DSV4_CUDA(cudaMalloc(&e.data, static_cast<size_t>(e.block_rows * e.stride) * sizeof(float)));
    launch_expand_block_scales(stream, {w.scales, e.block_rows, blocks_k, w.scale_cols, e.stride, e.data});
    DSV4_CUDA(cudaGetLastError());
    scales_.emplace(w.scales, e);
}

const float* Fp8LtGemms::find_scales(const WeightRef& w) const {
    auto it = scales_.upper_bound(w.scales);
    if (it == scales_.begin()) return nullptr;
    --it;
    const ScaleEntry& e = it->second;
    const int64_t offset = w.scales - it->first;  // a row slice starts on a 128-row block: whole scale rows
    if (offset % e.src_stride != 0 || offset / e.src_stride >= e.block_rows) return nullptr;
    return e.data + (offset / e.src_stride) * e.stride;
}

LtPlan& Fp8LtGemms::plan(int64_t n_w, int64_t k, int64_t m_pad, int64_t ldb, int64_t ldd, const float* w_scales,
                         const float* x_scales) {
    const auto key = std::make_tuple(n_w, k, m_pad, ldb, ldd);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    LtPlan p = tn_plan();
    set_lt_attr(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                static_cast<int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F));
    set_lt_attr(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                static_cast<int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F));
    set_lt_attr(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(w_scales));
    set_lt_attr(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(x_scales));
    DSV4_LT(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, k, n_w, k));      // W^T: column-major K x n_w
    DSV4_LT(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, k, m_pad, ldb));  // X: column-major K x M
    DSV4_LT(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, n_w, m_pad, ldd));    // y: column-major n_w x M
    lt_.choose_algo(p);
    if (!p.found) {
        std::fprintf(stderr,
                     "cuBLASLt: no FP8 block-scaled algorithm for [%lld x %lld] x [%lld x %lld]; using the wgmma "
                     "kernel\n",
                     static_cast<long long>(m_pad), static_cast<long long>(k), static_cast<long long>(n_w),
                     static_cast<long long>(k));
    }
    return plans_.emplace(key, p).first->second;
}

bool Fp8LtGemms::run(cudaStream_t stream, const Fp8LtGemm& g, int workspace) {
    const Fp8Act& x = *g.x;
    if (x.rows == 0) return true;
    const char* why = unmet(g.w, x.k);
    DSV4_CHECK(why == nullptr, "FP8 cuBLASLt GEMM needs {}", why);
    DSV4_CHECK(x.rows_pad % 4 == 0 && g.x_col0 % 128 == 0 && g.x_col0 + g.w.cols <= x.k,
               "FP8 cuBLASLt GEMM: activation columns [{}, {}) outside rows of {}", g.x_col0, g.x_col0 + g.w.cols, x.k);
    const float* w_scales = find_scales(g.w);
    DSV4_CHECK(w_scales != nullptr, "FP8 cuBLASLt GEMM: the weight's scales were not registered at load");
    const bool padded = x.rows % 4 != 0;
    DSV4_CHECK(!padded || g.scratch != nullptr, "FP8 cuBLASLt GEMM: {} rows need a padded output", x.rows);
    float* d = padded ? g.scratch : g.y;
    const int64_t ldd = padded ? g.w.rows : g.y_stride;
    const float* x_scales = x.scales + (g.x_col0 / 128) * x.rows_pad;
    LtPlan& p = plan(g.w.rows, g.w.cols, x.rows_pad, x.k, ldd, w_scales, x_scales);
    if (!p.found) return false;
    set_lt_attr(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(w_scales));
    set_lt_attr(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(x_scales));
    const float alpha = 1.0f, beta = 0.0f;
    DSV4_LT(cublasLtMatmul(lt_.handle(), p.desc, &alpha, g.w.data, p.a, x.codes + g.x_col0, p.b, &beta, d, p.d, d, p.d,
                           &p.algo, lt_.workspace(workspace), lt_.workspace_bytes(), stream));
    if (padded) {
        DSV4_CUDA(cudaMemcpy2DAsync(g.y, g.y_stride * sizeof(float), d, g.w.rows * sizeof(float),
                                    g.w.rows * sizeof(float), x.rows, cudaMemcpyDeviceToDevice, stream));
    }
    return true;
}

}  // namespace dsv4::cuda
