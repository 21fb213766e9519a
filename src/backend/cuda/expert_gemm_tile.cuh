// Pieces of the grouped (routed-expert) FP8 wgmma GEMMs shared by the two-warpgroup kernel (kernels_expert_fp8.cu)
// and the warp-specialized one (kernels_expert_ws.cu): the tile a block computes, the FP4 -> e4m3 expansion of weight
// rows into a 128-byte-swizzled stage, the per-128 promotion of wgmma partial sums and the epilogues. Both kernels
// give the same bits for the same tile width: the same wgmma steps, promotions and epilogue arithmetic. Only .cu
// files include this.
#pragma once

#include <cuda_fp8.h>

#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels_fp8.h"
#include "backend/cuda/quant_sim.cuh"
#include "backend/cuda/wgmma_fp8.cuh"

namespace dsv4::cuda::expert_gemm {

constexpr int kComputeThreads = 256;  // the two warpgroups that run wgmma (64 weight rows of each 128 each)
constexpr int kLutMin = -13;          // offsets below: every e2m1 value times 2^k rounds to e4m3 zero
constexpr int kLutRows = 6 - kLutMin + 1;

constexpr int round_up(int v, int to) {
    return (v + to - 1) / to * to;
}

// Barrier of the two computing warpgroups of the warp-specialized kernels (id 1; 0 is __syncthreads', which their
// split roles no longer reach).
__device__ __forceinline__ void consumer_barrier() {
    asm volatile("bar.sync 1, 256;" ::: "memory");
}

// One shared-memory stage of a K block (offsets in bytes; tiles 1024-aligned for the 128-byte swizzle): the weight
// tile [128 MB rows][128] (MB = 2: W1's rows, then W3's), the activation tile [BN][128], row scales, token scales.
template <int BN, int MB>
struct StageTile {
    static constexpr int kWRows = 128 * MB;
    static constexpr int kW = 0;
    static constexpr int kX = kWRows * 128;
    static constexpr int kWScale = kX + BN * 128;
    static constexpr int kXScale = kWScale + kWRows * 4;
    static constexpr int kBytes = (kXScale + BN * 4 + 1023) / 1024 * 1024;
};

// The tile this block computes: its token slots and the fields of its weights (W1 and, in SwiGLU mode, W3; same
// shapes) that the loads read, by value so that nothing lands in local memory.
struct TileInfo {
    int64_t row0 = 0;  // first token slot
    int ntok = 0;      // token slots in the tile
    const uint8_t* data1 = nullptr;
    const uint8_t* data3 = nullptr;
    const uint8_t* scales1 = nullptr;
    const uint8_t* scales3 = nullptr;
    int64_t scale_cols = 0;
    int block_rows = 1;
};

__device__ __forceinline__ void set_weights(TileInfo& t, const WeightRef& w1, const WeightRef* w3) {
    t.data1 = static_cast<const uint8_t*>(w1.data);
    t.scales1 = w1.scales;
    t.scale_cols = w1.scale_cols;
    t.block_rows = w1.block_rows;
    t.data3 = w3 != nullptr ? static_cast<const uint8_t*>(w3->data) : t.data1;
    t.scales3 = w3 != nullptr ? w3->scales : t.scales1;
}

// Tile `tile` of the launch (expert mode: from the device-side plan; dense: consecutive rows); false past the plan's
// count or when the tile has no tokens.
__device__ __forceinline__ bool load_tile(const ExpertGemmArgs& a, int bn, int tile, TileInfo& t) {
    if (a.tile_expert != nullptr) {
        if (tile >= a.tile_count[0]) return false;
        const int e = a.tile_expert[tile];
        t.row0 = a.tile_row0[tile];
        t.ntok = a.tile_rows[tile];
        set_weights(t, a.table[e], a.table_up != nullptr ? &a.table_up[e] : nullptr);
    } else {
        t.row0 = static_cast<int64_t>(tile) * bn;
        t.ntok = static_cast<int>(min64(bn, a.dense_m - t.row0));
        set_weights(t, a.dense, nullptr);
    }
    return t.ntok > 0;
}

// Tiles of the launch: the plan's count (expert mode) or the dense rows' tiles.
__device__ __forceinline__ int tile_count(const ExpertGemmArgs& a, int bn) {
    return a.tile_expert != nullptr ? a.tile_count[0] : static_cast<int>((a.dense_m + bn - 1) / bn);
}

// Output / activation row of token slot i of the tile.
__device__ __forceinline__ int64_t slot_row(const ExpertGemmArgs& a, const TileInfo& t, int i) {
    return a.tile_expert != nullptr ? a.row_ids[t.row0 + i] : t.row0 + i;
}

// Read-only loads with an L2 prefetch-size hint (PTX ld's L2::128B / L2::256B): a K block reads 64 bytes of each
// weight row (rows 2 KB apart), so without the hint DRAM serves 64-byte pieces of scattered rows; with it the row's
// next K blocks come in the same burst and the next iterations find them in L2. PREFETCH: 0, 128 or 256 bytes.
template <int PREFETCH>
__device__ __forceinline__ uint4 load_u4(const void* p) {
    uint4 v;
    if constexpr (PREFETCH == 256) {
        asm("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
            : "l"(p));
    } else if constexpr (PREFETCH == 128) {
        asm("ld.global.nc.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
            : "l"(p));
    } else {
        v = __ldg(static_cast<const uint4*>(p));
    }
    return v;
}

template <int PREFETCH>
__device__ __forceinline__ uint32_t load_u32(const void* p) {
    uint32_t v;
    if constexpr (PREFETCH == 256) {
        asm("ld.global.nc.L2::256B.u32 %0, [%1];" : "=r"(v) : "l"(p));
    } else if constexpr (PREFETCH == 128) {
        asm("ld.global.nc.L2::128B.u32 %0, [%1];" : "=r"(v) : "l"(p));
    } else {
        v = __ldg(static_cast<const uint32_t*>(p));
    }
    return v;
}

// The L2 prefetch-size hint (ExpertGemmArgs::l2_prefetch) a launch's FP4 loads take: the decode (16-token) tiles
// only (256 bytes made the 64- and 256-token experts 7% faster; on the wide prefill tiles it cost 1-3%, H100,
// 2026-12-06). Calls launch(std::integral_constant<int, bytes>{}) on the host.
template <int BN, typename Launch>
void with_l2_prefetch(int bytes, Launch&& launch) {
    if constexpr (BN == 16) {
        if (bytes == 256) return launch(std::integral_constant<int, 256>{});
        if (bytes == 128) return launch(std::integral_constant<int, 128>{});
    }
    launch(std::integral_constant<int, 0>{});
}

// The FP4 kernels' token-tile widths (expert_gemm_small_tile / expert_gemm_large_tile), one dispatch for the staged
// and warp-specialized launchers: calls launch(std::integral_constant<int, BN>{}, std::integral_constant<int, MB>{})
// on the host for the launch's width and projection (MB 2: SwiGLU, W1 and W3).
template <typename Launch>
void with_fp4_tile(int tile_n, bool swiglu, Launch&& launch) {
    using std::integral_constant;
    if (swiglu) {
        if (tile_n == 16) return launch(integral_constant<int, 16>{}, integral_constant<int, 2>{});
        return launch(integral_constant<int, 64>{}, integral_constant<int, 2>{});
    }
    if (tile_n == 16) return launch(integral_constant<int, 16>{}, integral_constant<int, 1>{});
    if (tile_n == kExpertHalfWideTile) {
        return launch(integral_constant<int, kExpertHalfWideTile>{}, integral_constant<int, 1>{});
    }
    launch(integral_constant<int, 128>{}, integral_constant<int, 1>{});
}

// The dynamic shared memory's first 1024-byte-aligned byte (the 128-byte swizzle's tiles are 1024-aligned), by pointer
// arithmetic on the shared array itself. Rounded through an integer instead, the pointer lost its address space: every
// stage, ring and table access compiled to a generic LD / ST with 64-bit addresses (ncu, SASS of the W4A8 kernels,
// 2026-12-06); from the array the compiler keeps them shared (LDS / STS, 32-bit).
__device__ __forceinline__ uint8_t* align_shared_1024(uint8_t* smem_raw) {
    const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
    return smem_raw + ((1024u - (addr & 1023u)) & 1023u);
}

// e4m3 code of each e2m1 magnitude (0, 0.5, 1, 1.5, 2, 3, 4, 6) times 2^k, k = kLutMin .. 6, 8 bytes per k.
__device__ inline void build_lut(uint8_t* lut) {
    for (int i = threadIdx.x; i < kLutRows * 8; i += blockDim.x) {
        const float v = ldexpf(decode_e2m1(static_cast<uint32_t>(i % 8)), i / 8 + kLutMin);
        lut[i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
    }
}

// A row's largest UE8M0 scale byte of the K block (its four groups' bytes in `scales`).
__device__ __forceinline__ int row_emax(uint32_t scales) {
    uint32_t m = __vmaxu4(scales, scales >> 16);
    m = __vmaxu4(m, m >> 8);
    return static_cast<int>(m & 0xffu);
}

// The row's scale of the K block, 2^(emax - 133) (from the bits where that is a normal float), NaN when a byte is
// 0xFF, i.e. when emax is.
__device__ __forceinline__ float row_scale(int emax) {
    if (emax == 0xff) return __uint_as_float(0x7fc00000u);
    return emax >= 7 ? __int_as_float((emax - 6) << 23) : ldexpf(1.0f, emax - 6 - 127);
}

// The byte table of group i of a row's K block: offset e_i - emax + 6, the largest group at 6 (largest code
// 6 * 2^6 = 384 <= 448); `count`: an offset below -8 loses bits and is counted as a clamp.
__device__ __forceinline__ uint2 group_table(uint32_t scales, int i, int emax, bool count, const uint2* lut,
                                             int& below) {
    const int offset = static_cast<int>((scales >> (8 * i)) & 0xffu) - emax + 6;
    below += count && offset < -8;
    return lut[max(offset, kLutMin) - kLutMin];
}

// Expands G consecutive 32-code FP4 groups of one weight row (sign-split words, backend/fp4_layout.h; from group0;
// `scales`: the row's four UE8M0 bytes of the K block) into a stage's swizzled e4m3 tile through the groups' byte
// tables (group_table's rule), and writes the row's scale (row_scale's) where group0 is 0. An invalid row (past the
// weight) is zero-filled.
template <int G>
__device__ __forceinline__ void expand_fp4_groups(int tile_row, int group0, const uint4 (&groups)[G], uint32_t scales,
                                                  bool valid, uint8_t* stage_w, float* stage_wscale, const uint2* lut,
                                                  int32_t* clamp_count) {
    if (!valid) {
#pragma unroll
        for (int i = 0; i < G; ++i) {
            const int g = group0 + i;
            *reinterpret_cast<uint4*>(stage_w + sw128_offset(tile_row, 2 * g)) = make_uint4(0, 0, 0, 0);
            *reinterpret_cast<uint4*>(stage_w + sw128_offset(tile_row, 2 * g + 1)) = make_uint4(0, 0, 0, 0);
        }
        if (group0 == 0) stage_wscale[tile_row] = 0.0f;
        return;
    }
    // row_emax, row_scale and group_table's rule, written out: through them the warp-specialized kernel's wide
    // tiles spill at their register counts.
    int emax = 0;
    bool nan = false;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int e = static_cast<int>((scales >> (8 * i)) & 0xffu);
        emax = max(emax, e);
        nan = nan || e == 0xff;
    }
    if (group0 == 0) stage_wscale[tile_row] = nan ? __uint_as_float(0x7fc00000u) : ldexpf(1.0f, emax - 6 - 127);
    int below = 0;
#pragma unroll
    for (int i = 0; i < G; ++i) {
        const int g = group0 + i;
        const int offset = static_cast<int>((scales >> (8 * g)) & 0xffu) - emax + 6;
        below += offset < -8;
        const uint2 table = lut[max(offset, kLutMin) - kLutMin];
        const uint4 q = groups[i];
        const Fp4Bytes a = expand_fp4_word(q.x, table.x, table.y), b = expand_fp4_word(q.y, table.x, table.y);
        const Fp4Bytes c = expand_fp4_word(q.z, table.x, table.y), d = expand_fp4_word(q.w, table.x, table.y);
        *reinterpret_cast<uint4*>(stage_w + sw128_offset(tile_row, 2 * g)) = make_uint4(a.lo, a.hi, b.lo, b.hi);
        *reinterpret_cast<uint4*>(stage_w + sw128_offset(tile_row, 2 * g + 1)) = make_uint4(c.lo, c.hi, d.lo, d.hi);
    }
    if (below > 0 && clamp_count != nullptr) atomicAdd(clamp_count, below);
}

// Keeps the compiler from moving register reads of wgmma accumulators across the wait (they are written
// asynchronously).
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// acc += part * row scale * xscale[col] over this thread's fragment (wgmma accumulator layout: element i of warp
// w's fragment is row 16 w + lane / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (lane % 4) + i % 2); w0 / w1: the
// scales of the thread's rows lane / 4 and lane / 4 + 8.
template <int BN>
__device__ __forceinline__ void promote(float (&acc)[BN / 2], const float (&part)[BN / 2], float w0, float w1,
                                        const float* xscale) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const float2 xs = *reinterpret_cast<const float2*>(xscale + 8 * j + 2 * (lane & 3));
        acc[4 * j + 0] = fmaf(part[4 * j + 0] * w0, xs.x, acc[4 * j + 0]);
        acc[4 * j + 1] = fmaf(part[4 * j + 1] * w0, xs.y, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(part[4 * j + 2] * w1, xs.x, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(part[4 * j + 3] * w1, xs.y, acc[4 * j + 3]);
    }
}

// Zeroed accumulators and partial sums of a warpgroup's MB weight halves.
template <int BN, int MB>
__device__ __forceinline__ void zero_accumulators(float (&acc)[MB][BN / 2], float (&part)[MB][BN / 2]) {
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[mb][i] = part[mb][i] = 0.0f;
    }
}

// The wgmma steps of one 128-wide K block (not committed): part[mb] = rows 64 wg .. 64 wg + 63 of weight half mb of
// the stage's tile (`w_tile`, 128-row halves) times the activation tile's BN tokens.
template <int BN, int MB>
__device__ __forceinline__ void issue_block_wgmma(float (&part)[MB][BN / 2], const uint8_t* w_tile,
                                                  const uint8_t* x_tile, int wg) {
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) fence_regs(part[mb]);
    wgmma_fence();
    const uint64_t desc_x = smem_desc_sw128(x_tile);
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) {
        const uint64_t desc_w = smem_desc_sw128(w_tile + (mb * 128 + 64 * wg) * 128);
#pragma unroll
        for (int j = 0; j < 4; ++j) wgmma_m64k32<BN>(part[mb], desc_w + 2 * j, desc_x + 2 * j, j > 0 ? 1 : 0);
    }
}

// After the block's wgmma_wait_all: every half's partial sums promoted with the stage's row and token scales.
template <int BN, int MB>
__device__ __forceinline__ void promote_block(float (&acc)[MB][BN / 2], float (&part)[MB][BN / 2], const float* wscale,
                                              const float* xscale, int row_base) {
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) fence_regs(part[mb]);
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) {
        const int row = mb * 128 + row_base + (threadIdx.x & 31) / 4;
        promote<BN>(acc[mb], part[mb], wscale[row], wscale[row + 8], xscale);
    }
}

template <int BN>
__device__ __forceinline__ void store_plain(const ExpertGemmArgs& a, const TileInfo& t, int64_t n0,
                                            const float (&acc)[BN / 2], int row_base) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
        const int row = row_base + lane / 4 + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
        const int64_t feature = n0 + row;
        if (col < t.ntok && feature < a.rows) a.y[slot_row(a, t, col) * a.y_stride + feature] = acc[i];
    }
}

// SwiGLU epilogue: act = bf16(silu(min(g, limit)) * clamp(u) * route weight), then e4m3 per the block's 128 features
// of each token (amax over both warpgroups through shared memory), codes staged in shared memory and written as
// 16-byte rows. `smem` is free stage memory (>= 8 * BN * 4 + BN * 136 bytes); `ct` is the thread's index among the
// 256 threads of the two computing warpgroups and `sync` their barrier.
template <int BN, typename Sync>
__device__ __forceinline__ void store_swiglu(const ExpertGemmArgs& a, const TileInfo& t, int64_t n0, float (&g)[BN / 2],
                                             const float (&u)[BN / 2], int row_base, uint8_t* smem, int ct, Sync sync) {
    const int lane = ct & 31, warp = ct / 32;
    float* red = reinterpret_cast<float*>(smem);                // [8 warps][BN] partial amax
    float* inverse = red + 8 * BN;                              // [BN] 2^-e
    uint8_t* codes = reinterpret_cast<uint8_t*>(inverse + BN);  // [BN][128]
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
        const int col = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
        const float w = col < t.ntok && a.route_weights != nullptr ? a.route_weights[slot_row(a, t, col)] : 1.0f;
        float gv = g[i], uv = u[i];
        if (a.limit > 0.0f) {
            gv = gv > a.limit ? a.limit : gv;  // comparisons keep a NaN (fminf / fmaxf would not)
            uv = uv > a.limit ? a.limit : uv < -a.limit ? -a.limit : uv;
        }
        g[i] = to_bf16(gv / (1.0f + expf(-gv)) * uv * w);
    }
    // Per-column amax over this warp's 16 rows (non-finite counts as +inf: the block's scale becomes NaN).
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const float v0 = g[4 * j + c], v1 = g[4 * j + 2 + c];
            float m = fmaxf(isfinite(v0) ? fabsf(v0) : INFINITY, isfinite(v1) ? fabsf(v1) : INFINITY);
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 8));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 16));
            if (lane < 4) red[warp * BN + 8 * j + 2 * lane + c] = m;
        }
    }
    sync();
    if (ct < BN) {
        float amax = 0.0f;
        for (int w = 0; w < 8; ++w) amax = fmaxf(amax, red[w * BN + ct]);
        const int e = pow2_scale_exponent_dev(amax, kFp8AmaxFloorDev, 448.0f);
        inverse[ct] = ldexpf(1.0f, -e);
        if (ct < t.ntok) {
            a.act.scales[(n0 / kFp8ActBlock) * a.act.rows_pad + slot_row(a, t, ct)] =
                isinf(amax) ? __uint_as_float(0x7fc00000u) : ldexpf(1.0f, e);
        }
    }
    sync();
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
        const int row = row_base + lane / 4 + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
        const float s = fminf(fmaxf(g[i] * inverse[col], -448.0f), 448.0f);
        codes[col * 128 + row] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(s, __NV_SATFINITE, __NV_E4M3));
    }
    sync();
    for (int f = ct; f < BN * 8; f += kComputeThreads) {
        const int col = f / 8, chunk = f % 8;
        if (col >= t.ntok) continue;
        *reinterpret_cast<uint4*>(a.act.codes + slot_row(a, t, col) * a.act.k + n0 + chunk * 16) =
            *reinterpret_cast<const uint4*>(codes + col * 128 + chunk * 16);
    }
}

}  // namespace dsv4::cuda::expert_gemm
