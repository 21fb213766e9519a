// Routed experts at prefill sizes with no FP4 expansion inside the GEMM: each step expands the FP4 experts that have
// tokens to e4m3 copies once (the bytes and row scales the staged kernel expands into its shared memory for every
// tile), gathers the activation rows in the plan's slot order, and runs grouped GEMMs on TMA-fed, warp-specialized
// wgmma over them (kernels_expert_prep.cu, kernels_expert_tma.cu). The same tiles' arithmetic as the staged kernel
// (kernels_expert_fp8.cu): the same wgmma steps, promotions and epilogues, so the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/kernels_fp8.h"

namespace dsv4::cuda {

// e4m3 copies of one projection of every expert. Codes [experts][row tiles][tile_rows][k]: a row tile is 128 output
// features (the SwiGLU projection's: W1's 128 rows of them, then W3's same rows, 256); row scales [experts][row
// tiles][k / 128][tile_rows] floats (2^(emax - 133) of the row's K block, as expand_fp4_groups gives them); rows past
// the weight are zero.
struct ExpertFp8Copy {
    uint8_t* codes = nullptr;
    float* scales = nullptr;
    int64_t rows = 0;  // output features of each expert's weight
    int64_t k = 0;     // reduction, a multiple of 128
    int tile_rows = 128;
    __host__ __device__ int64_t row_tiles() const { return (rows + 127) / 128; }
    int64_t code_rows(int experts) const { return experts * row_tiles() * tile_rows; }
    size_t code_bytes(int experts) const { return static_cast<size_t>(code_rows(experts) * k); }
    size_t scale_bytes(int experts) const { return static_cast<size_t>(code_rows(experts) * (k / 128)) * 4; }
};

// Expands the FP4 weights (table, and table_up for SwiGLU: out.tile_rows 256) of the experts with pairs this step
// (counts[e] > 0) into `out`; offsets below the e4m3 window are counted in clamp_count (one a row's 32-group).
struct ExpertExpandArgs {
    const WeightRef* table = nullptr;
    const WeightRef* table_up = nullptr;
    const int32_t* counts = nullptr;
    int experts = 0;
    ExpertFp8Copy out;
    int32_t* clamp_count = nullptr;
};
void launch_expert_expand(cudaStream_t stream, const ExpertExpandArgs& a);

// out row i = x row row_ids[i] / x_div for i < rows (codes and scales): activations in slot order.
struct GatherRowsArgs {
    Fp8Act x;
    const int32_t* row_ids = nullptr;
    int x_div = 1;
    Fp8Act out;
};
void launch_gather_fp8_rows(cudaStream_t stream, const GatherRowsArgs& a);

// The grouped GEMM over `w`: g's plan (tile_count / tile_expert / tile_row0 / tile_rows, max_tiles), its epilogue
// (SwiGLU: act, route_weights, limit, through row_ids; plain: y by row_ids) and tile width (64 for SwiGLU, 128
// plain); g's activations are `x_sorted`, the rows already in slot order (slot i at row i). The caller keeps the
// shapes in step: g.k = w.k = x_sorted.k, widths multiples of 128 (the grouped FP8 path's requirement, linear_plan).
struct ExpertTmaArgs {
    ExpertGemmArgs g;
    ExpertFp8Copy w;
    int experts = 0;  // in w
    Fp8Act x_sorted;
};
void launch_expert_gemm_tma(cudaStream_t stream, const ExpertTmaArgs& a);
constexpr int kExpertTmaUpTile = 64;     // tokens a SwiGLU tile (256 weight rows)
constexpr int kExpertTmaDownTile = 128;  // tokens a plain tile (128 weight rows)

}  // namespace dsv4::cuda
