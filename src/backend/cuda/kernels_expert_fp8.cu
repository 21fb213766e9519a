// Grouped (routed-expert) and dense GEMM on FP8 tensor cores (wgmma m64nNk32 e4m3, SASS QGMMA), `fast` numerics.
// Layout: weights on the M side (2 warpgroups x 64 features, x2 in SwiGLU mode for W1 and W3), tokens on N (tile of
// N tokens of one expert: "swap-AB", so a small per-expert token count costs N, not 64). Per 128-wide K block: the
// weight rows are staged in shared memory as e4m3 (FP4 codes expanded through a per-row byte table that folds each
// per-32 UE8M0 scale in as an exponent offset; FP8 codes copied as they are), the activations (already e4m3 per
// 1x128 block) copied with cp.async, four wgmma k32 steps accumulate the block's partial sums, and the partials are
// promoted into float32 accumulators scaled by (weight row scale x token scale) — DeepSeek's per-128 promotion.
// Three shared-memory stages: block kb computes while kb + 1 is expanded and kb + 2 is in flight.
#include <cuda_fp8.h>

#include "backend/cuda/expert_gemm_tile.cuh"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

using namespace expert_gemm;  // NOLINT(google-build-using-namespace): this file's own pieces, shared with the WS kernel

constexpr int kThreads = 256;  // 2 warpgroups
constexpr int kStages = 3;

// Shared memory: kStages stages (StageTile), then the byte table.
template <int BN, int MB>
struct StageLayout : StageTile<BN, MB> {
    static constexpr int kTotal = kStages * StageTile<BN, MB>::kBytes + kLutRows * 8 + 1024;  // + alignment slack
};

// One thread's share of a stage's weight rows: G consecutive 32-element groups of one row (FP4: read into registers
// one K block ahead, expanded into shared memory the next iteration).
template <int G>
struct RawWeights {
    uint4 groups[G];
    uint32_t scales = 0;  // the row's 4 UE8M0 bytes of the K block
    bool valid = false;
};

template <int MB>
struct WeightSlot {
    static constexpr int kGroups = 2 * MB;  // 512 * MB groups per stage over 256 threads
    int tile_row = 0;                       // row in the stage's weight tile (MB = 2: W1 rows, then W3 rows)
    int group0 = 0;
    int32_t feature = 0;            // int32 (and scale_cols): registers for the two-block tiles
    const uint8_t* data = nullptr;  // the row's weight (W1 or W3)
    const uint8_t* scales = nullptr;
    int32_t scale_cols = 0;
};

template <int MB>
__device__ __forceinline__ WeightSlot<MB> weight_slot(const TileInfo& t, int64_t n0) {
    WeightSlot<MB> s;
    const int f = threadIdx.x * WeightSlot<MB>::kGroups;
    s.tile_row = f / 4;
    s.group0 = f % 4;
    s.feature = static_cast<int32_t>(n0 + s.tile_row % 128);
    s.data = s.tile_row < 128 ? t.data1 : t.data3;
    s.scales = s.tile_row < 128 ? t.scales1 : t.scales3;
    s.scale_cols = static_cast<int32_t>(t.scale_cols);
    return s;
}

template <int MB, int PREFETCH>
__device__ __forceinline__ void load_fp4(const WeightSlot<MB>& s, int64_t rows, int64_t k, int kb,
                                         RawWeights<WeightSlot<MB>::kGroups>& raw) {
    raw.valid = s.feature < rows;
    if (!raw.valid) return;
    const uint8_t* row = s.data + static_cast<int64_t>(s.feature) * (k / 2) + kb * 64;
#pragma unroll
    for (int i = 0; i < WeightSlot<MB>::kGroups; ++i) {
        raw.groups[i] = load_u4<PREFETCH>(reinterpret_cast<const uint4*>(row) + s.group0 + i);
    }
    raw.scales = load_u32<PREFETCH>(s.scales + static_cast<int64_t>(s.feature) * s.scale_cols + kb * 4);
}

// Expands this thread's raw FP4 groups into the stage's swizzled e4m3 tile (expand_fp4_groups).
template <int MB>
__device__ __forceinline__ void store_fp4(const WeightSlot<MB>& s, const RawWeights<WeightSlot<MB>::kGroups>& raw,
                                          uint8_t* stage_w, float* stage_wscale, const uint2* lut,
                                          int32_t* clamp_count) {
    expand_fp4_groups(s.tile_row, s.group0, raw.groups, raw.scales, raw.valid, stage_w, stage_wscale, lut, clamp_count);
}

// FP8 weights: the stage's rows by cp.async (4 * MB 16-byte chunks per thread) and each row's block scale.
template <int MB>
__device__ __forceinline__ void issue_fp8_weights(const TileInfo& t, int64_t n0, int64_t rows, int64_t k, int kb,
                                                  uint8_t* stage_w, float* stage_wscale) {
#pragma unroll
    for (int i = 0; i < 4 * MB; ++i) {
        const int f = threadIdx.x + i * kThreads;
        const int tile_row = f / 8, chunk = f % 8;
        const int64_t feature = n0 + tile_row % 128;
        const uint8_t* data = tile_row < 128 ? t.data1 : t.data3;
        const uint8_t* scales = tile_row < 128 ? t.scales1 : t.scales3;
        const bool valid = feature < rows;
        cp_async16(stage_w + sw128_offset(tile_row, chunk), data + (valid ? feature * k + kb * 128 + chunk * 16 : 0),
                   valid ? 16 : 0);
        if (chunk == 0) {
            stage_wscale[tile_row] = valid ? decode_ue8m0(scales[(feature / t.block_rows) * t.scale_cols + kb]) : 0.0f;
        }
    }
}

// The stage's activation rows (BN tokens x 128 bytes) and token scales by cp.async; absent tokens are zero-filled.
template <int BN>
__device__ __forceinline__ void issue_x(const ExpertGemmArgs& a,
                                        const int32_t (&x_rows)[(BN * 8 + kThreads - 1) / kThreads], int32_t scale_row,
                                        int kb, uint8_t* stage_x, float* stage_xscale) {
    constexpr int kPerThread = (BN * 8 + kThreads - 1) / kThreads;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
        const int f = threadIdx.x + i * kThreads;
        if (f >= BN * 8) break;
        const int r = f / 8, chunk = f % 8;
        const bool valid = x_rows[i] >= 0;
        const uint8_t* src = a.x_codes + (valid ? x_rows[i] * a.x_stride + kb * 128 + chunk * 16 : 0);
        cp_async16(stage_x + sw128_offset(r, chunk), src, valid ? 16 : 0);
    }
    if (threadIdx.x < BN) {
        const bool valid = scale_row >= 0;
        cp_async4(stage_xscale + threadIdx.x, a.x_scales + (valid ? kb * a.x_rows_pad + scale_row : 0), valid ? 4 : 0);
    }
}

// Blocks an SM a shape is compiled for: the plain 48-token tile (CudaOptions::expert_half_wide) fits two (24
// accumulators and 24 partial sums a thread: 64 tokens spilled at 128 registers), so that one block's promotion and
// barrier overlap the other's wgmma (the one-block tiles leave the tensor cores idle then).
template <int BN, int MB>
constexpr int blocks_per_sm() {
    return BN == kExpertHalfWideTile && MB == 1 ? 2 : 1;
}

// Grid: (rows / 128 feature blocks, tiles). BN: tokens per tile; MB: 1 (plain) or 2 (SwiGLU: W1 and W3); FP4: weight
// format (else FP8 block-scaled).
template <int BN, int MB, bool FP4, int PREFETCH = 0>
__global__ void __launch_bounds__(kThreads, blocks_per_sm<BN, MB>()) expert_gemm_fp8_kernel(ExpertGemmArgs a) {
    pdl_begin();
    using L = StageLayout<BN, MB>;
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = align_shared_1024(smem_raw);
    auto* lut = reinterpret_cast<uint2*>(smem + kStages * L::kBytes);
    TileInfo t;
    if (!load_tile(a, BN, static_cast<int>(blockIdx.y), t)) return;
    const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kExpertGemmFeatures;
    if (n0 >= a.rows) return;
    const int wg = threadIdx.x / 128, warp_in_wg = (threadIdx.x / 32) % 4;
    const int nk = static_cast<int>(a.k / 128);
    if constexpr (FP4) build_lut(reinterpret_cast<uint8_t*>(lut));

    // This thread's activation rows (-1: absent token) and its token-scale row.
    constexpr int kXPer = (BN * 8 + kThreads - 1) / kThreads;
    int32_t x_rows[kXPer];  // token rows (int32: registers for the two-block tiles)
#pragma unroll
    for (int i = 0; i < kXPer; ++i) {
        const int r = (threadIdx.x + i * kThreads) / 8;
        x_rows[i] = r < t.ntok ? static_cast<int32_t>(slot_row(a, t, r) / a.x_div) : -1;
    }
    const int32_t scale_row =
        static_cast<int>(threadIdx.x) < t.ntok ? static_cast<int32_t>(slot_row(a, t, threadIdx.x) / a.x_div) : -1;
    auto stage = [&](int kb) { return smem + (kb % kStages) * L::kBytes; };
    auto issue = [&](int kb) {
        if (kb < nk) {
            uint8_t* s = stage(kb);
            issue_x<BN>(a, x_rows, scale_row, kb, s + L::kX, reinterpret_cast<float*>(s + L::kXScale));
            if constexpr (!FP4) {
                issue_fp8_weights<MB>(t, n0, a.rows, a.k, kb, s + L::kW, reinterpret_cast<float*>(s + L::kWScale));
            }
        }
        cp_async_commit();  // an empty group past the end keeps the wait counts uniform
    };

    const WeightSlot<MB> slot = weight_slot<MB>(t, n0);
    RawWeights<WeightSlot<MB>::kGroups> raw;
    auto expand = [&](int kb) {  // raw (block kb) -> its stage
        if constexpr (FP4) {
            if (kb < nk) {
                uint8_t* s = stage(kb);
                store_fp4<MB>(slot, raw, s + L::kW, reinterpret_cast<float*>(s + L::kWScale), lut, a.clamp_count);
            }
        }
    };
    auto fetch = [&](int kb) {  // block kb's FP4 words into registers
        if constexpr (FP4) {
            if (kb < nk) load_fp4<MB, PREFETCH>(slot, a.rows, a.k, kb, raw);
        }
    };

    // Prologue: blocks 0 and 1 in flight, block 0 expanded.
    issue(0);
    issue(1);
    __syncthreads();  // the byte table
    fetch(0);
    expand(0);
    fetch(1);
    cp_async_wait<1>();
    fence_proxy_async();
    __syncthreads();

    float acc[MB][BN / 2], part[MB][BN / 2];
    zero_accumulators<BN, MB>(acc, part);
    const int row_base = 64 * wg + 16 * warp_in_wg;  // this warp's first fragment row within each 128-row half
    for (int kb = 0; kb < nk; ++kb) {
        uint8_t* s = stage(kb);
        issue_block_wgmma<BN, MB>(part, s + L::kW, s + L::kX, wg);
        wgmma_commit();
        expand(kb + 1);  // while the tensor cores work
        fetch(kb + 2);
        issue(kb + 2);
        wgmma_wait_all();
        promote_block<BN, MB>(acc, part, reinterpret_cast<const float*>(s + L::kWScale),
                              reinterpret_cast<const float*>(s + L::kXScale), row_base);
        cp_async_wait<1>();
        fence_proxy_async();
        __syncthreads();
    }
    if constexpr (MB == 2) {
        cp_async_wait<0>();
        __syncthreads();  // every stage is free: the epilogue stages through stage memory
        store_swiglu<BN>(a, t, n0, acc[0], acc[1], row_base, smem, static_cast<int>(threadIdx.x),
                         [] { __syncthreads(); });
    } else {
        store_plain<BN>(a, t, n0, acc[0], row_base);
    }
}

template <int BN, int MB, bool FP4, int PREFETCH = 0>
void launch_typed(cudaStream_t stream, const ExpertGemmArgs& a, unsigned tiles) {
    constexpr int kSmem = StageLayout<BN, MB>::kTotal;
    static_assert(8 * BN * 4 + BN * 4 + BN * 128 <= kStages * StageLayout<BN, MB>::kBytes, "epilogue staging");
    static bool configured = false;  // host-side, once per instantiation
    if (!configured) {
        cudaFuncSetAttribute(expert_gemm_fp8_kernel<BN, MB, FP4, PREFETCH>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kSmem);
        configured = true;
    }
    const dim3 grid(blocks_for(a.rows, kExpertGemmFeatures), tiles);
    launch_kernel(expert_gemm_fp8_kernel<BN, MB, FP4, PREFETCH>, grid, kThreads, kSmem, stream, a);
}

// FP4 weights, with the decode tiles' load hint (with_l2_prefetch).
template <int BN, int MB>
void launch_fp4(cudaStream_t stream, const ExpertGemmArgs& a, unsigned tiles) {
    with_l2_prefetch<BN>(a.l2_prefetch,
                         [&](auto bytes) { launch_typed<BN, MB, true, decltype(bytes)::value>(stream, a, tiles); });
}

}  // namespace

int expert_gemm_small_tile(WeightFormat format, bool swiglu) {
    if (format == WeightFormat::kFp4Row) return 16;
    return format == WeightFormat::kFp8Block && !swiglu ? 16 : 0;
}

int expert_gemm_large_tile(WeightFormat format, bool swiglu, bool half_wide) {
    if (format == WeightFormat::kFp4Row) return swiglu ? 64 : (half_wide ? kExpertHalfWideTile : 128);
    return format == WeightFormat::kFp8Block && !swiglu ? 128 : 0;
}

ExpertKernel choose_expert_kernel(const ExpertGemmArgs& a) {
    if (a.format != WeightFormat::kFp4Row) return ExpertKernel::kStaged;
    if (expert_gemm_rs_fits(a)) return ExpertKernel::kRegisterWeights;
    return a.warp_specialized ? ExpertKernel::kWarpSpecialized : ExpertKernel::kStaged;
}

void launch_expert_gemm_fp8(cudaStream_t stream, const ExpertGemmArgs& a) {
    const bool swiglu = a.table_up != nullptr;
    const unsigned tiles = a.tile_expert != nullptr ? static_cast<unsigned>(a.max_tiles)
                                                    : blocks_for(a.dense_m, a.tile_n > 0 ? a.tile_n : 1);
    if (tiles == 0 || a.rows == 0) return;
    switch (choose_expert_kernel(a)) {
        case ExpertKernel::kRegisterWeights:
            return launch_expert_gemm_rs(stream, a, tiles);
        case ExpertKernel::kWarpSpecialized:
            return launch_expert_gemm_ws(stream, a, tiles);
        case ExpertKernel::kStaged:
            break;
    }
    if (a.format == WeightFormat::kFp4Row) {
        with_fp4_tile(a.tile_n, swiglu, [&](auto bn, auto mb) {
            launch_fp4<decltype(bn)::value, decltype(mb)::value>(stream, a, tiles);
        });
    } else {
        a.tile_n == 16 ? launch_typed<16, 1, false>(stream, a, tiles) : launch_typed<128, 1, false>(stream, a, tiles);
    }
}

}  // namespace dsv4::cuda
