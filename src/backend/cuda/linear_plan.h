// The one place that chooses the kernel of a linear layer (dense or grouped projection) and of the routed-expert
// GEMMs from the shapes, the weight format and the numerics; a path forced by the environment
// (DSV4_LINEAR_PATH / DSV4_MOE_PATH) that the shapes cannot take fails, naming the requirement it misses.
#pragma once

#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/cuda_factory.h"
#include "backend/weights.h"

namespace dsv4::cuda {

enum class LinearPath {
    kGeneric,   // one warp per output row, float or double accumulation: any shape (exact / reference)
    kGemv,      // decode-sized GEMV, weights decoded in registers (m <= kMaxGemvRows)
    kGemmBf16,  // mma.sync GEMM on bf16-decoded weight tiles (fast)
    kBf16Lt,    // cuBLASLt bf16 GEMM: bf16 weights, activations rounded to bf16 (fast, prefill sizes; cuda_bf16_gemm.h)
    kFp8Lt,     // cuBLASLt FP8 block scaling, activations quantized per 1x128 (fast, FP8 weights)
    kFp8Wgmma,  // our FP8 wgmma GEMM, same roundings as kFp8Lt (fast, FP8 weights)
    kFp8Gemv,   // decode-sized FP8 GEMV on mma.sync, same roundings as kFp8Lt (fast, FP8 weights, m <= 8)
    kBf16Gemv,  // decode-sized bf16 GEMV on mma.sync, same roundings as kBf16Lt (fast, bf16 weights, m <= 8)
};
const char* linear_path_name(LinearPath p);

struct LinearProblem {
    Numerics numerics = Numerics::kExact;
    WeightRef w;    // the weight (a group's slice for grouped projections)
    int64_t m = 0;  // activation rows
    int64_t k = 0;  // reduction per row (= w.cols)
    bool grouped = false;
    bool slices_aligned = true;  // grouped FP8: every group's rows start on a 128-row scale block
};

// (token, expert) pairs from which fast numerics group the routed experts by expert (CudaOptions::min_grouped_*).
struct MoeThresholds {
    bool per_pair_mma = true;    // below grouped_fp8, the per-pair W4A8 GEMVs (CudaOptions::fp8_gemv)
    int64_t grouped_fp8 = 64;    // W4A8 / W8A8 on FP8 wgmma
    int64_t grouped_bf16 = 128;  // bf16 tiles, where the FP8 path cannot run (FNUZ activations, odd widths)
};

// Row thresholds of fast numerics and the forced paths, from CudaOptions (cuda_factory.h).
struct LinearTuning {
    int64_t min_gemm_rows = 32;  // tensor cores from here
    int64_t min_fp8_rows = 2;    // FP8 weights on FP8 tensor cores from here
    // cuBLASLt from here, our FP8 wgmma GEMM below: cuBLASLt measured faster at every row count on the Flash shapes
    // (bench kernels, H200, 2026-12-01: e.g. wo_b M=64 21.7 vs 147 us, M=8192 569 vs 2,402 us).
    int64_t min_fp8_lt_rows = 1;
    // bf16 weights on cuBLASLt's bf16 GEMM from here, the mma.sync GEMM below (CudaOptions::min_bf16_lt_rows).
    int64_t min_bf16_lt_rows = 256;
    // bf16 weights at min_bf16_gemv_rows..kMaxBf16GemvRows rows on the bf16 GEMV (CudaOptions::min_bf16_gemv_rows).
    int64_t min_bf16_gemv_rows = 9;  // off
    bool fp8_gemv = true;            // FP8 weights at 1..kMaxFp8GemvRows rows on the FP8 GEMV
    MoeThresholds moe;
    std::string forced_linear, forced_moe;
    static LinearTuning from(const CudaOptions& o);
};

// The path for `p`; `forced` (DSV4_LINEAR_PATH, empty for auto) names one and fails when p cannot take it.
LinearPath choose_linear_path(const LinearProblem& p, const LinearTuning& t, const std::string& forced);
// The requirement of `path` that `p` does not meet (empty when it can run).
std::string linear_path_unmet(LinearPath path, const LinearProblem& p);

enum class MoePath {
    kPerPair,      // one warp per (pair, output row), float / double accumulation (exact, reference)
    kPerPairGemv,  // per (token, expert) pair GEMV (decode sizes): W1, W3, SwiGLU, W2, combine
    kFusedGemv,    // the same GEMVs fused: W1 + W3 + SwiGLU in one launch, W2 + combine in another (decode sizes)
    kGroupedBf16,  // pairs grouped by expert, mma.sync on bf16-decoded tiles
    kGroupedFp8,   // pairs grouped by expert, W4A8 / W8A8 on FP8 wgmma with SwiGLU and re-quantization fused
    kPerPairMma,   // per pair W4A8 GEMVs on mma.sync (decode sizes, fast, FP4): W1 + W3 in one launch, SwiGLU, W2
};
const char* moe_path_name(MoePath p);

struct MoeProblem {
    Numerics numerics = Numerics::kExact;
    WeightFormat format = WeightFormat::kFp4Row;  // of the routed experts
    int64_t pairs = 0;
    int64_t d = 0;                          // hidden size
    int64_t inter = 0;                      // expert intermediate size
    Fp8Dialect dialect = Fp8Dialect::kOcp;  // of the activation quantisation (the backend's)
};
MoePath choose_moe_path(const MoeProblem& p, const MoeThresholds& t, const std::string& forced);
std::string moe_path_unmet(MoePath path, const MoeProblem& p);

}  // namespace dsv4::cuda
