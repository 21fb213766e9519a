// Dense FP8 GEMM on wgmma fed by the TMA (kernels_fp8_tma.h), warp-specialized and persistent. The staged kernel
// (kernels_expert_fp8.cu, dense mode) copies its tiles with cp.async from the same threads that run wgmma and promote,
// one K block at a time: it reached 15-19% of the FP8 ceiling. Here one thread of a producer warpgroup keeps
// kStages K blocks in flight with three copies each (the weight tile and the token tile as TMA boxes that land
// 128-byte swizzled, the tokens' scales as a bulk copy), completed on a `full` mbarrier per stage; two consumer
// warpgroups (64 tokens each of a 128 x 128 tile, against all 128 weight rows) wait for a stage, run its four
// m64n128k32 steps, promote the block's partial sums and release the stage on its `empty` barrier. The consumers issue
// no copies and wait on no loads; while one promotes, the other's wgmma runs. Blocks are persistent over the tiles,
// rastered in groups of kGroupTiles weight tiles so that the tiles in flight share their operands in L2; the producer
// runs on into the next tile while the consumers store the last one.
#include <algorithm>

#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/expert_gemm_tile.cuh"
#include "backend/cuda/kernels_fp8_tma.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma_fp8.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kTileRows = 128;    // weight rows (output features) a tile (wgmma's N)
constexpr int kTileTokens = 128;  // tokens a tile: two consumer warpgroups of 64 (wgmma's M)
constexpr int kBlockK = 128;      // one K block: one scale of each operand
constexpr int kStages = 6;
constexpr int kThreads = 384;  // the producer warpgroup, then two consumer warpgroups
constexpr int kConsumerWarps = 8;
constexpr int kGroupTiles = 8;  // weight tiles a raster group spans

// A stage: the weight tile [128][128] and the token tile [128][128] (both 1024-aligned for the swizzle), then the
// tokens' scales of the K block.
constexpr int kStageW = 0;
constexpr int kStageX = kTileRows * kBlockK;
constexpr int kStageXScale = kStageX + kTileTokens * kBlockK;
constexpr int kStageBytes = (kStageXScale + kTileTokens * 4 + 1023) / 1024 * 1024;
constexpr int kBarriers = kStages * kStageBytes;
constexpr int kSmemBytes = kBarriers + 2 * kStages * 8 + 1024;  // + alignment slack
static_assert(kSmemBytes <= 227 * 1024, "shared memory");

struct TmaGemmArgs {    // 64-byte aligned by its tensor maps
    CUtensorMap w_map;  // [rows][k] bytes, box [128][128]
    CUtensorMap x_map;  // [x.rows_pad][x.k] bytes, box [128][128]
    const uint8_t* w_scales;
    int64_t w_scale_cols;
    const float* x_scales;  // at x_col0's first K block: [k / 128][x_rows_pad]
    int64_t x_rows_pad;
    int64_t rows, m, y_stride;
    float* y;
    int x_col0, nk, m_tiles, n_tiles;
};

// Tile t's weight tile and token tile: groups of kGroupTiles weight tiles, the token tiles running within a group.
__device__ __forceinline__ void tile_coords(const TmaGemmArgs& a, int t, int& n_tile, int& m_tile) {
    const int group_span = kGroupTiles * a.m_tiles;
    const int first_n = t / group_span * kGroupTiles;
    const int width = min(kGroupTiles, a.n_tiles - first_n);
    const int in_group = t % group_span;
    n_tile = first_n + in_group % width;
    m_tile = in_group / width;
}

// One thread issues every copy: for each K block of each of this block's tiles, wait until the stage is free, then
// announce its bytes and start its three copies.
__device__ void produce(const TmaGemmArgs& a, uint8_t* smem, uint64_t* full, uint64_t* empty, int tiles) {
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int n_tile = 0, m_tile = 0;
        tile_coords(a, t, n_tile, m_tile);
        const int m0 = m_tile * kTileTokens;
        // Token scales exist up to x_rows_pad (a multiple of 4, so whole 16-byte pieces); the box's rows past it are
        // zero codes whose products are never stored.
        const int scale_rows = a.x_rows_pad - m0 < kTileTokens ? static_cast<int>(a.x_rows_pad - m0) : kTileTokens;
        const uint32_t bytes = kStageXScale + scale_rows * 4;
        for (int kb = 0; kb < a.nk; ++kb, ++it) {
            const int s = it % kStages;
            mbarrier_wait(&empty[s], ((it / kStages) & 1) ^ 1);  // a fresh barrier's "previous phase" is complete
            uint8_t* stage = smem + s * kStageBytes;
            mbarrier_arrive_expect(&full[s], bytes);
            tma_load_2d(stage + kStageW, &a.w_map, kb * kBlockK, n_tile * kTileRows, &full[s]);
            tma_load_2d(stage + kStageX, &a.x_map, a.x_col0 + kb * kBlockK, m0, &full[s]);
            bulk_copy(stage + kStageXScale, a.x_scales + kb * a.x_rows_pad + m0, scale_rows * 4, &full[s]);
        }
    }
}

// The thread's outputs: tokens m0 + lane / 4 (+ 8) and features n0 + 8 j + 2 (lane % 4) (+ 1), a float2 each where
// the pair is inside the weight and 8-byte aligned.
__device__ __forceinline__ void store_tile(const TmaGemmArgs& a, const float (&acc)[kTileRows / 2], int64_t m0,
                                           int64_t n0, int lane) {
#pragma unroll
    for (int i = 0; i < kTileRows / 2; i += 2) {
        const int64_t token = m0 + lane / 4 + 8 * ((i >> 1) & 1);
        const int64_t feature = n0 + 8 * (i >> 2) + 2 * (lane & 3);
        if (token >= a.m || feature >= a.rows) continue;
        float* y = a.y + token * a.y_stride + feature;
        if (feature + 1 < a.rows && (reinterpret_cast<uintptr_t>(y) & 7) == 0) {
            *reinterpret_cast<float2*>(y) = make_float2(acc[i], acc[i + 1]);
        } else {
            y[0] = acc[i];
            if (feature + 1 < a.rows) y[1] = acc[i + 1];
        }
    }
}

// Consumer warpgroup `wg` (0 or 1): tokens 64 wg .. 64 wg + 63 of each tile, all 128 weight rows. Tokens are
// wgmma's M so that a thread's partial sums share two token scales (its two rows): the promotion is one FFMA a sum
// with ws x xs[token] formed twice a block (ws is a power of two, so part x (ws x xs) is the same float as
// (part x ws) x xs). With tokens on N it took an FMUL and an FFMA a sum and 16 shared loads of token scales.
__device__ void consume(const TmaGemmArgs& a, uint8_t* smem, uint64_t* full, uint64_t* empty, int tiles, int wg) {
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int row0 = wg * 64 + warp * 16 + lane / 4;  // the thread's first token of the tile
    float acc[kTileRows / 2], part[kTileRows / 2];
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int n_tile = 0, m_tile = 0;
        tile_coords(a, t, n_tile, m_tile);
        const uint8_t* w_scales = a.w_scales + static_cast<int64_t>(n_tile) * a.w_scale_cols;
#pragma unroll
        for (int i = 0; i < kTileRows / 2; ++i) acc[i] = 0.0f;
        for (int kb = 0; kb < a.nk; ++kb, ++it) {
            const int s = it % kStages;
            const float ws = decode_ue8m0(w_scales[kb]);
            mbarrier_wait(&full[s], (it / kStages) & 1);
            const uint8_t* stage = smem + s * kStageBytes;
            const uint64_t desc_x = smem_desc_sw128(stage + kStageX + wg * 64 * kBlockK);
            const uint64_t desc_w = smem_desc_sw128(stage + kStageW);
            wgmma_fence();
#pragma unroll
            for (int k = 0; k < kBlockK / 32; ++k) wgmma_m64n128k32(part, desc_x + 2 * k, desc_w + 2 * k, k);
            wgmma_commit();
            const auto* xs = reinterpret_cast<const float*>(stage + kStageXScale);
            const float s0 = ws * xs[row0], s1 = ws * xs[row0 + 8];
            wgmma_wait_all();
            expert_gemm::fence_regs(part);
#pragma unroll
            for (int i = 0; i < kTileRows / 2; ++i) acc[i] = fmaf(part[i], (i >> 1) & 1 ? s1 : s0, acc[i]);
            __syncwarp();
            if (lane == 0) mbarrier_arrive(&empty[s]);  // this warp has read the stage
        }
        store_tile(a, acc, static_cast<int64_t>(m_tile) * kTileTokens + wg * 64 + warp * 16,
                   static_cast<int64_t>(n_tile) * kTileRows, lane);
    }
}

__global__ void __launch_bounds__(kThreads, 1) fp8_gemm_tma_kernel(const __grid_constant__ TmaGemmArgs a) {
    pdl_begin();
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = expert_gemm::align_shared_1024(smem_raw);
    auto* full = reinterpret_cast<uint64_t*>(smem + kBarriers);
    uint64_t* empty = full + kStages;
    const int tiles = a.m_tiles * a.n_tiles;
    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbarrier_init(&full[s]);
            mbarrier_init_count(&empty[s], kConsumerWarps);
        }
        fence_barrier_init();
    }
    __syncthreads();
    // Registers move to the consumers (64 accumulators and 64 partial sums a thread): 128 x 40 + 256 x 232 <= 65,536.
    if (threadIdx.x < 128) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 0) produce(a, smem, full, empty, tiles);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
        consume(a, smem, full, empty, tiles, threadIdx.x / 128 - 1);
    }
}

}  // namespace

std::string fp8_tma_gemm_unmet(const Fp8TmaGemmParams& p) {
    if (p.k <= 0 || p.k % kBlockK != 0 || p.x_col0 % kBlockK != 0) return "a reduction dim in whole 128-wide blocks";
    if (p.x.k % 16 != 0 || p.x_col0 + p.k > p.x.k) return "activation columns inside 16-byte-aligned rows";
    if (reinterpret_cast<uintptr_t>(p.w_codes) % 16 != 0 || reinterpret_cast<uintptr_t>(p.x.codes) % 16 != 0 ||
        reinterpret_cast<uintptr_t>(p.x.scales) % 16 != 0 || p.x.rows_pad % 4 != 0) {
        return "16-byte-aligned weight codes, activation codes and scales";
    }
    if (p.rows < 1 || p.x.rows < 1 || p.rows > INT32_MAX || p.x.rows_pad > INT32_MAX || p.x.k > INT32_MAX) {
        return "1 to 2^31 rows of each operand";
    }
    return "";
}

void launch_fp8_tma_gemm(cudaStream_t stream, const Fp8TmaGemmParams& p) {
    TmaGemmArgs a{};
    a.w_map = tensor_map_bytes_sw128(p.w_codes, p.rows, p.k, p.k, kTileRows, kBlockK);
    a.x_map = tensor_map_bytes_sw128(p.x.codes, p.x.rows_pad, p.x.k, p.x.k, kTileTokens, kBlockK);
    a.w_scales = p.w_scales;
    a.w_scale_cols = p.w_scale_cols;
    a.x_scales = p.x.scales + (p.x_col0 / kBlockK) * p.x.rows_pad;
    a.x_rows_pad = p.x.rows_pad;
    a.rows = p.rows;
    a.m = p.x.rows;
    a.y = p.y;
    a.y_stride = p.y_stride;
    a.x_col0 = static_cast<int>(p.x_col0);
    a.nk = static_cast<int>(p.k / kBlockK);
    a.m_tiles = static_cast<int>((p.x.rows + kTileTokens - 1) / kTileTokens);
    a.n_tiles = static_cast<int>((p.rows + kTileRows - 1) / kTileRows);
    static bool configured = false;  // host-side, once
    if (!configured) {
        cudaFuncSetAttribute(fp8_gemm_tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        configured = true;
    }
    static const int sms = std::max(device_sms(), 1);
    const int tiles = a.m_tiles * a.n_tiles;
    launch_kernel(fp8_gemm_tma_kernel, dim3(std::min(tiles, sms)), dim3(kThreads), kSmemBytes, stream, a);
}

}  // namespace dsv4::cuda
