// Grouped (routed-expert) W4A8 GEMM on FP8 tensor cores, warp-specialized and persistent: the same tiles, wgmma
// steps, promotions and epilogues as the two-warpgroup kernel (kernels_expert_fp8.cu; the same bits for the same tile
// width), with the work split by role instead of by weight rows. Two producer warpgroups copy each 128-wide K block's
// FP4 codes, row scale bytes, activation tile and token scales into a raw ring (cp.async, kRawStages - 1 blocks
// ahead), expand the codes to e4m3 into the block's stage (one activation tile for both consumers) and signal the
// stage full on an mbarrier; two consumer warpgroups (64 weight rows of each 128 each, as before) wait for it, run the
// wgmma steps, promote their partial sums and signal the stage empty. The consumers never expand, copy or wait on
// copies: one consumer's promotion overlaps the other's wgmma, and the producer's expansion overlaps both (in the
// two-warpgroup kernel each warpgroup did all three in turn, 16.9% of the FP8 ceiling at 8K tokens, H200). A block
// keeps one feature block and takes every gridDim.y-th tile: the producer runs on into the next tile's K blocks while
// the consumers write the last one's outputs (their SwiGLU epilogue has its own shared memory), so no tile pays for
// filling the pipeline. The expansion is most of the instructions (ncu, 8K tokens: ~800 a warp and K block in the
// two-warpgroup kernel, 43% of them expanding): one producer warpgroup, a warp a scheduler, could not issue them as
// fast as the tensor cores run a block, so there are two (a row a thread in SwiGLU mode, half a row's groups else).
// FP4 weights only (FP8 experts keep the two-warpgroup kernel). DSV4_EXPERT_WS=1
// (CudaOptions::expert_ws) selects it.
#include <algorithm>

#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/expert_gemm_tile.cuh"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

using namespace expert_gemm;  // NOLINT(google-build-using-namespace): the pieces shared with the two-warpgroup kernel

constexpr int kProducerThreads = 256;  // two warpgroups
constexpr int kThreads = kProducerThreads + kComputeThreads;
constexpr int kStages = 3;  // e4m3 stages between the producer and the consumers
constexpr int kMaxSmem = 227 * 1024;
constexpr int kGroupsPerRow = 4;  // 32-code FP4 groups of a row in a 128-wide K block

// Shared memory: kStages e4m3 stages (StageTile, 1024-aligned for the 128-byte swizzle), the SwiGLU epilogue's
// staging, the raw ring, the barriers, the byte table. A raw slot: codes [groups a thread][producer threads][16
// bytes] (a warp's loads are consecutive 16-byte chunks), each thread's copy of its row's scale bytes [producer
// threads][4], activation chunks [BN x 8][16] (chunk f: token f / 8, 16 bytes f % 8), token scales [BN].
template <int BN, int MB>
struct WsLayout : StageTile<BN, MB> {
    static constexpr int kStageBytes = StageTile<BN, MB>::kBytes;
    // A producer thread's share of the stage's 128 MB weight rows: one row (SwiGLU) or half of one (groups).
    static constexpr int kThreadsPerRow = kProducerThreads / (128 * MB);
    static constexpr int kGroups = kGroupsPerRow / kThreadsPerRow;
    static_assert(kThreadsPerRow * 128 * MB == kProducerThreads && kGroups * kThreadsPerRow == kGroupsPerRow,
                  "whole rows or row halves a producer thread");
    static constexpr int kRawCodes = 0;
    static constexpr int kRawScales = kGroups * kProducerThreads * 16;
    static constexpr int kRawX = kRawScales + kProducerThreads * 4;
    static constexpr int kRawXScale = kRawX + BN * 128;
    static constexpr int kRawBytes = round_up(kRawXScale + BN * 4, 128);
    static constexpr int kEpilogue = kStages * kStageBytes;  // store_swiglu's [8][BN] amax, [BN] scales, [BN][128]
    static constexpr int kEpilogueBytes = MB == 2 ? round_up(8 * BN * 4 + BN * 4 + BN * 128, 128) : 0;
    static constexpr int kRaw = kEpilogue + kEpilogueBytes;
    static constexpr int kBarriers = 2 * kStages * 8;
    static constexpr int kFixed = kRaw + kBarriers + kLutRows * 8 + 1024;  // + alignment slack
    static constexpr int kRawFit = (kMaxSmem - kFixed) / kRawBytes;
    // Raw blocks in flight: as many as fit, at most 8 (a tile's K blocks at decode widths), at least 2.
    static constexpr int kRawStages = kRawFit > 8 ? 8 : kRawFit;
    static constexpr int kBar = kRaw + kRawStages * kRawBytes;
    static constexpr int kLut = kBar + kBarriers;
    static constexpr int kTotal = kFixed + kRawStages * kRawBytes;
    static_assert(kRawStages >= 2, "shared memory: two raw blocks at least");
    static_assert(kTotal <= kMaxSmem, "shared memory");
    static constexpr int kXChunksPerThread = (BN * 8 + kProducerThreads - 1) / kProducerThreads;
};

// The producer thread's fixed part of every K block: its weight row (tile row p % (128 MB): W1's rows, then W3's)
// and first group, its activation chunks' source rows (-1: no token) and token-scale row.
template <int BN, int MB>
struct ProducerSlots {
    const uint8_t* data = nullptr;
    const uint8_t* scales = nullptr;
    int tile_row = 0;
    int group0 = 0;
    bool row_valid = false;
    int64_t x_rows[WsLayout<BN, MB>::kXChunksPerThread];
    int64_t scale_row = -1;
};

template <int BN, int MB>
__device__ __forceinline__ ProducerSlots<BN, MB> producer_slots(const ExpertGemmArgs& a, const TileInfo& t, int64_t n0,
                                                                int p) {
    using L = WsLayout<BN, MB>;
    ProducerSlots<BN, MB> s;
    s.tile_row = p % (128 * MB);
    s.group0 = p / (128 * MB) * L::kGroups;
    const int64_t feature = n0 + s.tile_row % 128;
    s.row_valid = feature < a.rows;
    const bool w3 = s.tile_row >= 128;
    s.data = (w3 ? t.data3 : t.data1) + (s.row_valid ? feature * (a.k / 2) : 0);
    s.scales = (w3 ? t.scales3 : t.scales1) + (s.row_valid ? feature * t.scale_cols : 0);
#pragma unroll
    for (int i = 0; i < L::kXChunksPerThread; ++i) {
        const int f = p + i * kProducerThreads;
        const int r = f / 8;
        s.x_rows[i] = f < BN * 8 && r < t.ntok ? slot_row(a, t, r) / a.x_div : -1;
    }
    s.scale_row = p < t.ntok && p < BN ? slot_row(a, t, p) / a.x_div : -1;
    return s;
}

// Starts copying K block kb (codes, row scale bytes, activation chunks, token scale) into a raw slot; what has no
// source (rows past the weight, absent tokens) is zero-filled.
template <int BN, int MB>
__device__ __forceinline__ void issue_raw(const ExpertGemmArgs& a, const ProducerSlots<BN, MB>& s, int kb, int p,
                                          uint8_t* raw) {
    using L = WsLayout<BN, MB>;
#pragma unroll
    for (int i = 0; i < L::kGroups; ++i) {
        cp_async16(raw + L::kRawCodes + (i * kProducerThreads + p) * 16, s.data + kb * 64 + (s.group0 + i) * 16,
                   s.row_valid ? 16 : 0);
    }
    cp_async4(raw + L::kRawScales + p * 4, s.scales + kb * 4, s.row_valid ? 4 : 0);
#pragma unroll
    for (int i = 0; i < L::kXChunksPerThread; ++i) {
        const int f = p + i * kProducerThreads;
        if (f >= BN * 8) break;
        const bool valid = s.x_rows[i] >= 0;
        const uint8_t* src = a.x_codes + (valid ? s.x_rows[i] * a.x_stride + kb * 128 + (f % 8) * 16 : 0);
        cp_async16(raw + L::kRawX + f * 16, src, valid ? 16 : 0);
    }
    if (p < BN) {
        const bool valid = s.scale_row >= 0;
        cp_async4(raw + L::kRawXScale + p * 4, a.x_scales + (valid ? kb * a.x_rows_pad + s.scale_row : 0),
                  valid ? 4 : 0);
    }
}

// A landed raw slot (this thread's own copies) into a stage: the weight rows expanded to e4m3 with their scales, the
// activation chunks swizzled, the token scale.
template <int BN, int MB>
__device__ __forceinline__ void fill_stage(const ExpertGemmArgs& a, const ProducerSlots<BN, MB>& s, int p,
                                           const uint8_t* raw, uint8_t* stage, const uint2* lut) {
    using L = WsLayout<BN, MB>;
    uint4 groups[L::kGroups];
#pragma unroll
    for (int i = 0; i < L::kGroups; ++i) {
        groups[i] = *reinterpret_cast<const uint4*>(raw + L::kRawCodes + (i * kProducerThreads + p) * 16);
    }
    const uint32_t scales = *reinterpret_cast<const uint32_t*>(raw + L::kRawScales + p * 4);
    expand_fp4_groups(s.tile_row, s.group0, groups, scales, s.row_valid, stage + L::kW,
                      reinterpret_cast<float*>(stage + L::kWScale), lut, a.clamp_count);
#pragma unroll
    for (int i = 0; i < L::kXChunksPerThread; ++i) {
        const int f = p + i * kProducerThreads;
        if (f >= BN * 8) break;
        *reinterpret_cast<uint4*>(stage + L::kX + sw128_offset(f / 8, f % 8)) =
            *reinterpret_cast<const uint4*>(raw + L::kRawX + f * 16);
    }
    if (p < BN) {
        reinterpret_cast<float*>(stage + L::kXScale)[p] = reinterpret_cast<const float*>(raw + L::kRawXScale)[p];
    }
}

// This block's tiles: blockIdx.y, blockIdx.y + gridDim.y, ... below the launch's count.
__device__ __forceinline__ int block_tiles(int count) {
    const int y = static_cast<int>(blockIdx.y), step = static_cast<int>(gridDim.y);
    return count > y ? (count - 1 - y) / step + 1 : 0;
}

__device__ __forceinline__ int block_tile(int i) {
    return static_cast<int>(blockIdx.y) + i * static_cast<int>(gridDim.y);
}

// The producer warpgroups over the block's units (tile i, K block kb) = i * nk + kb in order: raw units kRawStages - 1
// ahead (across tile boundaries); unit g goes into stage g % kStages once the consumers have released that stage's
// previous unit (g - kStages).
template <int BN, int MB>
__device__ __forceinline__ void produce(const ExpertGemmArgs& a, int64_t n0, int nk, int units, uint8_t* smem,
                                        uint64_t* full, uint64_t* empty, const uint2* lut) {
    using L = WsLayout<BN, MB>;
    constexpr int R = L::kRawStages;
    const int p = static_cast<int>(threadIdx.x);
    auto raw = [&](int g) { return smem + L::kRaw + (g % R) * L::kRawBytes; };
    int issue_tile = -1;
    ProducerSlots<BN, MB> slots;
    auto issue = [&](int g) {  // unit g's copies (none past the last unit)
        if (g >= units) return;
        const int i = g / nk;
        if (i != issue_tile) {
            TileInfo t;
            load_tile(a, BN, block_tile(i), t);
            slots = producer_slots<BN, MB>(a, t, n0, p);
            issue_tile = i;
        }
        issue_raw<BN, MB>(a, slots, g % nk, p, raw(g));
    };
    // Group j holds raw unit j (empty groups past the last unit keep the counts uniform): after iteration g's
    // commit, g + R groups exist and waiting until R - 1 are pending leaves unit g landed.
    for (int r = 0; r < R - 1; ++r) {
        issue(r);
        cp_async_commit();
    }
    for (int g = 0; g < units; ++g) {
        issue(g + R - 1);  // into the slot unit g - 1 used
        cp_async_commit();
        cp_async_wait<R - 1>();
        const int s = g % kStages;
        if (g >= kStages) mbarrier_wait(&empty[s], static_cast<uint32_t>(g / kStages - 1) & 1u);
        fill_stage<BN, MB>(a, slots, p, raw(g), smem + s * L::kStageBytes, lut);
        fence_proxy_async();  // the stage's generic writes before the consumers' wgmma reads them
        mbarrier_arrive(&full[s]);
    }
}

// A consumer warpgroup (c = 0, 1): rows 64 c .. of each 128-row half of the stage, every token of the tile, tile
// after tile.
template <int BN, int MB>
__device__ __forceinline__ void consume(const ExpertGemmArgs& a, int64_t n0, int nk, int tiles, uint8_t* smem,
                                        uint64_t* full, uint64_t* empty) {
    using L = WsLayout<BN, MB>;
    const int ct = static_cast<int>(threadIdx.x) - kProducerThreads;
    const int c = ct / 128, warp_in_wg = (ct / 32) % 4;
    const int row_base = 64 * c + 16 * warp_in_wg;  // this warp's first fragment row within each 128-row half
    for (int i = 0; i < tiles; ++i) {
        float acc[MB][BN / 2], part[MB][BN / 2];
        zero_accumulators<BN, MB>(acc, part);
        for (int kb = 0; kb < nk; ++kb) {
            const int g = i * nk + kb, s = g % kStages;
            uint8_t* stage = smem + s * L::kStageBytes;
            mbarrier_wait(&full[s], static_cast<uint32_t>(g / kStages) & 1u);
            issue_block_wgmma<BN, MB>(part, stage + L::kW, stage + L::kX, c);
            wgmma_commit();
            wgmma_wait_all();
            promote_block<BN, MB>(acc, part, reinterpret_cast<const float*>(stage + L::kWScale),
                                  reinterpret_cast<const float*>(stage + L::kXScale), row_base);
            mbarrier_arrive(&empty[s]);
        }
        // The epilogue's staging is its own (the producer is filling stages for the next tile). Its barriers order a
        // tile's staging reads before the next tile's writes: a thread writes a region again only after every thread
        // has passed the barrier that follows the last reads of it.
        TileInfo t;  // read here, not held through the K loop (registers)
        load_tile(a, BN, block_tile(i), t);
        if constexpr (MB == 2) {
            store_swiglu<BN>(a, t, n0, acc[0], acc[1], row_base, smem + L::kEpilogue, ct, [] { consumer_barrier(); });
        } else {
            store_plain<BN>(a, t, n0, acc[0], row_base);
        }
    }
}

// Grid: (rows / 128 feature blocks, persistent tile slots); threads: the producer warpgroup, then the two consumers.
template <int BN, int MB>
__global__ void __launch_bounds__(kThreads, 1) expert_gemm_ws_kernel(ExpertGemmArgs a) {
    pdl_begin();
    using L = WsLayout<BN, MB>;
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = align_shared_1024(smem_raw);
    const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kExpertGemmFeatures;
    const int tiles = block_tiles(tile_count(a, BN));
    if (n0 >= a.rows || tiles == 0) return;
    auto* full = reinterpret_cast<uint64_t*>(smem + L::kBar);
    uint64_t* empty = full + kStages;
    auto* lut = reinterpret_cast<uint2*>(smem + L::kLut);
    build_lut(reinterpret_cast<uint8_t*>(lut));
    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbarrier_init_count(&full[s], kProducerThreads);
            mbarrier_init_count(&empty[s], kComputeThreads);
        }
        fence_barrier_init();
    }
    __syncthreads();  // the byte table and the barriers; the roles part here
    const int nk = static_cast<int>(a.k / 128);
    // Registers move from the producers (copies and byte permutes) to the consumers (accumulators and partial sums of
    // 64 x BN x MB each): 256 x 80 + 256 x 176 = 65,536, all of the 512 x 128 held at launch. ptxas allocates each
    // role within its count (-warn-spills).
    if (threadIdx.x < kProducerThreads) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 80;\n" ::: "memory");
        produce<BN, MB>(a, n0, nk, tiles * nk, smem, full, empty, lut);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 176;\n" ::: "memory");
        consume<BN, MB>(a, n0, nk, tiles, smem, full, empty);
    }
}

template <int BN, int MB>
void launch_typed(cudaStream_t stream, const ExpertGemmArgs& a, unsigned tiles) {
    constexpr int kSmem = WsLayout<BN, MB>::kTotal;
    static bool configured = false;  // host-side, once per instantiation
    if (!configured) {
        cudaFuncSetAttribute(expert_gemm_ws_kernel<BN, MB>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
        configured = true;
    }
    // One block an SM: each feature block gets SMs / feature blocks tile slots (at least one, at most the tiles).
    const unsigned features = blocks_for(a.rows, kExpertGemmFeatures);
    static const int sms = device_sms();
    const unsigned slots = std::max(1u, std::min(tiles, static_cast<unsigned>(std::max(sms, 1)) / features));
    launch_kernel(expert_gemm_ws_kernel<BN, MB>, dim3(features, slots), kThreads, kSmem, stream, a);
}

}  // namespace

void launch_expert_gemm_ws(cudaStream_t stream, const ExpertGemmArgs& a, unsigned tiles) {
    with_fp4_tile(a.tile_n, a.table_up != nullptr,
                  [&](auto bn, auto mb) { launch_typed<decltype(bn)::value, decltype(mb)::value>(stream, a, tiles); });
}

}  // namespace dsv4::cuda
