// Grouped routed-expert GEMM on TMA-fed, warp-specialized wgmma over e4m3 copies of the experts (kernels_expert_tma.h).
// The staged and warp-specialized W4A8 kernels expand FP4 codes inside their K loop, ~800 instructions a warp per K
// block, and stay instruction-bound at 12-18% of the FP8 ceiling; here the weights arrive as e4m3 already (expanded
// once a step) and the activations in slot order, so a stage is three copies: the weight tile and the token tile as
// TMA boxes that land 128-byte swizzled, the rows' scales as a bulk copy; the tokens' scales are loaded by the
// producer warp's lanes. Two consumer warpgroups run the staged kernel's wgmma steps, promotions and epilogues
// (expert_gemm_tile.cuh) on them, so the bits are the staged kernel's. Work items are (token tile, 128-feature block)
// pairs of the device-side plan, consecutive items sharing a token tile; blocks are persistent over them.
#include <algorithm>

#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/expert_gemm_tile.cuh"
#include "backend/cuda/kernels_expert_tma.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/tensor_map.h"

namespace dsv4::cuda {
namespace {

using namespace expert_gemm;  // NOLINT(google-build-using-namespace): the staged kernel's tile arithmetic

constexpr int kThreads = 128 + kComputeThreads;  // the producer warpgroup (one warp copies), two consumers
constexpr int kConsumerWarps = kComputeThreads / 32;

// MB = 1: plain projection, 128 weight rows x 128 tokens; MB = 2: SwiGLU, W1's and W3's 128 rows x 64 tokens.
template <int MB>
struct TmaLayout {
    static constexpr int BN = MB == 2 ? kExpertTmaUpTile : kExpertTmaDownTile;
    using Stage = StageTile<BN, MB>;
    static constexpr int kStages = MB == 2 ? 5 : 6;
    static constexpr int kEpilogue = kStages * Stage::kBytes;  // store_swiglu's [8][BN] amax, [BN] scales, [BN][128]
    static constexpr int kEpilogueBytes = MB == 2 ? round_up(8 * BN * 4 + BN * 4 + BN * 128, 128) : 0;
    static constexpr int kBar = kEpilogue + kEpilogueBytes;
    static constexpr int kTotal = kBar + 2 * kStages * 8 + 1024;  // + alignment slack
    static constexpr uint32_t kCopyBytes = Stage::kWRows * 128 + BN * 128 + Stage::kWRows * 4;
    static_assert(kTotal <= 227 * 1024, "shared memory");
};

struct TmaExpertParams {
    CUtensorMap w_map;  // the copies' codes [experts x row tiles x tile rows][k], box [tile rows][128]
    CUtensorMap x_map;  // x_sorted's codes [rows_pad][k], box [BN][128]
    ExpertGemmArgs g;
    const float* w_scales;
    const float* x_scales;
    int64_t x_rows_pad;
    int nk, row_tiles;
};

// The producer warp: for each K block of each work item, once the stage is free, lane 0 announces the copies' bytes
// and starts them; every lane stores its tokens' scales and arrives (the stage's `full` barrier counts 32).
template <int MB>
__device__ void produce(const TmaExpertParams& p, uint8_t* smem, uint64_t* full, uint64_t* empty, int units) {
    using L = TmaLayout<MB>;
    const int lane = static_cast<int>(threadIdx.x);
    int it = 0;
    for (int u = static_cast<int>(blockIdx.x); u < units; u += static_cast<int>(gridDim.x)) {
        const int tile = u / p.row_tiles, nb = u % p.row_tiles;
        const int e = p.g.tile_expert[tile], row0 = p.g.tile_row0[tile], ntok = p.g.tile_rows[tile];
        const int64_t w_tile = static_cast<int64_t>(e) * p.row_tiles + nb;
        for (int kb = 0; kb < p.nk; ++kb, ++it) {
            const int s = it % L::kStages;
            mbarrier_wait(&empty[s], ((it / L::kStages) & 1) ^ 1);  // a fresh barrier's "previous phase" is complete
            uint8_t* stage = smem + s * L::Stage::kBytes;
            float* xscale = reinterpret_cast<float*>(stage + L::Stage::kXScale);
            for (int j = lane; j < L::BN; j += 32) {
                xscale[j] = j < ntok ? p.x_scales[kb * p.x_rows_pad + row0 + j] : 0.0f;
            }
            if (lane == 0) {
                mbarrier_arrive_expect(&full[s], L::kCopyBytes);
                tma_load_2d(stage + L::Stage::kW, &p.w_map, kb * 128, static_cast<int>(w_tile * L::Stage::kWRows),
                            &full[s]);
                tma_load_2d(stage + L::Stage::kX, &p.x_map, kb * 128, row0, &full[s]);
                bulk_copy(stage + L::Stage::kWScale, p.w_scales + (w_tile * p.nk + kb) * L::Stage::kWRows,
                          L::Stage::kWRows * 4, &full[s]);
            } else {
                mbarrier_arrive(&full[s]);
            }
        }
    }
}

template <int MB>
__device__ void consume(const TmaExpertParams& p, uint8_t* smem, uint64_t* full, uint64_t* empty, int units) {
    using L = TmaLayout<MB>;
    constexpr int BN = L::BN;
    const int ct = static_cast<int>(threadIdx.x) - 128;
    const int c = ct / 128, lane = ct % 32;
    const int row_base = 64 * c + 16 * ((ct / 32) % 4);  // this warp's first fragment row within each 128-row half
    int it = 0;
    for (int u = static_cast<int>(blockIdx.x); u < units; u += static_cast<int>(gridDim.x)) {
        float acc[MB][BN / 2], part[MB][BN / 2];
        zero_accumulators<BN, MB>(acc, part);
        for (int kb = 0; kb < p.nk; ++kb, ++it) {
            const int s = it % L::kStages;
            uint8_t* stage = smem + s * L::Stage::kBytes;
            mbarrier_wait(&full[s], (it / L::kStages) & 1);
            issue_block_wgmma<BN, MB>(part, stage + L::Stage::kW, stage + L::Stage::kX, c);
            wgmma_commit();
            wgmma_wait_all();
            promote_block<BN, MB>(acc, part, reinterpret_cast<const float*>(stage + L::Stage::kWScale),
                                  reinterpret_cast<const float*>(stage + L::Stage::kXScale), row_base);
            __syncwarp();
            if (lane == 0) mbarrier_arrive(&empty[s]);  // this warp has read the stage
        }
        const int tile = u / p.row_tiles;
        TileInfo t;  // the epilogues read the plan's slots (output rows by row_ids) and token count
        t.row0 = p.g.tile_row0[tile];
        t.ntok = p.g.tile_rows[tile];
        const int64_t n0 = static_cast<int64_t>(u % p.row_tiles) * 128;
        if constexpr (MB == 2) {
            store_swiglu<BN>(p.g, t, n0, acc[0], acc[1], row_base, smem + L::kEpilogue, ct, [] { consumer_barrier(); });
        } else {
            store_plain<BN>(p.g, t, n0, acc[0], row_base);
        }
    }
}

template <int MB>
__global__ void __launch_bounds__(kThreads, 1) expert_gemm_tma_kernel(const __grid_constant__ TmaExpertParams p) {
    pdl_begin();
    using L = TmaLayout<MB>;
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = align_shared_1024(smem_raw);
    auto* full = reinterpret_cast<uint64_t*>(smem + L::kBar);
    uint64_t* empty = full + L::kStages;
    const int units = p.g.tile_count[0] * p.row_tiles;
    if (threadIdx.x == 0) {
        for (int s = 0; s < L::kStages; ++s) {
            mbarrier_init_count(&full[s], 32);
            mbarrier_init_count(&empty[s], kConsumerWarps);
        }
        fence_barrier_init();
    }
    __syncthreads();
    // Registers move to the consumers (MB x BN / 2 accumulators and as many partial sums a thread).
    if (threadIdx.x < 128) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x < 32) produce<MB>(p, smem, full, empty, units);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
        consume<MB>(p, smem, full, empty, units);
    }
}

template <int MB>
void launch_typed(cudaStream_t stream, const TmaExpertParams& p) {
    constexpr int kSmem = TmaLayout<MB>::kTotal;
    static bool configured = false;  // host-side, once per instantiation
    if (!configured) {
        cudaFuncSetAttribute(expert_gemm_tma_kernel<MB>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
        configured = true;
    }
    static const int sms = std::max(device_sms(), 1);
    const int units = p.g.max_tiles * p.row_tiles;  // a bound: the plan's count is on the device
    launch_kernel(expert_gemm_tma_kernel<MB>, dim3(std::max(1, std::min(units, sms))), dim3(kThreads), kSmem, stream,
                  p);
}

}  // namespace

void launch_expert_gemm_tma(cudaStream_t stream, const ExpertTmaArgs& a) {
    const bool swiglu = a.w.tile_rows == 256;
    const int bn = swiglu ? kExpertTmaUpTile : kExpertTmaDownTile;
    TmaExpertParams p{};
    p.w_map =
        tensor_map_bytes_sw128(a.w.codes, static_cast<uint64_t>(a.w.code_rows(a.experts)), static_cast<uint64_t>(a.w.k),
                               static_cast<uint64_t>(a.w.k), static_cast<uint32_t>(a.w.tile_rows), 128);
    p.x_map = tensor_map_bytes_sw128(a.x_sorted.codes, static_cast<uint64_t>(a.x_sorted.rows_pad),
                                     static_cast<uint64_t>(a.x_sorted.k), static_cast<uint64_t>(a.x_sorted.k),
                                     static_cast<uint32_t>(bn), 128);
    p.g = a.g;
    p.w_scales = a.w.scales;
    p.x_scales = a.x_sorted.scales;
    p.x_rows_pad = a.x_sorted.rows_pad;
    p.nk = static_cast<int>(a.w.k / 128);
    p.row_tiles = static_cast<int>(a.w.row_tiles());
    if (swiglu) {
        launch_typed<2>(stream, p);
    } else {
        launch_typed<1>(stream, p);
    }
}

}  // namespace dsv4::cuda
