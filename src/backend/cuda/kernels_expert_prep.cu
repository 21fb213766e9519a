// The operands of the TMA-fed expert GEMMs (kernels_expert_tma.h): FP4 experts expanded once a step to e4m3 copies
// with the staged kernel's own expansion (expand_fp4_groups: the same bytes and row scales its tiles hold), and the
// quantized activation rows gathered in the plan's slot order, so that every tile's operands are whole TMA boxes.
#include "backend/cuda/expert_gemm_tile.cuh"
#include "backend/cuda/kernels_expert_tma.h"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

using namespace expert_gemm;  // NOLINT(google-build-using-namespace): the staged kernel's expansion

constexpr int kExpandThreads = 256;
constexpr int kGatherThreads = 128;

// Block (row tile, expert): the tile's 128 MB rows, K block after K block, expanded into a swizzled shared tile as
// the staged kernel expands them (a thread: one row's 2 MB consecutive 32-code groups), then written out row-major
// (the TMA swizzles again as it loads) with the rows' scales. Experts without pairs this step are skipped.
template <int MB>
__global__ void __launch_bounds__(kExpandThreads) expert_expand_kernel(ExpertExpandArgs a) {
    pdl_begin();
    constexpr int kRows = 128 * MB, kGroups = 2 * MB;
    __shared__ __align__(16) uint8_t tile[kRows * 128];
    __shared__ float wscale[kRows];
    __shared__ uint2 lut[kLutRows];
    const int e = static_cast<int>(blockIdx.y);
    if (a.counts[e] == 0) return;  // the whole block: before any barrier
    build_lut(reinterpret_cast<uint8_t*>(lut));
    __syncthreads();
    const ExpertFp8Copy& o = a.out;
    const int f = static_cast<int>(threadIdx.x) * kGroups;
    const int tile_row = f / 4, group0 = f % 4;
    const int64_t feature = static_cast<int64_t>(blockIdx.x) * 128 + tile_row % 128;
    const WeightRef& w = MB == 2 && tile_row >= 128 ? a.table_up[e] : a.table[e];
    const bool valid = feature < w.rows;
    const uint8_t* data = static_cast<const uint8_t*>(w.data) + feature * (o.k / 2);
    const uint8_t* scales = w.scales + feature * w.scale_cols;
    const int nk = static_cast<int>(o.k / 128);
    const int64_t tile_index = e * o.row_tiles() + blockIdx.x;
    uint8_t* out_codes = o.codes + tile_index * kRows * o.k;
    float* out_scales = o.scales + tile_index * nk * kRows;
    for (int kb = 0; kb < nk; ++kb) {
        uint4 groups[kGroups] = {};
        uint32_t group_scales = 0;
        if (valid) {
#pragma unroll
            for (int i = 0; i < kGroups; ++i) {
                groups[i] = __ldg(reinterpret_cast<const uint4*>(data + kb * 64) + group0 + i);
            }
            group_scales = __ldg(reinterpret_cast<const uint32_t*>(scales + kb * 4));
        }
        expand_fp4_groups<kGroups>(tile_row, group0, groups, group_scales, valid, tile, wscale,
                                   reinterpret_cast<const uint2*>(lut), a.clamp_count);
        __syncthreads();
        for (int c = static_cast<int>(threadIdx.x); c < kRows * 8; c += kExpandThreads) {
            const int r = c / 8, chunk = c % 8;
            *reinterpret_cast<uint4*>(out_codes + r * o.k + kb * 128 + chunk * 16) =
                *reinterpret_cast<const uint4*>(tile + sw128_offset(r, chunk));
        }
        for (int r = static_cast<int>(threadIdx.x); r < kRows; r += kExpandThreads) {
            out_scales[kb * kRows + r] = wscale[r];
        }
        __syncthreads();  // the tile is rewritten by the next K block
    }
}

// Block i: output row i (codes, then its K blocks' scales) from x row row_ids[i] / x_div.
__global__ void __launch_bounds__(kGatherThreads) gather_fp8_rows_kernel(GatherRowsArgs a) {
    pdl_begin();
    const int64_t i = blockIdx.x;
    const int64_t src = a.row_ids[i] / a.x_div;
    const auto* from = reinterpret_cast<const uint4*>(a.x.codes + src * a.x.k);
    auto* to = reinterpret_cast<uint4*>(a.out.codes + i * a.out.k);
    for (int64_t c = threadIdx.x; c < a.x.k / 16; c += kGatherThreads) to[c] = from[c];
    for (int64_t kb = threadIdx.x; kb < a.x.k / kFp8ActBlock; kb += kGatherThreads) {
        a.out.scales[kb * a.out.rows_pad + i] = a.x.scales[kb * a.x.rows_pad + src];
    }
}

}  // namespace

void launch_expert_expand(cudaStream_t stream, const ExpertExpandArgs& a) {
    const dim3 grid(static_cast<unsigned>(a.out.row_tiles()), static_cast<unsigned>(a.experts));
    if (a.out.tile_rows == 256) {
        launch_kernel(expert_expand_kernel<2>, grid, dim3(kExpandThreads), 0, stream, a);
    } else {
        launch_kernel(expert_expand_kernel<1>, grid, dim3(kExpandThreads), 0, stream, a);
    }
}

void launch_gather_fp8_rows(cudaStream_t stream, const GatherRowsArgs& a) {
    if (a.out.rows == 0) return;
    launch_kernel(gather_fp8_rows_kernel, dim3(static_cast<unsigned>(a.out.rows)), dim3(kGatherThreads), 0, stream, a);
}

}  // namespace dsv4::cuda
