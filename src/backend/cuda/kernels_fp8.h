// Launchers of the FP8 tensor-core paths of `fast` numerics: activation quantization per 1x128 block to e4m3 with
// power-of-two float scales (the rounding of DeepSeek's inference, i.e. of `reference` numerics), the float32 weight
// scales cuBLASLt's 128x128 block scaling reads, and the grouped (routed-expert) / dense GEMM on FP8 wgmma. Every
// launcher takes a parameter struct, enqueues on `stream` and returns; the caller checks cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/weights.h"

namespace dsv4::cuda {

constexpr int kFp8ActBlock = 128;  // activation elements per scale (one K block of every FP8 GEMM)

// Activations quantized per 1x128 block: value = code * scale. Rows at or past `rows` (up to rows_pad) hold zero
// codes and zero scales. Scales are row-fastest ([k / 128][rows_pad], cuBLASLt's VEC128 layout for the B operand).
// A block holding a NaN or an infinity gets a NaN scale, so every output it feeds is NaN.
struct Fp8Act {
    uint8_t* codes = nullptr;  // [rows_pad][k]
    float* scales = nullptr;   // [k / 128][rows_pad]
    int64_t rows = 0;
    int64_t rows_pad = 0;
    int64_t k = 0;
};
// Rows padded to a multiple of 4 (cuBLASLt's FP8 requirement on M and N).
inline int64_t fp8_rows_pad(int64_t rows) {
    return (rows + 3) / 4 * 4;
}

// out = Q(bf16(x)) per 128 elements of each row (k % 128 == 0; x rows x_stride floats apart, 16-byte aligned).
struct QuantFp8Args {
    const float* x = nullptr;
    int64_t x_stride = 0;
    Fp8Act out;
};
void launch_quant_fp8(cudaStream_t stream, const QuantFp8Args& a);

// out = Q(bf16(silu(min(g, limit)) * clamp(u, -limit, limit) * row_weight)) (limit <= 0: no clamp; row_weights may
// be null): the shared expert's activation, quantized for its down projection.
struct SwigluQuantArgs {
    const float* g = nullptr;  // [rows][k]
    const float* u = nullptr;  // [rows][k]
    const float* row_weights = nullptr;
    float limit = 0.0f;
    Fp8Act out;
};
void launch_swiglu_quant_fp8(cudaStream_t stream, const SwigluQuantArgs& a);

// dst[rb * dst_stride + kb] = 2^(src[rb * src_stride + kb] - 127) (0xFF: NaN) for kb < blocks_k, 0 in the padding
// up to dst_stride: the UE8M0 128x128 block scales as cuBLASLt's BLK128x128 float32 layout (K blocks fastest).
struct ExpandScalesArgs {
    const uint8_t* src = nullptr;
    int64_t block_rows = 0;
    int64_t blocks_k = 0;
    int64_t src_stride = 0;
    int64_t dst_stride = 0;
    float* dst = nullptr;
};
void launch_expand_block_scales(cudaStream_t stream, const ExpandScalesArgs& a);

// GEMM on FP8 wgmma with the weights on the M side and the tokens on N ("swap-AB"): out[token][feature] =
// sum_k W[feature][k] * X[token][k]. Weights: FP4 e2m1 (+ per-32 UE8M0 scales), expanded to e4m3 in shared memory
// with each per-32 scale folded in as an exponent offset from the row's largest scale in the 128-wide K block
// (exact for offsets in [-8, 6] of the window, e4m3-rounded below it: counted in clamp_count), or FP8 e4m3 (+ 128x128
// UE8M0 scales) as they are. Activations: Fp8Act. Accumulation: float32, promoted (scaled) once per K block.
//
// Expert mode (tile_expert set): tile t covers token slots [tile_row0[t], + tile_rows[t]) of row_ids, all of expert
// tile_expert[t]; X row of slot i = row_ids[i] / x_div; output row = row_ids[i]. Dense mode: one weight (`dense`),
// tiles of `tile_n` consecutive tokens of dense_m, X row = output row = the token.
// SwiGLU mode (table_up set, expert mode): each block computes 128 features of both W1 (table) and W3 (table_up) and
// writes act = Q(bf16(silu(min(g, limit)) * clamp(u) * route_weights[row])) per 128 features into `act`; otherwise
// out rows are y[row * y_stride + feature] (float32).
struct ExpertGemmArgs {
    WeightFormat format = WeightFormat::kFp4Row;
    const WeightRef* table = nullptr;     // device array [experts]
    const WeightRef* table_up = nullptr;  // SwiGLU: W3 of every expert
    WeightRef dense;
    int64_t rows = 0;                  // output features of every weight (SwiGLU: multiple of 128)
    int64_t k = 0;                     // reduction, multiple of 128
    const uint8_t* x_codes = nullptr;  // row r at x_codes + r * x_stride (16-byte aligned)
    int64_t x_stride = 0;
    const float* x_scales = nullptr;  // [k / 128][x_rows_pad]
    int64_t x_rows_pad = 0;
    int x_div = 1;
    int64_t dense_m = 0;
    int max_tiles = 0;  // grid bound (expert mode); the count is tile_count[0] on the device
    const int32_t* tile_count = nullptr;
    const int32_t* tile_expert = nullptr;
    const int32_t* tile_row0 = nullptr;
    const int32_t* tile_rows = nullptr;
    const int32_t* row_ids = nullptr;
    int tile_n = 0;  // tokens per tile: one of expert_gemm_tile_widths()
    float* y = nullptr;
    int64_t y_stride = 0;
    Fp8Act act;
    const float* route_weights = nullptr;
    float limit = 0.0f;
    int32_t* clamp_count = nullptr;  // (tile, 32-group) conversions whose offset fell below -8; optional
    bool warp_specialized = false;   // FP4 weights: the producer / consumer kernel (kernels_expert_ws.cu), same bits
    int l2_prefetch = 0;             // FP4 decode tiles' L2 prefetch-size hint in bytes: 0, 128 or 256 (same bits)
    bool register_weights = false;   // FP4 decode tiles: weights expanded into wgmma's register operand (not the
                                     // same bits: a wgmma step mixes the K block's scale groups)
};
// The kernels of launch_expert_gemm_fp8, one chosen per launch by choose_expert_kernel.
enum class ExpertKernel {
    kStaged,           // kernels_expert_fp8.cu: weights expanded into shared memory, two warpgroups
    kWarpSpecialized,  // kernels_expert_ws.cu: a producer warpgroup expands, two consumers (FP4, warp_specialized)
    kRegisterWeights,  // kernels_expert_rs.cu: FP4 16-token tiles, weights in registers (register_weights, and K's
                       // activation tile fits shared memory: expert_gemm_rs_fits)
};
ExpertKernel choose_expert_kernel(const ExpertGemmArgs& a);
void launch_expert_gemm_fp8(cudaStream_t stream, const ExpertGemmArgs& a);
// The warp-specialized kernel over `tiles` token tiles (launch_expert_gemm_fp8 calls it for FP4 weights when
// a.warp_specialized is set).
void launch_expert_gemm_ws(cudaStream_t stream, const ExpertGemmArgs& a, unsigned tiles);
// The register-weights kernel over `tiles` 16-token tiles, and whether it takes a's shapes and flags.
bool expert_gemm_rs_fits(const ExpertGemmArgs& a);
void launch_expert_gemm_rs(cudaStream_t stream, const ExpertGemmArgs& a, unsigned tiles);
// Token tile widths instantiated for (format, swiglu); 0 where the combination has none. Small first.
int expert_gemm_small_tile(WeightFormat format, bool swiglu);
// The plain (down) projection's prefill tile with CudaOptions::expert_half_wide: two blocks an SM.
constexpr int kExpertHalfWideTile = 48;
int expert_gemm_large_tile(WeightFormat format, bool swiglu, bool half_wide = false);
constexpr int kExpertGemmFeatures = 128;  // output features per block

// Decode-sized linears on FP8 tensor cores (kernels_gemv_fp8.cu): FP8 e4m3 weights with 128x128 UE8M0 scales (OCP),
// 1..kMaxFp8GemvRows tokens. y[t][r] = sum over 128-wide K blocks b of (sum_{j in b} W[r][j] * Q[t][j]) * ws[r /
// 128][b]
// * qs[t][b], the inner sums on mma.sync (m16n8k32, weight rows on M, tokens on N, float32 accumulation), the outer in
// float32 in block order; Q / qs are x rounded to bf16 and quantized per 128 with launch_quant_fp8's codes and scales,
// computed in the kernel's prologue. A token's sums do not depend on the other tokens of the launch (batch invariant
// from 1 to kMaxFp8GemvRows rows). Several weights of one K in one launch: the projections of one input, or the
// groups of a grouped linear, each with its own input columns and output.
constexpr int kMaxFp8GemvRows = 8;
constexpr int kFp8GemvQuantizeRows = 2;  // from this many tokens the caller quantizes the input (Fp8GemvParams)
constexpr int kMaxFp8GemvTargets = 8;
struct Fp8GemvTarget {
    WeightRef w;
    const float* x = nullptr;  // token t's k inputs at x + t * x_stride (16-byte aligned)
    float* y = nullptr;        // token t's w.rows outputs at y + t * y_stride
    int64_t y_stride = 0;
    int64_t col0 = 0;  // with `quantized`: the target's first input column in it (a multiple of 128)
};
struct Fp8GemvParams {
    int n = 0;
    Fp8GemvTarget targets[kMaxFp8GemvTargets];
    int64_t x_stride = 0;  // floats, a multiple of 4
    int m = 0;
    int64_t k = 0;
    // The inputs already quantized (launch_quant_fp8, the same codes and scales), read instead of x: several tokens
    // cost every block that many rows of float loads and quantization, against one quantization launch.
    Fp8Act quantized;
    // Set (one target, inputs not quantized): the input is SwiGLU(x, swiglu_up) with the clamp `limit`, x_stride
    // apart like x (the shared expert's down projection over its up projection's two outputs).
    const float* swiglu_up = nullptr;
    float limit = 0.0f;
    // Split sums across thread blocks: fp8_gemv_partials(...) floats, and fp8_gemv_arrivals(...) counters that are zero
    // before the launch (and are again after it).
    float* partials = nullptr;
    int32_t* arrivals = nullptr;
    // Warps a launch aims for before it stops splitting K (CudaOptions::fp8_gemv_warps; 0: the kernel's default, one
    // wave of 16 warps an SM on the H200). Other values give other splits, so other float32 summation orders.
    int target_warps = 0;
    // Set by the launcher: thread blocks sharing one 128-row group's K blocks (each a range of them), the cumulative
    // thread blocks per target, and each target's first partial and counter.
    int splits = 1;
    int block_end[kMaxFp8GemvTargets] = {};
    int64_t partial0[kMaxFp8GemvTargets] = {};
    int arrival0[kMaxFp8GemvTargets] = {};
};
// Whether m tokens of k inputs fit the kernel (k a multiple of 128, the quantized input staged in shared memory).
bool fp8_gemv_supported(int64_t m, int64_t k);
// Scratch floats and zeroed counters a launch of these targets needs at most (p.n, p.m, p.targets set).
int64_t fp8_gemv_partials(const Fp8GemvParams& p);
int fp8_gemv_arrivals(const Fp8GemvParams& p);
void launch_fp8_gemv(cudaStream_t stream, Fp8GemvParams p);

}  // namespace dsv4::cuda
