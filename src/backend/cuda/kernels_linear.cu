// Linear layers with weights decoded on the fly from their checkpoint form (FP8 + 128x128 UE8M0 scales, FP4 +
// per-32 scales, BF16, F32), float32 accumulation (double in reference numerics: cuda_common.cuh). One warp per
// output row, up to kVectors activation rows per pass (each weight element is decoded once per pass). This is the
// correctness path of exact and reference numerics; the tensor-core GEMMs of fast numerics live in their own files.
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quant_sim.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kVectors = 8;
constexpr int kWarpsPerBlock = 8;

// y[v * y_stride + r] = sum_j W[row0 + r, j] * x[v * x_stride + j] for rows r < count of group blockIdx.z:
// the group offsets the weight rows by group * count, x by group * group_x and y by group * count.
template <typename Acc>
__global__ void linear_kernel(WeightRef w, int64_t row0, int64_t count, const float* x, int64_t x_stride,
                              int64_t group_x, int64_t m, float* y, int64_t y_stride, bool round_out) {
    pdl_begin();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t r = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + warp;
    if (r >= count) return;
    const int64_t g = blockIdx.z;
    const int64_t row = row0 + g * count + r;
    const int64_t m0 = blockIdx.y * static_cast<int64_t>(kVectors);
    const int nv = static_cast<int>(min64(kVectors, m - m0));
    const float* xg = x + g * group_x + m0 * x_stride;
    Acc acc[kVectors] = {};
    for (int64_t j = lane; j < w.cols; j += 32) {
        const Acc wv = weight_at(w, row, j);
#pragma unroll
        for (int v = 0; v < kVectors; ++v) {
            if (v < nv) acc[v] += wv * xg[v * x_stride + j];
        }
    }
#pragma unroll
    for (int v = 0; v < kVectors; ++v) {
        const Acc s = warp_sum(acc[v]);
        if (lane == 0 && v < nv) y[(m0 + v) * y_stride + g * count + r] = store_acc(s, round_out);
    }
}

// Reference numerics: bf16 input, per-128-block FP8 quantize-dequantize (model-spec 4.4); one warp per row.
__global__ void act_quant_kernel(const float* x, float* out, int64_t rows, int64_t k, Fp8QuantDev quant) {
    pdl_begin();
    const int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    const int lane = threadIdx.x % 32;
    for (int64_t j = lane; j < k; j += 32) out[row * k + j] = to_bf16(x[row * k + j]);
    __syncwarp();
    warp_block_sim(out + row * k, static_cast<int>(k), 128, 0, false, quant);
}

}  // namespace

void launch_linear(cudaStream_t s, const WeightRef& w, int64_t row0, int64_t count, int groups, const float* x,
                   int64_t x_stride, int64_t group_x, int64_t m, float* y, int64_t y_stride, bool round_out, bool f64) {
    if (m == 0 || count == 0) return;
    const dim3 grid(blocks_for(count, kWarpsPerBlock), blocks_for(m, kVectors), static_cast<unsigned>(groups));
    if (f64) {
        launch_kernel(linear_kernel<double>, grid, kWarpsPerBlock * 32, 0, s, w, row0, count, x, x_stride, group_x, m,
                      y, y_stride, round_out);
    } else {
        launch_kernel(linear_kernel<float>, grid, kWarpsPerBlock * 32, 0, s, w, row0, count, x, x_stride, group_x, m, y,
                      y_stride, round_out);
    }
}

void launch_act_quant(cudaStream_t s, const float* x, float* out, int64_t rows, int64_t k, Fp8QuantDev quant) {
    if (rows > 0) launch_kernel(act_quant_kernel, blocks_for(rows, 4), 128, 0, s, x, out, rows, k, quant);
}

}  // namespace dsv4::cuda
