// Raw mHC mixes of every token: raw[t][r] = fn[r] . x[t] over the flattened hc streams (width hc * d, e.g. 16384)
// for the few mix rows (hc * (2 + hc) = 24, or hc for the head). Split over the reduction in fixed 1024-element
// chunks so that a step has many blocks whatever its token count (a plain GEMV has one block per 8 rows: 3 blocks),
// then the chunks are summed in order. The chunking depends only on the width, never on the batch: a token's mixes
// are the same alone or batched.
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kChunk = 1024;  // reduction elements per block
constexpr int kWarps = 8;

// Grid: tokens x chunks blocks (token-major). Warp w computes rows w, w + 8, ... of this chunk; each lane 32 elements
// (8 float4).
__global__ void mixes_partial_kernel(const float* x, int64_t width, const float* fn, int n_mix, float* partial) {
    pdl_begin();
    const int chunks = static_cast<int>((width + kChunk - 1) / kChunk);
    const int64_t t = blockIdx.x / chunks;
    const int chunk = static_cast<int>(blockIdx.x % chunks);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t k0 = static_cast<int64_t>(chunk) * kChunk;
    const int64_t len = min64(kChunk, width - k0);
    const auto* xv = reinterpret_cast<const float4*>(x + t * width + k0);
    float4 xr[kChunk / 128];
#pragma unroll
    for (int u = 0; u < kChunk / 128; ++u) {
        const int64_t i = lane + 32 * u;
        xr[u] = 4 * i < len ? xv[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    for (int r = warp; r < n_mix; r += kWarps) {
        const auto* fv = reinterpret_cast<const float4*>(fn + r * width + k0);
        float sum = 0.0f;
#pragma unroll
        for (int u = 0; u < kChunk / 128; ++u) {
            const int64_t i = lane + 32 * u;
            if (4 * i < len) {
                const float4 f = __ldg(fv + i);
                sum += f.x * xr[u].x + f.y * xr[u].y + f.z * xr[u].z + f.w * xr[u].w;
            }
        }
        sum = warp_sum(sum);
        if (lane == 0) partial[(t * n_mix + r) * chunks + chunk] = sum;
    }
}

// raw[t][r] = sum of the chunks in order.
__global__ void mixes_sum_kernel(const float* partial, int64_t rows, int chunks, float* raw) {
    pdl_begin();
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i >= rows) return;
    float sum = 0.0f;
    for (int c = 0; c < chunks; ++c) sum += partial[i * chunks + c];
    raw[i] = sum;
}

}  // namespace

bool hc_mixes_supported(int64_t width) {
    return width % 4 == 0;
}

int64_t hc_mixes_partials(int64_t n, int64_t width, int n_mix) {
    return n * n_mix * ((width + kChunk - 1) / kChunk);
}

void launch_hc_mixes(cudaStream_t s, const float* x, int64_t n, int64_t width, const float* fn, int n_mix,
                     float* partial, float* raw) {
    if (n == 0) return;
    const int chunks = static_cast<int>((width + kChunk - 1) / kChunk);
    launch_kernel(mixes_partial_kernel, static_cast<unsigned>(n * chunks), kWarps * 32, 0, s, x, width, fn, n_mix,
                  partial);
    launch_kernel(mixes_sum_kernel, blocks_for(n * n_mix, 256), 256, 0, s, partial, n * n_mix, chunks, raw);
}

}  // namespace dsv4::cuda
