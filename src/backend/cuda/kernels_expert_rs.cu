// Grouped (routed-expert) GEMM of FP4 weights at decode tile sizes (16 tokens) on FP8 wgmma with the weights in
// registers (kernels_fp8.h: ExpertKernel::kRegisterWeights). The staged kernel (kernels_expert_fp8.cu) expands every
// K block of weights into shared memory and meets at a barrier before the tensor cores read it; at decode sizes that
// chain (load, expand, barrier, wgmma, promote) is its time (ncu: a quarter occupancy, no eligible warp 63% of cycles;
// performance-log.md 2026-12-06). Here each thread expands its own two rows straight into wgmma's A fragment: no
// weight staging, no barrier a K block, and each thread's FP4 loads run kDepth K blocks ahead in registers. Only the
// tile's activations sit in shared memory, all of K, staged once in phases of kPhaseBlocks K blocks.
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

constexpr int kTileTokens = 16;
constexpr int kDepth = 4;                        // K blocks of FP4 loads in flight a thread
constexpr int kPhaseBlocks = 8;                  // K blocks of activations staged a phase
constexpr int kXBlockBytes = kTileTokens * 128;  // one K block of the activation tile
constexpr int kMaxShared = 227 * 1024;           // the opt-in limit of a block on sm_90
// Epilogue (SwiGLU), over the activation tile once every wgmma has read it: u handed over ([8][256] floats), then
// store_swiglu's scratch.
constexpr int kHandOverBytes = 8 * 256 * 4;
constexpr int kEpilogueBytes = kHandOverBytes + 8 * kTileTokens * 4 + kTileTokens * 4 + kTileTokens * 128;

// Shared memory of a launch over nk K blocks (byte offsets from the 1024-aligned base).
struct RsLayout {
    int xscale = 0;  // [nk][16] token scales; the activation tile [nk][16][128] (swizzled, permuted) starts at 0
    int lut = 0;
    int total = 0;  // bytes to request, with the alignment slack
    __host__ __device__ explicit RsLayout(int nk) {
        const int tile = nk * kXBlockBytes, base = tile > kEpilogueBytes ? tile : kEpilogueBytes;
        xscale = (base + 15) / 16 * 16;
        lut = xscale + nk * kTileTokens * 4;
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
    const uint8_t* data[2] = {};
    const uint8_t* scales[2] = {};
    bool valid[2] = {};  // a row past the weight reads the last row; its sums are never stored nor its clamps counted
};

template <int PREFETCH>
__device__ __forceinline__ void load_raw(const RsRows& r, int kb, RsRaw& raw) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const uint4 v = load_u4<PREFETCH>(r.data[i] + kb * 64);
        raw.w[i][0] = v.x;
        raw.w[i][1] = v.y;
        raw.w[i][2] = v.z;
        raw.w[i][3] = v.w;
        raw.scales[i] = load_u32<PREFETCH>(r.scales[i] + kb * 4);
    }
}

// 2^(e - 133) as the staged kernel writes it (ldexpf), from the bits where that is a normal float.
__device__ __forceinline__ float row_scale_of(int emax) {
    return emax >= 7 ? __int_as_float((emax - 6) << 23) : ldexpf(1.0f, emax - 6 - 127);
}

// A row's largest scale byte of the K block and its scale 2^(emax - 133) (NaN when a byte is 0xFF, i.e. when emax
// is).
__device__ __forceinline__ int row_emax(uint32_t scales, float& row_scale) {
    uint32_t m = __vmaxu4(scales, scales >> 16);
    m = __vmaxu4(m, m >> 8);
    const int emax = static_cast<int>(m & 0xffu);
    row_scale = emax == 0xff ? __uint_as_float(0x7fc00000u) : row_scale_of(emax);
    return emax;
}

// The byte table of group i (offset e_i - emax + 6; expand_fp4_groups' rules); `count`: an offset below -8 is a clamp.
__device__ __forceinline__ uint2 group_table(uint32_t scales, int i, int emax, bool count, const uint2* lut,
                                             int& below) {
    const int offset = static_cast<int>((scales >> (8 * i)) & 0xffu) - emax + 6;
    below += count && offset < -8;
    return lut[max(offset, kLutMin) - kLutMin];
}

// The K block's A fragments of wgmma steps 0..3 (a[j]: rows g, g + 8, the A layout of wgmma_m64n16k32_rs) and the
// rows' scales, from the thread's raw loads: word j of its group q feeds step j, all through group q's byte table.
__device__ __forceinline__ void expand_block(const RsRaw& raw, const RsRows& rows, int q, const uint2* lut,
                                             uint32_t (&a)[4][4], float (&row_scale)[2], int& below) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int emax = row_emax(raw.scales[r], row_scale[r]);
        const uint2 table = group_table(raw.scales[r], q, emax, rows.valid[r], lut, below);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint2 e = expand_e2m1_word(raw.w[r][j], table.x, table.y);
            a[j][r] = e.x;
            a[j][2 + r] = e.y;
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

// acc += part * row scale * token scale (promote()'s arithmetic, the row scales from registers).
__device__ __forceinline__ void promote_rows(float (&acc)[8], const float (&part)[8], const float (&row_scale)[2],
                                             const float* xscale) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        const float2 xs = *reinterpret_cast<const float2*>(xscale + 8 * j + 2 * (lane & 3));
        acc[4 * j + 0] = fmaf(part[4 * j + 0] * row_scale[0], xs.x, acc[4 * j + 0]);
        acc[4 * j + 1] = fmaf(part[4 * j + 1] * row_scale[0], xs.y, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(part[4 * j + 2] * row_scale[1], xs.x, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(part[4 * j + 3] * row_scale[1], xs.y, acc[4 * j + 3]);
    }
}

// The tokens whose activations this thread stages: its 4-byte units belong to token (thread / 32) % 16 (x[0]) and,
// with 256 threads, also to that token + 8 (x[1]); -1: an absent token, zero-filled.
struct StagingRows {
    int64_t x[2] = {-1, -1};
    int64_t scale = -1;  // the token-scale row of token thread % 16
};

// Phase p's activations (K blocks 8 p .. 8 p + 7) and token scales by cp.async, in the permuted K order.
template <int kThreads>
__device__ __forceinline__ void stage_phase(const ExpertGemmArgs& a, const StagingRows& s, int p, int nk,
                                            uint8_t* x_tile, float* xscale) {
    const int kb0 = p * kPhaseBlocks;
    const int blocks = min(kPhaseBlocks, nk - kb0);
    if (blocks <= 0) return;
    const int tid = static_cast<int>(threadIdx.x);
    for (int f = tid; f < blocks * kTileTokens * 32; f += kThreads) {
        const int u = f & 31, r = (f >> 5) & 15, kb = kb0 + (f >> 9);
        const int64_t row = r == ((tid >> 5) & 15) ? s.x[0] : s.x[1];
        const uint8_t* src = a.x_codes + (row >= 0 ? row * a.x_stride + kb * 128 + 4 * u : 0);
        // Unit u = 8 q + 2 j + h (group q, step j, half h) is step j's unit 4 h + q: chunk u % 8, slot u / 8.
        cp_async4(x_tile + kb * kXBlockBytes + sw128_offset(r, u & 7) + 4 * (u >> 3), src, row >= 0 ? 4 : 0);
    }
    if (tid < blocks * kTileTokens) {
        const int kb = kb0 + tid / kTileTokens;
        const float* src = a.x_scales + (s.scale >= 0 ? kb * a.x_rows_pad + s.scale : 0);
        cp_async4(xscale + kb * kTileTokens + tid % kTileTokens, src, s.scale >= 0 ? 4 : 0);
    }
}

// The SwiGLU epilogue across warpgroups: W3's (2, 3) hand u to W1's (0, 1), which run store_swiglu.
__device__ __forceinline__ void swiglu_epilogue(const ExpertGemmArgs& a, const TileInfo& t, int64_t n0, float (&acc)[8],
                                                int row_base, uint8_t* smem) {
    const int tid = static_cast<int>(threadIdx.x);
    auto* hand = reinterpret_cast<float*>(smem);
    __syncthreads();  // every wgmma has read the activation tile: the epilogue reuses its memory
    if (tid >= 256) {
#pragma unroll
        for (int i = 0; i < 8; ++i) hand[i * 256 + tid - 256] = acc[i];
    }
    __syncthreads();
    if (tid >= 256) return;
    float u[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) u[i] = hand[i * 256 + tid];
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
    uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
    TileInfo t;
    if (!load_tile(a, kTileTokens, static_cast<int>(blockIdx.y), t)) return;
    const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kExpertGemmFeatures;
    if (n0 >= a.rows) return;
    const int nk = static_cast<int>(a.k / 128);
    const RsLayout layout(nk);
    uint8_t* x_tile = smem;
    auto* xscale = reinterpret_cast<float*>(smem + layout.xscale);
    auto* lut = reinterpret_cast<uint2*>(smem + layout.lut);
    build_lut(reinterpret_cast<uint8_t*>(lut));

    const int tid = static_cast<int>(threadIdx.x), wg = tid / 128, lane = tid & 31, q = lane & 3;
    const int row_base = 64 * (wg & 1) + 16 * ((tid / 32) % 4);  // the warp's first fragment row in the block
    RsRows rows;
    {
        const bool w3 = wg >= 2;
        const uint8_t* data = w3 ? t.data3 : t.data1;
        const uint8_t* scales = w3 ? t.scales3 : t.scales1;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int64_t feature = n0 + row_base + lane / 4 + 8 * r;
            rows.valid[r] = feature < a.rows;
            const int64_t f = rows.valid[r] ? feature : a.rows - 1;
            rows.data[r] = data + f * (a.k / 2) + 16 * q;
            rows.scales[r] = scales + f * t.scale_cols;
        }
    }
    // The first K blocks' weights in flight while the activations are staged.
    RsRaw raw[kDepth];
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
        if (d < nk) load_raw<PREFETCH>(rows, d, raw[d]);
    }
    StagingRows staging;
    for (int i = 0; i < 2; ++i) {
        const int r = ((tid >> 5) & 15) ^ (8 * i);
        staging.x[i] = r < t.ntok ? slot_row(a, t, r) / a.x_div : -1;
    }
    staging.scale = (tid & 15) < t.ntok ? slot_row(a, t, tid & 15) / a.x_div : -1;
    stage_phase<kThreads>(a, staging, 0, nk, x_tile, xscale);
    cp_async_commit();
    stage_phase<kThreads>(a, staging, 1, nk, x_tile, xscale);
    cp_async_commit();

    float acc[8], part[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = part[i] = 0.0f;
    int below = 0;
    for (int kb0 = 0; kb0 < nk; kb0 += kDepth) {
#pragma unroll
        for (int d = 0; d < kDepth; ++d) {
            const int kb = kb0 + d;
            if (kb >= nk) break;
            if (kb % kPhaseBlocks == 0) {  // this phase landed (the next may be in flight); request the one after
                cp_async_wait<1>();
                fence_proxy_async();
                __syncthreads();
                stage_phase<kThreads>(a, staging, kb / kPhaseBlocks + 2, nk, x_tile, xscale);
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
            promote_rows(acc, part, row_scale, xscale + kb * kTileTokens);
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
void launch_prefetch(cudaStream_t stream, const ExpertGemmArgs& a, unsigned tiles, int shared) {
    if (a.l2_prefetch == 256) return launch_typed<MB, 256>(stream, a, tiles, shared);
    if (a.l2_prefetch == 128) return launch_typed<MB, 128>(stream, a, tiles, shared);
    launch_typed<MB, 0>(stream, a, tiles, shared);
}

}  // namespace

bool expert_gemm_rs_fits(const ExpertGemmArgs& a) {
    return a.format == WeightFormat::kFp4Row && a.tile_n == kTileTokens && a.k % 128 == 0 &&
           RsLayout(static_cast<int>(a.k / 128)).total <= kMaxShared;
}

void launch_expert_gemm_rs(cudaStream_t stream, const ExpertGemmArgs& a, unsigned tiles) {
    const int shared = RsLayout(static_cast<int>(a.k / 128)).total;
    if (a.table_up != nullptr) {
        launch_prefetch<2>(stream, a, tiles, shared);
    } else {
        launch_prefetch<1>(stream, a, tiles, shared);
    }
}

}  // namespace dsv4::cuda
