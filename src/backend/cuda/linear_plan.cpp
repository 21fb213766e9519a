// Kernel choice for linears and routed experts (linear_plan.h).
#include "backend/cuda/linear_plan.h"

#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_fp8.h"
#include "core/error.h"

namespace dsv4::cuda {
namespace {

bool fp8_block_weight(const WeightRef& w) {
    return w.format == WeightFormat::kFp8Block && w.block_rows == 128 && w.block_cols == 128;
}

}  // namespace

const char* linear_path_name(LinearPath p) {
    switch (p) {
        case LinearPath::kGeneric:
            return "generic";
        case LinearPath::kGemv:
            return "gemv";
        case LinearPath::kGemmBf16:
            return "gemm_bf16";
        case LinearPath::kBf16Lt:
            return "bf16_lt";
        case LinearPath::kFp8Lt:
            return "fp8_lt";
        case LinearPath::kFp8Wgmma:
            return "fp8_wgmma";
        case LinearPath::kFp8Gemv:
            return "fp8_gemv";
        case LinearPath::kBf16Gemv:
            return "bf16_gemv";
    }
    return "?";
}

LinearTuning LinearTuning::from(const CudaOptions& o) {
    LinearTuning t;
    t.min_gemm_rows = o.min_gemm_rows;
    t.min_fp8_rows = o.min_fp8_rows;
    t.min_fp8_lt_rows = o.min_fp8_lt_rows;
    t.min_bf16_lt_rows = o.min_bf16_lt_rows;
    t.min_bf16_gemv_rows = o.min_bf16_gemv_rows;
    t.fp8_gemv = o.fp8_gemv;
    t.moe.per_pair_mma = o.fp8_gemv;
    t.moe.grouped_fp8 = o.min_grouped_fp8_pairs;
    t.moe.grouped_bf16 = o.min_grouped_pairs;
    t.forced_linear = o.linear_path;
    t.forced_moe = o.moe_path;
    return t;
}

std::string linear_path_unmet(LinearPath path, const LinearProblem& p) {
    const bool fast = p.numerics == Numerics::kFast;
    switch (path) {
        case LinearPath::kGeneric:
            return "";
        case LinearPath::kGemv:
            if (p.numerics == Numerics::kReference) return "exact or fast numerics (reference accumulates in double)";
            if (p.m > kMaxGemvRows) return "at most " + std::to_string(kMaxGemvRows) + " activation rows";
            if (!gemv_supported(p.w.format, p.k, p.m)) return "a reduction dim the GEMV's vector loads cover";
            return "";
        case LinearPath::kGemmBf16:
            if (!fast) return "fast numerics";
            if (!gemm_supported(p.k)) return "a reduction dim that is a multiple of 64";
            if (!p.slices_aligned) return "group rows on 128-row scale blocks";
            return "";
        case LinearPath::kBf16Lt:
        case LinearPath::kBf16Gemv:
            if (!fast) return "fast numerics";
            if (p.grouped) return "a dense projection";
            if (p.w.format != WeightFormat::kBF16) return "a bf16 weight";
            if (p.k % 8 != 0) return "a reduction dim that is a multiple of 8";
            if (path == LinearPath::kBf16Gemv) {
                if (p.m < 1) return "at least one activation row";
                if (p.m > kMaxBf16GemvRows) return "at most " + std::to_string(kMaxBf16GemvRows) + " activation rows";
                if (p.k % kBf16GemvBlock != 0) return "a reduction dim that is a multiple of 64";
            }
            return "";
        case LinearPath::kFp8Lt:
        case LinearPath::kFp8Wgmma:
        case LinearPath::kFp8Gemv:
            if (!fast) return "fast numerics";
            if (!fp8_block_weight(p.w)) return "an FP8 weight with 128x128 scale blocks";
            if (p.w.fp8_dialect != Fp8Dialect::kOcp) {
                return "OCP FP8 weights (the tensor cores' e4m3 is OCP; FNUZ weights take the bf16 paths, decoded in "
                       "software)";
            }
            if (p.k % 128 != 0) return "a reduction dim that is a multiple of 128";
            if (!p.slices_aligned) return "group rows on 128-row scale blocks";
            if (path == LinearPath::kFp8Lt && p.w.rows % 4 != 0) return "weight rows that are a multiple of 4";
            if (path == LinearPath::kFp8Gemv && !fp8_gemv_supported(p.m, p.k)) {
                return "at most " + std::to_string(kMaxFp8GemvRows) +
                       " activation rows whose quantized inputs fit in shared memory";
            }
            return "";
    }
    return "a known path";
}

LinearPath choose_linear_path(const LinearProblem& p, const LinearTuning& t, const std::string& forced) {
    if (!forced.empty()) {
        for (LinearPath path :
             {LinearPath::kGeneric, LinearPath::kGemv, LinearPath::kGemmBf16, LinearPath::kBf16Lt, LinearPath::kFp8Lt,
              LinearPath::kFp8Wgmma, LinearPath::kFp8Gemv, LinearPath::kBf16Gemv}) {
            if (forced != linear_path_name(path)) continue;
            const std::string why = linear_path_unmet(path, p);
            DSV4_CHECK(why.empty(), "linear path {} (DSV4_LINEAR_PATH) needs {} (weight [{}, {}], {} rows)", forced,
                       why, p.w.rows, p.w.cols, p.m);
            return path;
        }
        fail(
            "DSV4_LINEAR_PATH={} is not one of generic, gemv, gemm_bf16, bf16_lt, fp8_lt, fp8_wgmma, fp8_gemv, "
            "bf16_gemv",
            forced);
    }
    if (p.numerics == Numerics::kFast) {
        if (t.fp8_gemv && linear_path_unmet(LinearPath::kFp8Gemv, p).empty()) {  // 1 to kMaxFp8GemvRows rows
            return LinearPath::kFp8Gemv;
        }
        if (p.m >= t.min_fp8_rows && linear_path_unmet(LinearPath::kFp8Lt, p).empty()) {
            return p.m >= t.min_fp8_lt_rows ? LinearPath::kFp8Lt : LinearPath::kFp8Wgmma;
        }
        if (p.m >= t.min_bf16_gemv_rows && linear_path_unmet(LinearPath::kBf16Gemv, p).empty()) {
            return LinearPath::kBf16Gemv;
        }
        if (p.m >= t.min_bf16_lt_rows && linear_path_unmet(LinearPath::kBf16Lt, p).empty()) {
            return LinearPath::kBf16Lt;
        }
        if (p.m >= t.min_gemm_rows && linear_path_unmet(LinearPath::kGemmBf16, p).empty()) {
            return LinearPath::kGemmBf16;
        }
    }
    if (linear_path_unmet(LinearPath::kGemv, p).empty()) return LinearPath::kGemv;
    return LinearPath::kGeneric;
}

const char* moe_path_name(MoePath p) {
    switch (p) {
        case MoePath::kPerPair:
            return "per_pair";
        case MoePath::kPerPairGemv:
            return "per_pair_gemv";
        case MoePath::kFusedGemv:
            return "fused_gemv";
        case MoePath::kGroupedBf16:
            return "grouped_bf16";
        case MoePath::kGroupedFp8:
            return "grouped_fp8";
        case MoePath::kPerPairMma:
            return "per_pair_mma";
    }
    return "?";
}

std::string moe_path_unmet(MoePath path, const MoeProblem& p) {
    const bool fast = p.numerics == Numerics::kFast;
    switch (path) {
        case MoePath::kPerPair:
            return "";
        case MoePath::kPerPairGemv:
        case MoePath::kFusedGemv:
            if (p.numerics == Numerics::kReference) return "exact or fast numerics";
            if (path == MoePath::kFusedGemv && p.d > kMaxFusedMoeHidden) {
                return "a hidden size of at most " + std::to_string(kMaxFusedMoeHidden) +
                       " (the token's activations are staged in shared memory)";
            }
            if (p.pairs > kMaxGemvPairs) return "at most " + std::to_string(kMaxGemvPairs) + " pairs";
            if (!gemv_supported(p.format, p.d, 1) || !gemv_supported(p.format, p.inter, 1)) {
                return "widths the GEMV's vector loads cover";
            }
            return "";
        case MoePath::kGroupedBf16:
            if (!fast) return "fast numerics";
            if (!gemm_supported(p.d) || !gemm_supported(p.inter)) return "widths that are multiples of 64";
            return "";
        case MoePath::kGroupedFp8:
        case MoePath::kPerPairMma:
            if (!fast) return "fast numerics";
            if (p.format != WeightFormat::kFp4Row) return "FP4 routed experts";
            if (p.dialect != Fp8Dialect::kOcp) return "OCP FP8 numerics (it quantises activations to OCP e4m3)";
            if (p.d % 128 != 0 || p.inter % 128 != 0) return "hidden and intermediate sizes that are multiples of 128";
            if (path == MoePath::kPerPairMma) {
                if (p.pairs > kMaxGemvPairs) return "at most " + std::to_string(kMaxGemvPairs) + " pairs";
                if (!expert_gemv_fp4_supported(p.d) || !expert_gemv_fp4_supported(p.inter)) {
                    return "widths whose quantized input fits in shared memory";
                }
            }
            return "";
    }
    return "a known path";
}

MoePath choose_moe_path(const MoeProblem& p, const MoeThresholds& t, const std::string& forced) {
    if (!forced.empty()) {
        for (MoePath path : {MoePath::kPerPair, MoePath::kPerPairGemv, MoePath::kFusedGemv, MoePath::kGroupedBf16,
                             MoePath::kGroupedFp8, MoePath::kPerPairMma}) {
            if (forced != moe_path_name(path)) continue;
            const std::string why = moe_path_unmet(path, p);
            DSV4_CHECK(why.empty(), "MoE path {} (DSV4_MOE_PATH) needs {} ({} pairs, widths {} / {})", forced, why,
                       p.pairs, p.d, p.inter);
            return path;
        }
        fail(
            "DSV4_MOE_PATH={} is not one of per_pair, per_pair_gemv, fused_gemv, grouped_bf16, grouped_fp8, "
            "per_pair_mma",
            forced);
    }
    if (p.numerics == Numerics::kFast) {
        if (p.pairs >= t.grouped_fp8 && moe_path_unmet(MoePath::kGroupedFp8, p).empty()) return MoePath::kGroupedFp8;
        if (p.pairs >= t.grouped_bf16 && moe_path_unmet(MoePath::kGroupedBf16, p).empty()) {
            return MoePath::kGroupedBf16;
        }
        // Below grouped_fp8 pairs: what kPerPairMma needs includes all kGroupedFp8 needs, which returned above.
        if (t.per_pair_mma && moe_path_unmet(MoePath::kPerPairMma, p).empty()) {
            return MoePath::kPerPairMma;
        }
    }
    // The per-pair GEMVs, not their two-launch fusion (kFusedGemv, forced only): the fused kernels computed the same
    // bits slower (1 token 103 vs 97 us, 8 tokens 615 vs 565 us; batch-1 decode 57.3 vs 58.6 tok/s; H200,
    // performance-log.md 2026-12-03).
    if (moe_path_unmet(MoePath::kPerPairGemv, p).empty()) return MoePath::kPerPairGemv;
    return MoePath::kPerPair;
}

}  // namespace dsv4::cuda
