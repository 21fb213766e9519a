// Grouped (routed-expert) GEMM of FP4 weights at decode tile sizes (16 tokens) on FP8 wgmma with the weights in
// registers (kernels_fp8.h: ExpertKernel::kRegisterWeights). The staged kernel (kernels_expert_fp8.cu) expands every K
// block of weights into shared memory and meets at a barrier before the tensor cores read it; at decode sizes that
// chain (load, expand, barrier, wgmma, promote) is its time (ncu: a quarter occupancy, no eligible warp 63% of cycles;
// performance-log.md 2026-12-06). Here each thread expands its own two rows straight into wgmma's A fragment: no
// weight staging, no barrier a K block, and each thread's FP4 loads run K blocks ahead in registers. Only the tile's
// activations sit in shared memory, all of K, staged in phases of kPhaseBlocks K blocks. The same kernel on 64-token
// prefill tiles (a ring of activation phases, one K block of loads ahead) was 6-16% slower than the staged kernel
// there (H100, 2026-12-06, fourth session) and was removed: at those widths the expansion per K block is the limit,
// wherever it runs.
//
// K order within a 128-wide block: lane q of a row's four lanes loads 16 bytes, scale group q (32 codes under one
// per-32 scale), and gives word j to wgmma step j (A bytes 0..3 and 16..19 of the step: codes 8 j .. 8 j + 3 and
// 8 j + 4 .. 8 j + 7 of its group). So step j's K position 4 q + i is physical 32 q + 8 j + i and 16 + 4 q + i is
// 32 q + 8 j + 4 + i; the activations are staged in that order (4-byte unit u of a token's block lands at unit
// 4 (u % 8) + u / 8). A block's partial sum has the staged kernel's 128 products, the same weight expansion (byte
// table, exponent window, clamp counts), promotion and epilogues. The tensor cores sum a k32 step as a set (a
// permutation within the step kept the staged bits on the H100), but here a step mixes the four scale groups, so the
// last bits differ and a group far below the row's largest loses its products' low bits against it. A scale group a
// step costs a quad transpose of the words (or four 4-byte loads a row): 16-18% slower end to end at batch 64-256,
// no faster than the staged kernel (H100, 2026-12-06), so this order it is.
//
// Warpgroups: plain (MB = 1): two, rows 0..63 and 64..127 of the block's 128 features. SwiGLU (MB = 2): four, W1's
// two halves then W3's; the W3 warpgroups hand u to the W1 ones through shared memory for the SwiGLU epilogue.
#include <cuda_fp8.h>

#include "backend/cuda/expert_gemm_tile.cuh"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

using namespace expert_gemm;  // NOLINT(google-build-using-namespace): this file's shared pieces

constexpr int kMaxShared = 227 * 1024;  // the opt-in limit of a block on sm_90

constexpr int kTileTokens = 16;  // tokens a tile (the decode tiles)
constexpr int kDepth = 4;        // K blocks of FP4 loads in flight a thread
constexpr int kPhaseBlocks = 8;  // K blocks of activations staged a phase (all of K's stay: 2 KB a block)
constexpr int kXBlockBytes = kTileTokens * 128;  // one K block of the activation tile
// Epilogue (SwiGLU), over the activation tile once every wgmma has read it: u handed over ([kTileTokens / 2][256]
// floats), then store_swiglu's scratch.
constexpr int kHandOverBytes = kTileTokens / 2 * 256 * 4;
constexpr int kEpilogueBytes = kHandOverBytes + 8 * kTileTokens * 4 + kTileTokens * 4 + kTileTokens * 128;

// Shared memory of a launch over nk K blocks (byte offsets from the 1024-aligned base): the activation tile
// ([nk][kTileTokens][128], swizzled, K permuted) from 0, the token scales ([nk][kTileTokens]), the tile's activation
// rows ([kTileTokens], also the token-scale rows), the byte table.
struct RsLayout {
    int xscale = 0;
    int rows = 0;
    int lut = 0;
    int total = 0;  // bytes to request, with the alignment slack
    __host__ __device__ explicit RsLayout(int nk) {
        const int tile = nk * kXBlockBytes, base = tile > kEpilogueBytes ? tile : kEpilogueBytes;
        xscale = (base + 15) / 16 * 16;
        rows = xscale + nk * kTileTokens * 4;
        lut = rows + kTileTokens * 8;
        total = lut + kLutRows * 8 + 1024;
    }
};

// One thread's FP4 loads of a K block, rows g and g + 8: scale group q of each row (16 bytes, four words; word j
// feeds wgmma step j) and the rows' scale words (the four groups' UE8M0 bytes).
struct RsRaw {
    uint32_t w[2][4];
    uint32_t scales[2];
};

// The thread's two weight rows at K block 0 (the first byte of group q) and the scale words.
struct RsRows {
    const uint8_t* data = nullptr;    // row g's first byte of group q
    const uint8_t* scales = nullptr;  // row g's scale words
    uint32_t data_step = 0;           // bytes from row g's to row g + 8's (registers: one offset, not two pointers)
    uint32_t scale_step = 0;
    bool valid[2] = {};  // a row past the weight reads the last row; its sums are never stored nor its clamps counted
};

template <int PREFETCH>
__device__ __forceinline__ void load_raw(const RsRows& r, int kb, RsRaw& raw) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const uint4 v = load_u4<PREFETCH>(r.data + i * r.data_step + kb * 64);
        raw.w[i][0] = v.x;
        raw.w[i][1] = v.y;
        raw.w[i][2] = v.z;
        raw.w[i][3] = v.w;
        raw.scales[i] = load_u32<PREFETCH>(r.scales + i * r.scale_step + kb * 4);
    }
}

// The K block's A fragments of wgmma steps 0..3 (a[j]: rows g, g + 8, the A layout of wgmma_m64n16k32_rs) and the
// rows' scales, from the thread's raw loads: word j of its group q feeds step j, all through group q's byte table.
__device__ __forceinline__ void expand_block(const RsRaw& raw, const RsRows& rows, int q, const uint2* lut,
                                             uint32_t (&a)[4][4], float (&row_scale)[2], int& below) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int emax = row_emax(raw.scales[r]);
        row_scale[r] = dsv4::cuda::expert_gemm::row_scale(emax);
        const uint2 table = group_table(raw.scales[r], q, emax, rows.valid[r], lut, below);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const Fp4Bytes e = expand_fp4_word(raw.w[r][j], table.x, table.y);
            a[j][r] = e.lo;
            a[j][2 + r] = e.hi;
        }
    }
}

// Keeps A fragments alive (unchanged registers) until the wgmma wait that follows: the wgmma reads them
// asynchronously.
__device__ __forceinline__ void hold_fragments(uint32_t (&a)[4][4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[j][i])::"memory");
    }
}

// The tile's activation rows, also its token-scale rows (-1: an absent token), into shared memory, once.
__device__ __forceinline__ void tile_rows(const ExpertGemmArgs& a, const TileInfo& t, int64_t* rows) {
    const int tid = static_cast<int>(threadIdx.x);
    if (tid < kTileTokens) rows[tid] = tid < t.ntok ? slot_row(a, t, tid) / a.x_div : -1;
}

// Phase p's activations (K blocks kPhaseBlocks p ..) and token scales by cp.async, in the permuted K order; absent
// tokens zero-filled.
template <int kThreads>
__device__ __forceinline__ void stage_phase(const ExpertGemmArgs& a, const int64_t* rows, int p, int nk,
                                            uint8_t* x_tile, float* xscale) {
    const int kb0 = p * kPhaseBlocks;
    const int blocks = min(kPhaseBlocks, nk - kb0);
    if (blocks <= 0) return;
    const int tid = static_cast<int>(threadIdx.x);
    for (int f = tid; f < blocks * kTileTokens * 32; f += kThreads) {
        const int u = f & 31, r = (f >> 5) % kTileTokens, i = f / (32 * kTileTokens);
        const int64_t row = rows[r];
        const uint8_t* src = a.x_codes + (row >= 0 ? row * a.x_stride + (kb0 + i) * 128 + 4 * u : 0);
        // Unit u = 8 q + 2 j + h (group q, step j, half h) is step j's unit 4 h + q: chunk u % 8, slot u / 8.
        cp_async4(x_tile + (kb0 + i) * kXBlockBytes + sw128_offset(r, u & 7) + 4 * (u >> 3), src, row >= 0 ? 4 : 0);
    }
    for (int f = tid; f < blocks * kTileTokens; f += kThreads) {
        const int i = f / kTileTokens, r = f % kTileTokens;
        const int64_t row = rows[r];
        const float* src = a.x_scales + (row >= 0 ? (kb0 + i) * a.x_rows_pad + row : 0);
        cp_async4(xscale + (kb0 + i) * kTileTokens + r, src, row >= 0 ? 4 : 0);
    }
}

// The SwiGLU epilogue across warpgroups: W3's (2, 3) hand u to W1's (0, 1), which run store_swiglu.
__device__ __forceinline__ void swiglu_epilogue(const ExpertGemmArgs& a, const TileInfo& t, int64_t n0,
                                                float (&acc)[kTileTokens / 2], int row_base, uint8_t* smem) {
    const int tid = static_cast<int>(threadIdx.x);
    auto* hand = reinterpret_cast<float*>(smem);
    __syncthreads();  // every wgmma has read the activation tile: the epilogue reuses its memory
    if (tid >= 256) {
#pragma unroll
        for (int i = 0; i < kTileTokens / 2; ++i) hand[i * 256 + tid - 256] = acc[i];
    }
    __syncthreads();
    if (tid >= 256) return;
    float u[kTileTokens / 2];
#pragma unroll
    for (int i = 0; i < kTileTokens / 2; ++i) u[i] = hand[i * 256 + tid];
    store_swiglu<kTileTokens>(a, t, n0, acc, u, row_base, smem + kHandOverBytes, tid, [] {
        asm volatile("bar.sync 1, 256;" ::: "memory");
    });
}

// Grid: (rows / 128 feature blocks, tiles); 256 MB threads.
template <int MB, int PREFETCH>
__global__ void __launch_bounds__(256 * MB, MB == 2 ? 1 : 2) expert_gemm_rs_kernel(ExpertGemmArgs a) {
    constexpr int kThreads = 256 * MB;
    pdl_begin();
    extern __shared__ uint8_t smem_raw[];
    // Rounded through an integer (generic accesses): align_shared_1024's shared-space accesses made the SwiGLU
    // launch spill 24 bytes at its 128 registers.
    uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
    TileInfo t;
    if (!load_tile(a, kTileTokens, static_cast<int>(blockIdx.y), t)) return;
    const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kExpertGemmFeatures;
    if (n0 >= a.rows) return;
    const int nk = static_cast<int>(a.k / 128);
    const RsLayout layout(nk);
    uint8_t* x_tile = smem;
    auto* xscale = reinterpret_cast<float*>(smem + layout.xscale);
    auto* token_rows = reinterpret_cast<int64_t*>(smem + layout.rows);
    auto* lut = reinterpret_cast<uint2*>(smem + layout.lut);
    build_lut(reinterpret_cast<uint8_t*>(lut));
    tile_rows(a, t, token_rows);

    const int tid = static_cast<int>(threadIdx.x), wg = tid / 128, lane = tid & 31, q = lane & 3;
    const int row_base = 64 * (wg & 1) + 16 * ((tid / 32) % 4);  // the warp's first fragment row in the block
    RsRows rows;
    {
        const bool w3 = wg >= 2;
        const uint8_t* data = w3 ? t.data3 : t.data1;
        const uint8_t* scales = w3 ? t.scales3 : t.scales1;
        int64_t f[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int64_t feature = n0 + row_base + lane / 4 + 8 * r;
            rows.valid[r] = feature < a.rows;
            f[r] = rows.valid[r] ? feature : a.rows - 1;
        }
        rows.data = data + f[0] * (a.k / 2) + 16 * q;
        rows.scales = scales + f[0] * t.scale_cols;
        rows.data_step = static_cast<uint32_t>((f[1] - f[0]) * (a.k / 2));
        rows.scale_step = static_cast<uint32_t>((f[1] - f[0]) * t.scale_cols);
    }
    // The first K blocks' weights in flight while the activations are staged.
    RsRaw raw[kDepth];
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
        if (d < nk) load_raw<PREFETCH>(rows, d, raw[d]);
    }
    __syncthreads();  // the tile's rows
    stage_phase<kThreads>(a, token_rows, 0, nk, x_tile, xscale);
    cp_async_commit();
    stage_phase<kThreads>(a, token_rows, 1, nk, x_tile, xscale);
    cp_async_commit();

    float acc[kTileTokens / 2], part[kTileTokens / 2];
#pragma unroll
    for (int i = 0; i < kTileTokens / 2; ++i) acc[i] = part[i] = 0.0f;
    int below = 0;
    for (int kb0 = 0; kb0 < nk; kb0 += kDepth) {
#pragma unroll
        for (int d = 0; d < kDepth; ++d) {
            const int kb = kb0 + d;
            if (kb >= nk) break;
            if (kb % kPhaseBlocks == 0) {
                // This phase landed (the next may be in flight); request the one after.
                cp_async_wait<1>();
                fence_proxy_async();
                __syncthreads();
                stage_phase<kThreads>(a, token_rows, kb / kPhaseBlocks + 2, nk, x_tile, xscale);
                cp_async_commit();
            }
            uint32_t frag[4][4];
            float row_scale[2];
            expand_block(raw[d], rows, q, lut, frag, row_scale, below);
            if (kb + kDepth < nk) load_raw<PREFETCH>(rows, kb + kDepth, raw[d]);
            fence_regs(part);
            wgmma_fence();
            const uint64_t desc = smem_desc_sw128(x_tile + kb * kXBlockBytes);
#pragma unroll
            for (int j = 0; j < 4; ++j) wgmma_m64n16k32_rs(part, frag[j], desc + 2 * j, j > 0 ? 1 : 0);
            wgmma_commit();
            wgmma_wait_all();
            fence_regs(part);
            hold_fragments(frag);
            promote<kTileTokens>(acc, part, row_scale[0], row_scale[1], xscale + kb * kTileTokens);
        }
    }
    cp_async_wait<0>();
    if (below > 0 && a.clamp_count != nullptr) atomicAdd(a.clamp_count, below);
    if constexpr (MB == 2) {
        swiglu_epilogue(a, t, n0, acc, row_base, smem);
    } else {
        store_plain<kTileTokens>(a, t, n0, acc, row_base);
    }
}

template <int MB, int PREFETCH>
void launch_typed(cudaStream_t stream, const ExpertGemmArgs& a, unsigned tiles, int shared) {
    static int configured = 0;  // host-side, the largest request so far of this instantiation
    if (shared > configured) {
        cudaFuncSetAttribute(expert_gemm_rs_kernel<MB, PREFETCH>, cudaFuncAttributeMaxDynamicSharedMemorySize, shared);
        configured = shared;
    }
    launch_kernel(expert_gemm_rs_kernel<MB, PREFETCH>, dim3(blocks_for(a.rows, kExpertGemmFeatures), tiles), 256 * MB,
                  shared, stream, a);
}

template <int MB>
void launch_prefetch(cudaStream_t stream, const ExpertGemmArgs& a, unsigned tiles) {
    const int shared = RsLayout(static_cast<int>(a.k / 128)).total;
    with_l2_prefetch<kTileTokens>(
        a.l2_prefetch, [&](auto bytes) { launch_typed<MB, decltype(bytes)::value>(stream, a, tiles, shared); });
}

}  // namespace

bool expert_gemm_rs_fits(const ExpertGemmArgs& a) {
    if (a.format != WeightFormat::kFp4Row || a.k % 128 != 0) return false;
    return a.tile_n == kTileTokens && a.register_weights && RsLayout(static_cast<int>(a.k / 128)).total <= kMaxShared;
}

void launch_expert_gemm_rs(cudaStream_t stream, const ExpertGemmArgs& a, unsigned tiles) {
    if (a.table_up != nullptr) {
        launch_prefetch<2>(stream, a, tiles);
    } else {
        launch_prefetch<1>(stream, a, tiles);
    }
}

}  // namespace dsv4::cuda
