// Single-vector decode GEMV with the weights streamed into shared memory by bulk copies. Each warp owns a run of
// consecutive weight rows, cut into tiles of whole rows (one contiguous copy each, plus one of their scales for FP4);
// its lane 0 keeps `stages` tiles in flight while the warp computes on the tile that has landed. The register GEMV
// (kernels_gemv.cu) holds each lane's loads in registers and waits for them before it can issue more, so a row group
// costs a full memory round trip: 1.2-1.5 TB/s on the Flash shapes (performance-log.md). A row's arithmetic is that
// GEMV's (gemv_row.cuh: the same loads per lane in the same order, the same sums), so the two give the same bits and
// a sequence's logits do not depend on which one ran.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/gemv_row.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxTileRows = 8;
constexpr int64_t kMaxTileBytes = 16384;
constexpr int64_t kMaxSharedBytes = 200 * 1024;  // of the 227 KB a block may opt in to

// Where a launch's pieces sit in shared memory and how a tile is cut (host-computed, the same for every block).
struct StreamLayout {
    int64_t row_bytes = 0;
    int64_t scale_row_bytes = 0;  // FP4: the per-32 scales of a row; 0 otherwise
    int64_t tile_bytes = 0;       // tile rows x row bytes
    int64_t tile_scale_bytes = 0;
    int passes = 0;  // warp-wide loads per row
    int stages = 0;
    int64_t ring_offset = 0, scale_offset = 0, cache_offset = 0, bar_offset = 0, shared_bytes = 0;
};

template <int kFormat>
constexpr int64_t kPassBytes = 32 * 4 * kLoadWords<kFormat>;

// Whether a weight can be streamed with kRows-row tiles: 16-byte aligned data (and FP4 scales), the checkpoint's
// block shapes, FP8 tiles inside one 128-row scale block and FP8 codes of the kernel's dialect. Checked per block in
// expert mode (each expert its own pointers): a weight that fails is computed straight from global memory with the same
// arithmetic.
template <int kFormat, int kRows, Fp8Dialect kDialect>
__host__ __device__ bool streamable(const WeightRef& w) {
    if ((reinterpret_cast<uintptr_t>(w.data) & 15) != 0) return false;
    if constexpr (is_fp8(kFormat)) {
        return w.block_cols == 128 && w.block_rows % kRows == 0 && w.fp8_dialect == kDialect;
    }
    if constexpr (is_fp4(kFormat)) {
        return w.block_cols == 32 && (reinterpret_cast<uintptr_t>(w.scales) & 15) == 0 && w.scale_cols % 16 == 0;
    }
    return true;
}

// The weight, output and first row of flattened tile t of a block's instance: the instance's one weight, or in
// multi-weight mode the weight whose tiles contain t.
struct TileSource {
    WeightRef w;
    int64_t row_base = 0;  // the weight's first row of the instance (grouped mode)
    int64_t rows = 0;      // rows of the instance in the weight
    int64_t r0 = 0;        // the tile's first row, from row_base
    float* y = nullptr;    // the instance's outputs (y[r0 + i])
    int which = 0;         // the weight's index (multi-weight mode)
};

template <int kRows>
__device__ __forceinline__ TileSource tile_source(const GemvStreamParams& p, const TileSource& single, int64_t t) {
    if (p.n_multi == 0) {
        TileSource src = single;
        src.r0 = t * kRows;
        return src;
    }
    int j = 0;
    while (j + 1 < p.n_multi && t >= p.multi_tile_end[j]) ++j;
    TileSource src;
    src.w = p.multi[j];
    src.rows = src.w.rows;
    src.r0 = (t - (j == 0 ? 0 : p.multi_tile_end[j - 1])) * kRows;
    src.y = p.multi_y[j];
    src.which = j;
    return src;
}

// Lane 0: the tile of `src` into ring slot `slot` (its rows, and for FP4 their scales, on the slot's barrier).
template <int kFormat, int kRows>
__device__ __forceinline__ void issue_tile(const StreamLayout& L, const TileSource& src, int slot, uint8_t* ring,
                                           uint8_t* scale_ring, uint64_t* bar) {
    const int64_t first = src.row_base + src.r0;
    const auto n = static_cast<uint32_t>(std::min<int64_t>(kRows, src.rows - src.r0));
    const auto* data = static_cast<const uint8_t*>(src.w.data) + first * L.row_bytes;
    uint8_t* dst = ring + slot * L.tile_bytes;
    if constexpr (is_fp4(kFormat)) {
        bulk_copy_pair_announced(dst, data, n * static_cast<uint32_t>(L.row_bytes),
                                 scale_ring + slot * L.tile_scale_bytes, src.w.scales + first * L.scale_row_bytes,
                                 n * static_cast<uint32_t>(L.scale_row_bytes), bar);
    } else {
        bulk_copy_announced(dst, data, n * static_cast<uint32_t>(L.row_bytes), bar);
    }
}

// The warp's copy of an FP8 weight's scale row for the 128-row block `block` (one float per 128 columns), refreshed
// only when a tile enters another block (a warp's run of tiles mostly stays in one): a scale is then a shared-memory
// broadcast, not a global load at the head of every tile.
__device__ __forceinline__ void cache_scale_row(const WeightRef& w, int64_t block, int passes, float* cache) {
    __syncwarp();
    for (int j = threadIdx.x % 32; j < passes; j += 32) cache[j] = decode_ue8m0(w.scales[block * w.scale_cols + j]);
    __syncwarp();
}

// FP8 tile: every row of the tile shares one 128-row scale block, and a warp-wide load is one 128-column block, so
// pass u's scale is one value for the whole warp (scales: the cached scale row).
template <int kRows, Fp8Dialect kDialect>
__device__ __forceinline__ void fp8_tile_partials(const uint8_t* tile, const StreamLayout& L, const float* scales,
                                                  int valid, const float* xs, float* acc) {
    constexpr int kFormat = static_cast<int>(WeightFormat::kFp8Block);
    const int lane = threadIdx.x % 32;
    const auto* words = reinterpret_cast<const uint32_t*>(tile);
    const auto* x4 = reinterpret_cast<const float4*>(xs);
    const int64_t row_words = L.row_bytes / 4;
#pragma unroll 2
    for (int u = 0; u < L.passes; ++u) {
        const int c = u * 32 + lane;
        const float scale = scales[u];
        const float4 xx = x4[c];
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
            if (i >= valid) break;
            float vals[4];
            Load<kFormat> raw;
            raw.w[0] = words[i * row_words + c];
            decode_load<kFormat>(raw, kDialect, vals);
            acc[i] = add_scaled(acc[i], word_dot<4>(vals, &xx), scale);
        }
    }
}

// FP4 and BF16 tiles: eight elements per lane load, two float4 of activations shared by the tile's rows; FP4 scales
// (one per 32 elements: every 4 loads) from the tile's copied scale rows, BF16 unscaled.
template <int kFormat, int kRows>
__device__ __forceinline__ void wide_tile_partials(const uint8_t* tile, const uint8_t* tile_scales,
                                                   const StreamLayout& L, int valid, const float* xs, float* acc) {
    const int lane = threadIdx.x % 32;
    const auto* x4 = reinterpret_cast<const float4*>(xs);
#pragma unroll 2
    for (int u = 0; u < L.passes; ++u) {
        const int c = u * 32 + lane;
        const float4 xx[2] = {x4[2 * c], x4[2 * c + 1]};
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
            if (i >= valid) break;
            Load<kFormat> raw;
            const uint8_t* row = tile + i * L.row_bytes;
            if constexpr (is_fp4(kFormat)) {
                raw.w[0] = reinterpret_cast<const uint32_t*>(row)[c];
            } else {
                const uint4 v = reinterpret_cast<const uint4*>(row)[c];
                raw.w[0] = v.x;
                raw.w[1] = v.y;
                raw.w[2] = v.z;
                raw.w[3] = v.w;
            }
            float vals[8];
            decode_load<kFormat>(raw, Fp8Dialect::kOcp, vals);
            const float scale = is_fp4(kFormat) ? decode_ue8m0(tile_scales[i * L.scale_row_bytes + (c >> 2)]) : 1.0f;
            acc[i] = add_scaled(acc[i], word_dot<8>(vals, xx), scale);
        }
    }
}

// The rows [r_begin, r_end) computed straight from global memory (a weight streamable() refuses), one row at a time
// with the register GEMV's arithmetic.
template <int kFormat>
__device__ void direct_rows(const WeightRef& w, int64_t row_base, int64_t r_begin, int64_t r_end, const float* xs,
                            float* y, bool round_out) {  // y: the instance's outputs
    const int loads = static_cast<int>(w.cols / kLoadElems<kFormat>);
    for (int64_t r = r_begin; r < r_end; ++r) {
        RowRef<kFormat> row[1] = {row_ref<kFormat>(w, row_base + r, xs)};
        float acc[1] = {0.0f};
        rows_partials<kFormat, 1, true>(row, loads, w.fp8_dialect, acc);
        const float v = warp_sum(acc[0]);
        if (threadIdx.x % 32 == 0) y[r] = round_out ? to_bf16(v) : v;
    }
}

// Grid: x = blocks sharing an instance's rows, y = instance (a group of rows with its own vector, or a (token,
// expert) pair; one in multi-weight mode). Warp w of the instance's W warps owns tiles [T w / W, T (w + 1) / W).
template <int kFormat, int kRows, Fp8Dialect kDialect>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_stream_kernel(const __grid_constant__ GemvStreamParams p, const StreamLayout L) {
    extern __shared__ __align__(128) uint8_t smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t instance = blockIdx.y;
    TileSource single;
    single.w = p.n_multi > 0 ? p.multi[0] : p.w;
    single.row_base = instance * p.count;
    single.rows = p.count;
    single.y = p.y + instance * p.y_stride;
    // A plain weight's first tiles are requested before the wait for the previous kernel (pdl.cuh): weights are never
    // written by a step's kernels. An expert's id is the router's output: its whole kernel waits first.
    if (p.table != nullptr) {
        pdl_begin();
        const int32_t e = p.ids[instance];
        if (e < 0 || e >= p.n_experts) {  // uniform over the block: no thread reaches the barrier below
            if (threadIdx.x == 0 && blockIdx.x == 0) flag_error(p.meta, kErrorExpertId);
            return;
        }
        single.w = p.table[e];
        single.row_base = 0;
        single.rows = single.w.rows;
    }
    float* xs = reinterpret_cast<float*>(smem);
    uint8_t* ring = smem + L.ring_offset + warp * L.stages * L.tile_bytes;
    uint8_t* scale_ring = smem + L.scale_offset + warp * L.stages * L.tile_scale_bytes;
    float* scale_cache = reinterpret_cast<float*>(smem + L.cache_offset) + warp * L.passes;  // FP8
    auto* bars = reinterpret_cast<uint64_t*>(smem + L.bar_offset) + warp * L.stages;
    const int64_t tiles = p.n_multi > 0 ? p.multi_tile_end[p.n_multi - 1] : (single.rows + kRows - 1) / kRows;
    const int64_t warps = int64_t{gridDim.x} * kWarps, my_warp = int64_t{blockIdx.x} * kWarps + warp;
    const int64_t t0 = tiles * my_warp / warps, my_tiles = tiles * (my_warp + 1) / warps - t0;
    // The launcher checked plain and multi-weight weights; an expert that fails is computed from global memory.
    const bool streamed = streamable<kFormat, kRows, kDialect>(single.w);
    if (streamed && lane == 0) {  // the first tiles start moving before the vector is staged
        for (int s = 0; s < L.stages; ++s) mbarrier_init(bars + s);
        fence_barrier_init();
        for (int k = 0; k < std::min<int64_t>(L.stages, my_tiles); ++k) {
            issue_tile<kFormat, kRows>(L, tile_source<kRows>(p, single, t0 + k), k, ring, scale_ring, bars + k);
        }
    }
    if (p.table == nullptr) pdl_begin();
    stage_vector(p.x + (instance / p.x_div) * p.x_stride, single.w.cols, xs);
    __syncthreads();
    if (!streamed) {
        direct_rows<kFormat>(single.w, single.row_base, t0 * kRows, std::min(single.rows, (t0 + my_tiles) * kRows), xs,
                             single.y, p.round_out);
        return;
    }
    int64_t cached_block = -1;
    for (int64_t k = 0; k < my_tiles; ++k) {
        const int slot = static_cast<int>(k % L.stages);
        const TileSource src = tile_source<kRows>(p, single, t0 + k);
        if constexpr (is_fp8(kFormat)) {  // before the wait: the scale row's load overlaps the tile's copy
            const int64_t block = (src.row_base + src.r0) / src.w.block_rows;
            const int64_t key = block * kMaxStreamWeights + src.which;
            if (key != cached_block) cache_scale_row(src.w, block, L.passes, scale_cache);
            cached_block = key;
        }
        mbarrier_wait(bars + slot, static_cast<uint32_t>((k / L.stages) & 1));
        const int valid = static_cast<int>(std::min<int64_t>(kRows, src.rows - src.r0));
        float acc[kRows] = {};
        if constexpr (is_fp8(kFormat)) {
            fp8_tile_partials<kRows, kDialect>(ring + slot * L.tile_bytes, L, scale_cache, valid, xs, acc);
        } else {
            wide_tile_partials<kFormat, kRows>(ring + slot * L.tile_bytes, scale_ring + slot * L.tile_scale_bytes, L,
                                               valid, xs, acc);
        }
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
            const float v = warp_sum(acc[i]);
            if (lane == 0 && i < valid) src.y[src.r0 + i] = p.round_out ? to_bf16(v) : v;
        }
        __syncwarp();  // every lane is done with the slot before it is refilled
        if (lane == 0 && k + L.stages < my_tiles) {
            fence_async_shared();
            issue_tile<kFormat, kRows>(L, tile_source<kRows>(p, single, t0 + k + L.stages), slot, ring, scale_ring,
                                       bars + slot);
        }
    }
}

int64_t round_up(int64_t v, int64_t to) {
    return (v + to - 1) / to * to;
}

// The tile rows for a row of `row_bytes`: the largest power of two <= kMaxTileRows whose tile fits the target
// (at least one row).
int tile_rows_for(int64_t row_bytes, int64_t target) {
    int r = 1;
    while (r < kMaxTileRows && 2 * r * row_bytes <= target) r *= 2;
    return r;
}

// The layout of a launch, or shared_bytes = 0 when the shape cannot be streamed.
template <int kFormat>
StreamLayout plan_layout(const GemvStreamConfig& c, int64_t cols, int tile_rows) {
    StreamLayout L;
    L.row_bytes = row_bytes<kFormat>(cols);
    if (L.row_bytes % kPassBytes<kFormat> != 0 || (is_fp4(kFormat) && cols % 512 != 0)) return L;
    L.passes = static_cast<int>(L.row_bytes / kPassBytes<kFormat>);
    L.scale_row_bytes = is_fp4(kFormat) ? cols / 32 : 0;
    L.tile_bytes = tile_rows * L.row_bytes;
    L.tile_scale_bytes = tile_rows * L.scale_row_bytes;
    if (L.tile_bytes > kMaxTileBytes) return L;
    L.ring_offset = round_up(cols * 4, 128);
    for (int stages = std::max(c.stages, 1); stages >= 1; --stages) {
        L.stages = stages;
        L.scale_offset = L.ring_offset + kWarps * stages * L.tile_bytes;
        L.cache_offset = round_up(L.scale_offset + kWarps * stages * L.tile_scale_bytes, 16);
        L.bar_offset = round_up(L.cache_offset + (is_fp8(kFormat) ? kWarps * L.passes * 4 : 0), 16);
        const int64_t total = L.bar_offset + kWarps * stages * 8;
        if (total <= kMaxSharedBytes && (stages >= 2 || c.stages < 2)) {
            L.shared_bytes = total;
            return L;
        }
    }
    L.shared_bytes = 0;
    return L;
}

template <typename Kernel>
void launch_streamed(cudaStream_t s, Kernel kernel, int tile_rows, const GemvStreamParams& p, const StreamLayout& L) {
    // Opting in to the shared memory every launch is a host-side attribute write (legal during graph capture).
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(L.shared_bytes));
    int per_sm = 1;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarps * 32, static_cast<size_t>(L.shared_bytes));
    const int64_t rows = p.table != nullptr ? p.w.rows : p.count;
    const int64_t tiles = p.n_multi > 0 ? p.multi_tile_end[p.n_multi - 1] : (rows + tile_rows - 1) / tile_rows;
    const int64_t target = int64_t{device_sms()} * std::max(per_sm, 1);
    const int64_t blocks =
        std::clamp<int64_t>((target + p.instances - 1) / p.instances, 1, std::max<int64_t>(1, tiles / kWarps));
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(p.instances));
    launch_kernel(kernel, grid, kWarps * 32, static_cast<size_t>(L.shared_bytes), s, p, L);
}

// Whether every plain weight of the launch (the one weight, or each of the multi-weight list) can be streamed with
// kRows-row tiles of the kernel's dialect. Expert weights are checked per block.
template <int kFormat, int kRows, Fp8Dialect kDialect>
bool plain_weights_streamable(const GemvStreamParams& p) {
    if (p.table != nullptr) return true;
    if (p.n_multi == 0) return streamable<kFormat, kRows, kDialect>(p.w);
    for (int j = 0; j < p.n_multi; ++j) {
        if (!streamable<kFormat, kRows, kDialect>(p.multi[j])) return false;
    }
    return true;
}

// Launches the kRows-row kernel of the weight's dialect; false (nothing launched) when a plain weight cannot be
// streamed.
template <int kFormat, int kRows>
bool launch_rows(cudaStream_t s, GemvStreamParams p, const StreamLayout& L) {
    int64_t end = 0;
    for (int j = 0; j < p.n_multi; ++j) p.multi_tile_end[j] = end += (p.multi[j].rows + kRows - 1) / kRows;
    if constexpr (is_fp8(kFormat)) {
        if (p.w.fp8_dialect == Fp8Dialect::kFnuz) {
            if (!plain_weights_streamable<kFormat, kRows, Fp8Dialect::kFnuz>(p)) return false;
            launch_streamed(s, gemv_stream_kernel<kFormat, kRows, Fp8Dialect::kFnuz>, kRows, p, L);
            return true;
        }
    }
    if (!plain_weights_streamable<kFormat, kRows, Fp8Dialect::kOcp>(p)) return false;
    launch_streamed(s, gemv_stream_kernel<kFormat, kRows, Fp8Dialect::kOcp>, kRows, p, L);
    return true;
}

template <int kFormat>
bool launch_format(cudaStream_t s, const GemvStreamConfig& c, const GemvStreamParams& p) {
    const int tile_rows = tile_rows_for(row_bytes<kFormat>(p.w.cols), c.tile_bytes);
    const StreamLayout L = plan_layout<kFormat>(c, p.w.cols, tile_rows);
    if (L.shared_bytes == 0) return false;
    switch (tile_rows) {
        case 8:
            return launch_rows<kFormat, 8>(s, p, L);
        case 4:
            return launch_rows<kFormat, 4>(s, p, L);
        case 2:
            return launch_rows<kFormat, 2>(s, p, L);
        default:
            return launch_rows<kFormat, 1>(s, p, L);
    }
}

// A multi-weight list: one format, dialect and width (the vector's), at most kMaxStreamWeights, on one instance.
bool multi_weights_uniform(const GemvStreamParams& p) {
    if (p.n_multi < 1 || p.n_multi > kMaxStreamWeights || p.instances != 1 || p.table != nullptr) return false;
    for (int j = 0; j < p.n_multi; ++j) {
        const WeightRef& w = p.multi[j];
        if (w.format != p.w.format || w.cols != p.w.cols || w.fp8_dialect != p.w.fp8_dialect) return false;
    }
    return true;
}

}  // namespace

bool launch_gemv_stream(cudaStream_t s, const GemvStreamConfig& c, GemvStreamParams p) {
    if (p.n_multi > 0) {
        p.w = p.multi[0];
        if (!multi_weights_uniform(p)) return false;
    }
    if (!c.enabled || p.w.cols > INT32_MAX || p.w.cols % 4 != 0) return false;
    switch (p.w.format) {
        case WeightFormat::kFp8Block:
            return launch_format<static_cast<int>(WeightFormat::kFp8Block)>(s, c, p);
        case WeightFormat::kFp4Row:
            return launch_format<static_cast<int>(WeightFormat::kFp4Row)>(s, c, p);
        case WeightFormat::kBF16:
            return launch_format<static_cast<int>(WeightFormat::kBF16)>(s, c, p);
        case WeightFormat::kF32:
            return false;
    }
    return false;
}

}  // namespace dsv4::cuda
