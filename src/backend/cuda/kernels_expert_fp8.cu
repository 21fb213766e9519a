// Grouped (routed-expert) and dense GEMM on FP8 tensor cores (wgmma m64nNk32 e4m3, SASS QGMMA), `fast` numerics.
// Layout: weights on the M side (2 warpgroups x 64 features, x2 in SwiGLU mode for W1 and W3), tokens on N (tile of
// N tokens of one expert: "swap-AB", so a small per-expert token count costs N, not 64). Per 128-wide K block: the
// weight rows are staged in shared memory as e4m3 (FP4 codes expanded through a per-row byte table that folds each
// per-32 UE8M0 scale in as an exponent offset; FP8 codes copied as they are), the activations (already e4m3 per
// 1x128 block) copied with cp.async, four wgmma k32 steps accumulate the block's partial sums, and the partials are
// promoted into float32 accumulators scaled by (weight row scale x token scale) — DeepSeek's per-128 promotion.
// Three shared-memory stages: block kb computes while kb + 1 is expanded and kb + 2 is in flight.
// The two warpgroups share nothing inside the K loop: each expands its own 64 weight rows (of W1 and of W3), copies
// its own activation tile and synchronizes on its own named barrier, so one warpgroup's promotion, expansion and
// barrier overlap the other's wgmma (with a block barrier per K block they all sat on the tensor cores' path).
#include <cuda_fp8.h>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels_fp8.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quant_sim.cuh"
#include "backend/cuda/wgmma_fp8.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kThreads = 256;  // 2 warpgroups
constexpr int kWgThreads = 128;
constexpr int kStages = 3;
constexpr int kLutMin = -13;  // offsets below: every e2m1 value times 2^k rounds to e4m3 zero
constexpr int kLutRows = 6 - kLutMin + 1;

constexpr int kMaxSmem = 227 * 1024;    // the per-block opt-in maximum
constexpr int kSmemPerSm = 228 * 1024;  // an SM's shared memory (a block reserves 1 KB of it)

// Shared-memory carve-up of one stage (offsets in bytes; tiles 1024-aligned for the 128-byte swizzle). The
// activation tile and its token scales are there once per warpgroup (each copies its own). After the stages, FP4
// weights have kRawStages K blocks of codes in flight (each thread's groups, then each thread's copy of its row's
// four scale bytes); then the byte table.
template <int BN, int MB, bool FP4>
struct StageLayout {
    static constexpr int kWRows = 128 * MB;
    static constexpr int kW = 0;
    static constexpr int kX = kWRows * 128;  // [2][BN][128]
    static constexpr int kWScale = kX + 2 * BN * 128;
    static constexpr int kXScale = kWScale + kWRows * 4;  // [2][BN]
    static constexpr int kBytes = (kXScale + 2 * BN * 4 + 1023) / 1024 * 1024;
    static_assert(BN * 128 % 1024 == 0, "the second warpgroup's activation tile stays 1024-aligned");
    static constexpr int kRawCodes = kThreads * 2 * MB * 16;
    static constexpr int kRawBytes = kRawCodes + kThreads * 4;
    static constexpr int kFixed = kStages * kBytes + kLutRows * 8 + 1024;  // + alignment slack
    // K blocks of codes in flight: four where two blocks still fit an SM (the small tiles: eight in flight per SM);
    // where one block fills it anyway, as many as fit (at most eight, at least three: the fewest the loop's group
    // counts allow).
    static constexpr int kRawFit = (kMaxSmem - kFixed) / kRawBytes;
    static constexpr bool kTwoBlocksFit = 2 * (kFixed + 4 * kRawBytes) <= kSmemPerSm;
    static constexpr int kRawStages = !FP4 ? 0 : kTwoBlocksFit ? 4 : kRawFit < 3 ? 3 : kRawFit > 8 ? 8 : kRawFit;
    static constexpr int kRaw = kStages * kBytes;
    static constexpr int kLut = kRaw + kRawStages * kRawBytes;
    static constexpr int kTotal = kFixed + kRawStages * kRawBytes;
    static_assert(kTotal <= kMaxSmem, "shared memory");
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

__device__ __forceinline__ bool load_tile(const ExpertGemmArgs& a, int bn, TileInfo& t) {
    if (a.tile_expert != nullptr) {
        if (static_cast<int>(blockIdx.y) >= a.tile_count[0]) return false;
        const int e = a.tile_expert[blockIdx.y];
        t.row0 = a.tile_row0[blockIdx.y];
        t.ntok = a.tile_rows[blockIdx.y];
        set_weights(t, a.table[e], a.table_up != nullptr ? &a.table_up[e] : nullptr);
    } else {
        t.row0 = static_cast<int64_t>(blockIdx.y) * bn;
        t.ntok = static_cast<int>(min64(bn, a.dense_m - t.row0));
        set_weights(t, a.dense, nullptr);
    }
    return t.ntok > 0;
}

// Output / activation row of token slot i of the tile.
__device__ __forceinline__ int64_t slot_row(const ExpertGemmArgs& a, const TileInfo& t, int i) {
    return a.tile_expert != nullptr ? a.row_ids[t.row0 + i] : t.row0 + i;
}

// e4m3 code of each e2m1 magnitude (0, 0.5, 1, 1.5, 2, 3, 4, 6) times 2^k, k = kLutMin .. 6, 8 bytes per k.
__device__ void build_lut(uint8_t* lut) {
    for (int i = threadIdx.x; i < kLutRows * 8; i += kThreads) {
        const float v = ldexpf(decode_e2m1(static_cast<uint32_t>(i % 8)), i / 8 + kLutMin);
        lut[i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
    }
}

// Eight e2m1 codes -> eight e4m3 codes through the magnitude table (lo, hi) of the group's exponent offset.
__device__ __forceinline__ uint2 expand_word(uint32_t w, uint32_t lo, uint32_t hi) {
    return expand_e2m1_word(w, lo, hi);
}

// One thread's share of a stage's weight rows: G consecutive 32-element groups of one row (FP4: copied into a raw
// stage kRawStages - 1 K blocks ahead, read into registers and expanded into the stage the iteration before its
// wgmma).
template <int G>
struct RawWeights {
    uint4 groups[G];
    uint32_t scales = 0;  // the row's 4 UE8M0 bytes of the K block
    bool valid = false;
};

template <int MB>
struct WeightSlot {
    static constexpr int kGroups = 2 * MB;  // a warpgroup's 64 * MB rows x 4 groups over its 128 threads
    int tile_row = 0;                       // row in the stage's weight tile (MB = 2: W1 rows, then W3 rows)
    int group0 = 0;
    int64_t feature = 0;
    const uint8_t* data = nullptr;  // the row's weight (W1 or W3)
    const uint8_t* scales = nullptr;
    int64_t scale_cols = 0;
};

// Tile row of a warpgroup's local row (0 .. 64 MB): its W1 rows 64 wg .., then (SwiGLU) its W3 rows 128 + 64 wg ...
__device__ __forceinline__ int warpgroup_row(int wg, int local) {
    return (local / 64) * 128 + 64 * wg + local % 64;
}

template <int MB>
__device__ __forceinline__ WeightSlot<MB> weight_slot(const TileInfo& t, int64_t n0) {
    WeightSlot<MB> s;
    const int f = (threadIdx.x % kWgThreads) * WeightSlot<MB>::kGroups;
    s.tile_row = warpgroup_row(static_cast<int>(threadIdx.x / kWgThreads), f / 4);
    s.group0 = f % 4;
    s.feature = n0 + s.tile_row % 128;
    s.data = s.tile_row < 128 ? t.data1 : t.data3;
    s.scales = s.tile_row < 128 ? t.scales1 : t.scales3;
    s.scale_cols = t.scale_cols;
    return s;
}

// Starts copying this thread's FP4 groups of K block kb (and its row's four scale bytes) into its slot of a raw
// stage; rows past the weight's copy nothing (store_fp4 zero-fills them).
template <int MB>
__device__ __forceinline__ void issue_fp4_raw(const WeightSlot<MB>& s, int64_t rows, int64_t k, int kb,
                                              uint8_t* raw_stage) {
    constexpr int G = WeightSlot<MB>::kGroups;
    if (s.feature >= rows) return;
    const uint8_t* row = s.data + s.feature * (k / 2) + kb * 64;
    uint8_t* codes = raw_stage + threadIdx.x * G * 16;
#pragma unroll
    for (int i = 0; i < G; ++i) cp_async16(codes + 16 * i, row + 16 * (s.group0 + i), 16);
    cp_async4(raw_stage + kThreads * G * 16 + threadIdx.x * 4, s.scales + s.feature * s.scale_cols + kb * 4, 4);
}

// This thread's copied groups and scale bytes (its own copies, landed: cp_async_wait) into registers.
template <int MB>
__device__ __forceinline__ void read_fp4_raw(const WeightSlot<MB>& s, int64_t rows, const uint8_t* raw_stage,
                                             RawWeights<WeightSlot<MB>::kGroups>& raw) {
    constexpr int G = WeightSlot<MB>::kGroups;
    raw.valid = s.feature < rows;
    if (!raw.valid) return;
    const uint8_t* codes = raw_stage + threadIdx.x * G * 16;
#pragma unroll
    for (int i = 0; i < G; ++i) raw.groups[i] = *reinterpret_cast<const uint4*>(codes + 16 * i);
    raw.scales = *reinterpret_cast<const uint32_t*>(raw_stage + kThreads * G * 16 + threadIdx.x * 4);
}

// Expands raw FP4 groups into the stage's swizzled e4m3 tile and writes the row's scale (2^(max_e - 133); NaN when
// a scale byte is 0xFF). The group with the largest scale gets offset 6 (largest code 6 * 2^6 = 384 <= 448).
template <int MB>
__device__ __forceinline__ void store_fp4(const WeightSlot<MB>& s, const RawWeights<WeightSlot<MB>::kGroups>& raw,
                                          uint8_t* stage_w, float* stage_wscale, const uint2* lut,
                                          int32_t* clamp_count) {
    constexpr int G = WeightSlot<MB>::kGroups;
    if (!raw.valid) {
#pragma unroll
        for (int i = 0; i < G; ++i) {
            const int g = s.group0 + i;
            *reinterpret_cast<uint4*>(stage_w + sw128_offset(s.tile_row, 2 * g)) = make_uint4(0, 0, 0, 0);
            *reinterpret_cast<uint4*>(stage_w + sw128_offset(s.tile_row, 2 * g + 1)) = make_uint4(0, 0, 0, 0);
        }
        if (s.group0 == 0) stage_wscale[s.tile_row] = 0.0f;
        return;
    }
    int emax = 0;
    bool nan = false;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int e = static_cast<int>((raw.scales >> (8 * i)) & 0xffu);
        emax = max(emax, e);
        nan = nan || e == 0xff;
    }
    if (s.group0 == 0) {
        stage_wscale[s.tile_row] = nan ? __uint_as_float(0x7fc00000u) : ldexpf(1.0f, emax - 6 - 127);
    }
    int below = 0;
#pragma unroll
    for (int i = 0; i < G; ++i) {
        const int g = s.group0 + i;
        const int offset = static_cast<int>((raw.scales >> (8 * g)) & 0xffu) - emax + 6;
        below += offset < -8;
        const uint2 table = lut[max(offset, kLutMin) - kLutMin];
        const uint4 q = raw.groups[i];
        const uint2 a = expand_word(q.x, table.x, table.y), b = expand_word(q.y, table.x, table.y);
        const uint2 c = expand_word(q.z, table.x, table.y), d = expand_word(q.w, table.x, table.y);
        *reinterpret_cast<uint4*>(stage_w + sw128_offset(s.tile_row, 2 * g)) = make_uint4(a.x, a.y, b.x, b.y);
        *reinterpret_cast<uint4*>(stage_w + sw128_offset(s.tile_row, 2 * g + 1)) = make_uint4(c.x, c.y, d.x, d.y);
    }
    if (below > 0 && clamp_count != nullptr) atomicAdd(clamp_count, below);
}

// FP8 weights: the warpgroup's rows of the stage by cp.async (4 * MB 16-byte chunks per thread) and each row's block
// scale.
template <int MB>
__device__ __forceinline__ void issue_fp8_weights(const TileInfo& t, int64_t n0, int64_t rows, int64_t k, int kb,
                                                  uint8_t* stage_w, float* stage_wscale) {
#pragma unroll
    for (int i = 0; i < 4 * MB; ++i) {
        const int f = static_cast<int>(threadIdx.x % kWgThreads) + i * kWgThreads;
        const int tile_row = warpgroup_row(static_cast<int>(threadIdx.x / kWgThreads), f / 8), chunk = f % 8;
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

// The warpgroup's copy of the stage's activation rows (BN tokens x 128 bytes) and token scales by cp.async; absent
// tokens are zero-filled.
template <int BN>
__device__ __forceinline__ void issue_x(const ExpertGemmArgs& a,
                                        const int64_t (&x_rows)[(BN * 8 + kWgThreads - 1) / kWgThreads],
                                        int64_t scale_row, int kb, uint8_t* stage_x, float* stage_xscale) {
    constexpr int kPerThread = (BN * 8 + kWgThreads - 1) / kWgThreads;
    const int tid = static_cast<int>(threadIdx.x % kWgThreads);
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
        const int f = tid + i * kWgThreads;
        if (f >= BN * 8) break;
        const int r = f / 8, chunk = f % 8;
        const bool valid = x_rows[i] >= 0;
        const uint8_t* src = a.x_codes + (valid ? x_rows[i] * a.x_stride + kb * 128 + chunk * 16 : 0);
        cp_async16(stage_x + sw128_offset(r, chunk), src, valid ? 16 : 0);
    }
    if (tid < BN) {
        const bool valid = scale_row >= 0;
        cp_async4(stage_xscale + tid, a.x_scales + (valid ? kb * a.x_rows_pad + scale_row : 0), valid ? 4 : 0);
    }
}

// Barrier of one warpgroup's 128 threads (ids 1 and 2; 0 is __syncthreads'), immediate ids so that ptxas reserves
// only those.
__device__ __forceinline__ void warpgroup_barrier(int wg) {
    if (wg == 0) {
        asm volatile("bar.sync 1, 128;" ::: "memory");
    } else {
        asm volatile("bar.sync 2, 128;" ::: "memory");
    }
}

// Keeps the compiler from moving register reads of wgmma accumulators across the wait (they are written
// asynchronously).
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// acc += part * wscale[row] * xscale[col] over this thread's fragment (wgmma accumulator layout: element i of warp
// w's fragment is row 16 w + lane / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (lane % 4) + i % 2).
template <int BN>
__device__ __forceinline__ void promote(float (&acc)[BN / 2], const float (&part)[BN / 2], const float* wscale,
                                        const float* xscale, int row_base) {
    const int lane = threadIdx.x & 31;
    const float w0 = wscale[row_base + lane / 4], w1 = wscale[row_base + lane / 4 + 8];
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const float2 xs = *reinterpret_cast<const float2*>(xscale + 8 * j + 2 * (lane & 3));
        acc[4 * j + 0] = fmaf(part[4 * j + 0] * w0, xs.x, acc[4 * j + 0]);
        acc[4 * j + 1] = fmaf(part[4 * j + 1] * w0, xs.y, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(part[4 * j + 2] * w1, xs.x, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(part[4 * j + 3] * w1, xs.y, acc[4 * j + 3]);
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
// 16-byte rows. `smem` is free stage memory (>= 8 * BN * 4 + BN * 136 bytes).
template <int BN>
__device__ __forceinline__ void store_swiglu(const ExpertGemmArgs& a, const TileInfo& t, int64_t n0, float (&g)[BN / 2],
                                             const float (&u)[BN / 2], int row_base, uint8_t* smem) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
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
    __syncthreads();
    if (threadIdx.x < BN) {
        float amax = 0.0f;
        for (int w = 0; w < 8; ++w) amax = fmaxf(amax, red[w * BN + threadIdx.x]);
        const int e = pow2_scale_exponent_dev(amax, kFp8AmaxFloorDev, 448.0f);
        inverse[threadIdx.x] = ldexpf(1.0f, -e);
        if (static_cast<int>(threadIdx.x) < t.ntok) {
            a.act.scales[(n0 / kFp8ActBlock) * a.act.rows_pad + slot_row(a, t, threadIdx.x)] =
                isinf(amax) ? __uint_as_float(0x7fc00000u) : ldexpf(1.0f, e);
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
        const int row = row_base + lane / 4 + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
        const float s = fminf(fmaxf(g[i] * inverse[col], -448.0f), 448.0f);
        codes[col * 128 + row] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(s, __NV_SATFINITE, __NV_E4M3));
    }
    __syncthreads();
    for (int f = threadIdx.x; f < BN * 8; f += kThreads) {
        const int col = f / 8, chunk = f % 8;
        if (col >= t.ntok) continue;
        *reinterpret_cast<uint4*>(a.act.codes + slot_row(a, t, col) * a.act.k + n0 + chunk * 16) =
            *reinterpret_cast<const uint4*>(codes + col * 128 + chunk * 16);
    }
}

// Grid: (rows / 128 feature blocks, tiles). BN: tokens per tile; MB: 1 (plain) or 2 (SwiGLU: W1 and W3); FP4: weight
// format (else FP8 block-scaled).
template <int BN, int MB, bool FP4>
__global__ void __launch_bounds__(kThreads, 1) expert_gemm_fp8_kernel(ExpertGemmArgs a) {
    pdl_begin();
    using L = StageLayout<BN, MB, FP4>;
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
    auto* lut = reinterpret_cast<uint2*>(smem + L::kLut);
    TileInfo t;
    if (!load_tile(a, BN, t)) return;
    const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kExpertGemmFeatures;
    if (n0 >= a.rows) return;
    const int wg = threadIdx.x / 128, warp_in_wg = (threadIdx.x / 32) % 4;
    const int nk = static_cast<int>(a.k / 128);
    if constexpr (FP4) build_lut(reinterpret_cast<uint8_t*>(lut));

    // This thread's activation rows in its warpgroup's copy (-1: absent token) and its token-scale row.
    const int tid = static_cast<int>(threadIdx.x % kWgThreads);
    constexpr int kXPer = (BN * 8 + kWgThreads - 1) / kWgThreads;
    int64_t x_rows[kXPer];
#pragma unroll
    for (int i = 0; i < kXPer; ++i) {
        const int r = (tid + i * kWgThreads) / 8;
        x_rows[i] = r < t.ntok ? slot_row(a, t, r) / a.x_div : -1;
    }
    const int64_t scale_row = tid < t.ntok ? slot_row(a, t, tid) / a.x_div : -1;
    auto stage = [&](int kb) { return smem + (kb % kStages) * L::kBytes; };
    auto stage_x = [&](int kb) { return stage(kb) + L::kX + wg * BN * 128; };
    auto stage_xscale = [&](int kb) { return reinterpret_cast<float*>(stage(kb) + L::kXScale) + wg * BN; };
    const WeightSlot<MB> slot = weight_slot<MB>(t, n0);
    auto raw_stage = [&](int kb) { return smem + L::kRaw + (kb % (FP4 ? L::kRawStages : 1)) * L::kRawBytes; };
    auto issue_block = [&](int kb) {  // block kb's activations (and FP8 weights) into its stage
        if (kb < nk) {
            uint8_t* s = stage(kb);
            issue_x<BN>(a, x_rows, scale_row, kb, stage_x(kb), stage_xscale(kb));
            if constexpr (!FP4) {
                issue_fp8_weights<MB>(t, n0, a.rows, a.k, kb, s + L::kW, reinterpret_cast<float*>(s + L::kWScale));
            }
        }
    };
    auto issue_codes = [&](int kb) {  // block kb's FP4 codes into its raw stage
        if constexpr (FP4) {
            if (kb < nk) issue_fp4_raw<MB>(slot, a.rows, a.k, kb, raw_stage(kb));
        }
    };
    auto expand = [&](int kb) {  // block kb's landed codes -> its stage, as e4m3
        if constexpr (FP4) {
            if (kb < nk) {
                RawWeights<WeightSlot<MB>::kGroups> raw;
                read_fp4_raw<MB>(slot, a.rows, raw_stage(kb), raw);
                uint8_t* s = stage(kb);
                store_fp4<MB>(slot, raw, s + L::kW, reinterpret_cast<float*>(s + L::kWScale), lut, a.clamp_count);
            }
        }
    };

    // Prologue: commit group A = block 0's activations and codes, B = block 1's, C = the codes of blocks 2 ..
    // kRawStages - 1 (FP4 only); A and B landed, block 0 expanded, C still in flight. Iteration kb commits one group:
    // block kb + 2's activations and block kb + kRawStages's codes (an empty group past the end keeps the wait counts
    // uniform); its closing wait leaves only that group pending, so iteration kb + 1 finds block kb + 2's codes (in C
    // or in a group at least two back) and block kb + 1's activations landed.
    constexpr int kAhead = FP4 ? L::kRawStages : 0;
    issue_block(0);
    issue_codes(0);
    cp_async_commit();
    issue_block(1);
    issue_codes(1);
    cp_async_commit();
    if constexpr (FP4) {
        for (int r = 2; r < kAhead; ++r) issue_codes(r);
        cp_async_commit();
    }
    __syncthreads();  // the byte table
    cp_async_wait<1>();
    expand(0);
    fence_proxy_async();
    __syncthreads();

    float acc[MB][BN / 2], part[MB][BN / 2];
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[mb][i] = part[mb][i] = 0.0f;
    }
    const int row_base = 64 * wg + 16 * warp_in_wg;  // this warp's first fragment row within each 128-row half
    for (int kb = 0; kb < nk; ++kb) {
        uint8_t* s = stage(kb);
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) fence_regs(part[mb]);
        wgmma_fence();
        const uint64_t desc_x = smem_desc_sw128(stage_x(kb));
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) {
            const uint64_t desc_w = smem_desc_sw128(s + L::kW + (mb * 128 + 64 * wg) * 128);
#pragma unroll
            for (int j = 0; j < 4; ++j) wgmma_m64k32<BN>(part[mb], desc_w + 2 * j, desc_x + 2 * j, j > 0 ? 1 : 0);
        }
        wgmma_commit();
        expand(kb + 1);  // while the tensor cores work
        issue_block(kb + 2);
        if constexpr (FP4) issue_codes(kb + kAhead);
        cp_async_commit();
        wgmma_wait_all();
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) fence_regs(part[mb]);
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) {
            promote<BN>(acc[mb], part[mb], reinterpret_cast<const float*>(s + L::kWScale) + mb * 128, stage_xscale(kb),
                        row_base);
        }
        cp_async_wait<1>();
        fence_proxy_async();
        warpgroup_barrier(wg);  // this warpgroup's stage kb + 1 is complete; the other warpgroup goes its own pace
    }
    if constexpr (MB == 2) {
        cp_async_wait<0>();
        __syncthreads();  // every stage is free: the epilogue stages through stage memory
        store_swiglu<BN>(a, t, n0, acc[0], acc[1], row_base, smem);
    } else {
        store_plain<BN>(a, t, n0, acc[0], row_base);
    }
}

template <int BN, int MB, bool FP4>
void launch_typed(cudaStream_t stream, const ExpertGemmArgs& a, unsigned tiles) {
    using L = StageLayout<BN, MB, FP4>;
    constexpr int kSmem = L::kTotal;
    static_assert(8 * BN * 4 + BN * 4 + BN * 128 <= kStages * L::kBytes, "epilogue staging");
    static bool configured = false;  // host-side, once per instantiation
    if (!configured) {
        cudaFuncSetAttribute(expert_gemm_fp8_kernel<BN, MB, FP4>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
        configured = true;
    }
    const dim3 grid(blocks_for(a.rows, kExpertGemmFeatures), tiles);
    launch_kernel(expert_gemm_fp8_kernel<BN, MB, FP4>, grid, kThreads, kSmem, stream, a);
}

}  // namespace

int expert_gemm_small_tile(WeightFormat format, bool swiglu) {
    if (format == WeightFormat::kFp4Row) return 16;
    return format == WeightFormat::kFp8Block && !swiglu ? 16 : 0;
}

int expert_gemm_large_tile(WeightFormat format, bool swiglu) {
    if (format == WeightFormat::kFp4Row) return swiglu ? 64 : 128;
    return format == WeightFormat::kFp8Block && !swiglu ? 128 : 0;
}

void launch_expert_gemm_fp8(cudaStream_t stream, const ExpertGemmArgs& a) {
    const bool swiglu = a.table_up != nullptr;
    const unsigned tiles = a.tile_expert != nullptr ? static_cast<unsigned>(a.max_tiles)
                                                    : blocks_for(a.dense_m, a.tile_n > 0 ? a.tile_n : 1);
    if (tiles == 0 || a.rows == 0) return;
    if (a.format == WeightFormat::kFp4Row) {
        if (swiglu) {
            a.tile_n == 16 ? launch_typed<16, 2, true>(stream, a, tiles) : launch_typed<64, 2, true>(stream, a, tiles);
        } else {
            a.tile_n == 16 ? launch_typed<16, 1, true>(stream, a, tiles) : launch_typed<128, 1, true>(stream, a, tiles);
        }
    } else {
        a.tile_n == 16 ? launch_typed<16, 1, false>(stream, a, tiles) : launch_typed<128, 1, false>(stream, a, tiles);
    }
}

}  // namespace dsv4::cuda
