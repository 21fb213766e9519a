// The routed experts of a decode-sized step in two launches instead of five: the gate and up projections of each
// (token, expert) pair with the SwiGLU applied as they are summed, then the down projections of a token's k pairs with
// the routing-weighted combine (and the shared expert's output) summed as each output row is finished. A row's dot
// product is gemv_row.cuh's, and the SwiGLU and combine are cuda_common.cuh's, so the results are the bits of the
// unfused GEMV / SwiGLU / GEMV / combine sequence (ops test CudaOps.MoeFusedDecodeMatchesUnfused).
#include <type_traits>

#include "backend/cuda/gemv_row.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp per output row

// The pair's expert, or -1 (and the step's error flag) when its id is outside the table.
__device__ __forceinline__ int32_t checked_expert(const int32_t* ids, int64_t pair, int n_experts,
                                                  const StepMeta& meta) {
    const int32_t e = ids[pair];
    if (e >= 0 && e < n_experts) return e;
    if (threadIdx.x % 32 == 0) flag_error(meta, kErrorExpertId);
    return -1;
}

// Block (row block, pair): act[pair, r] = swiglu(W1[e] r . x, W3[e] r . x), x the pair's token row (staged in shared
// memory; both rows' loads in flight together).
template <int kFormat>
__global__ void __launch_bounds__(kRowsPerBlock * 32) moe_up_decode_kernel(MoeUpDecodeParams p, StepMeta meta) {
    pdl_begin();
    extern __shared__ float4 staged[];
    float* xs = reinterpret_cast<float*>(staged);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t pair = blockIdx.y;
    const int64_t r = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + warp;
    const int32_t e = p.ids[pair];
    if (e < 0 || e >= p.n_experts) {  // uniform over the block: no thread reaches the barrier below
        if (threadIdx.x == 0 && blockIdx.x == 0) flag_error(meta, kErrorExpertId);
        return;
    }
    RowRef<kFormat> rows[2];
    if (r < p.inter) {
        rows[0] = row_ref<kFormat>(p.w1[e], r, xs);
        rows[1] = row_ref<kFormat>(p.w3[e], r, xs);
        prefetch_row<kFormat>(rows[0], row_bytes<kFormat>(p.d));
        prefetch_row<kFormat>(rows[1], row_bytes<kFormat>(p.d));
    }
    stage_vector(p.x + (pair / p.k) * p.d, p.d, xs);
    __syncthreads();
    if (r >= p.inter) return;
    float acc[2] = {};
    rows_partials<kFormat, 2, true>(rows, static_cast<int>(p.d / kLoadElems<kFormat>), p.w1[e].fp8_dialect, acc);
    const float gs = warp_sum(acc[0]), us = warp_sum(acc[1]);
    if (lane == 0) p.act[pair * p.inter + r] = swiglu_acc<float>(gs, us, p.limit);
}

// Block (row block, token): y[t, r] = sum_j weight[t, j] * (W2[e_j] r . act[t * k + j]) + shared[t, r], j in order;
// two pairs' rows in flight at a time.
template <int kFormat>
__global__ void __launch_bounds__(kRowsPerBlock * 32) moe_down_decode_kernel(MoeDownDecodeParams p, StepMeta meta) {
    pdl_begin();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t t = blockIdx.y;
    const int64_t r = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + warp;
    if (r >= p.d) return;
    const int loads = static_cast<int>(p.inter / kLoadElems<kFormat>);
    float acc = 0.0f;
    for (int j0 = 0; j0 < p.k; j0 += 2) {
        RowRef<kFormat> rows[2];
        Fp8Dialect dialect = Fp8Dialect::kOcp;
        for (int i = 0; i < 2 && j0 + i < p.k; ++i) {
            const int64_t pair = t * p.k + j0 + i;
            const int32_t e = checked_expert(p.ids, pair, p.n_experts, meta);
            if (e < 0) continue;
            rows[i] = row_ref<kFormat>(p.w2[e], r, p.act + pair * p.inter);
            dialect = p.w2[e].fp8_dialect;
        }
        float part[2] = {};
        rows_partials<kFormat, 2, false>(rows, loads, dialect, part);
        for (int i = 0; i < 2 && j0 + i < p.k; ++i) {
            const float routed = warp_sum(part[i]);
            if (rows[i].data != nullptr) acc = combine_add(acc, routed, p.weights[t * p.k + j0 + i]);
        }
    }
    if (p.shared != nullptr) acc += p.shared[t * p.d + r];
    if (lane == 0) p.y[t * p.d + r] = acc;
}

template <int kFormat>
void launch_up(cudaStream_t s, const StepMeta& m, const MoeUpDecodeParams& p) {
    const dim3 grid(blocks_for(p.inter, kRowsPerBlock), static_cast<unsigned>(p.pairs));
    const size_t smem = static_cast<size_t>(p.d) * sizeof(float);
    launch_kernel(moe_up_decode_kernel<kFormat>, grid, kRowsPerBlock * 32, smem, s, p, m);
}

template <int kFormat>
void launch_down(cudaStream_t s, const StepMeta& m, const MoeDownDecodeParams& p) {
    const dim3 grid(blocks_for(p.d, kRowsPerBlock), static_cast<unsigned>(p.tokens));
    launch_kernel(moe_down_decode_kernel<kFormat>, grid, kRowsPerBlock * 32, 0, s, p, m);
}

// Calls f with the format as a compile-time constant (std::integral_constant<int, format>).
template <typename F>
void with_format(WeightFormat format, F&& f) {
    switch (format) {
        case WeightFormat::kFp4Row:
            return f(std::integral_constant<int, static_cast<int>(WeightFormat::kFp4Row)>{});
        case WeightFormat::kFp8Block:
            return f(std::integral_constant<int, static_cast<int>(WeightFormat::kFp8Block)>{});
        case WeightFormat::kBF16:
            return f(std::integral_constant<int, static_cast<int>(WeightFormat::kBF16)>{});
        case WeightFormat::kF32:
            return f(std::integral_constant<int, static_cast<int>(WeightFormat::kF32)>{});
    }
}

}  // namespace

void launch_moe_up_decode(cudaStream_t s, const StepMeta& m, const MoeUpDecodeParams& p) {
    if (p.pairs == 0) return;
    with_format(p.format, [&](auto format) { launch_up<decltype(format)::value>(s, m, p); });
}

void launch_moe_down_decode(cudaStream_t s, const StepMeta& m, const MoeDownDecodeParams& p) {
    if (p.tokens == 0) return;
    with_format(p.format, [&](auto format) { launch_down<decltype(format)::value>(s, m, p); });
}

}  // namespace dsv4::cuda
