// Staging a token's query heads (float32 [tokens][heads][dim]) into shared memory for the tensor-core attention and
// indexer kernels: each thread keeps kBatch four-element loads in flight before it converts any, so the staging costs a
// round trip per batch rather than one per load.
#pragma once

#include <cstdint>

namespace dsv4::cuda {

// Hands store(row, col, value) heads [h0, h0 + rows) of token t, four elements at a time (value: a float4 at column
// col, a multiple of 4; rows at or past `heads` read as zeros). dim must be a multiple of 4 and q 16-byte aligned.
template <int kBatch, typename Store>
__device__ __forceinline__ void stage_head_rows(const float* q, int64_t t, int heads, int h0, int rows, int dim,
                                                Store store) {
    const int quads = dim / 4, items = rows * quads;
    for (int first = threadIdx.x; first < items; first += kBatch * blockDim.x) {
        float4 v[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
            const int i = first + j * blockDim.x, r = i / quads, c = (i % quads) * 4;
            v[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (i < items && h0 + r < heads) {
                v[j] = *reinterpret_cast<const float4*>(q + (t * heads + h0 + r) * dim + c);
            }
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
            const int i = first + j * blockDim.x;
            if (i >= items) break;
            store(i / quads, (i % quads) * 4, v[j]);
        }
    }
}

}  // namespace dsv4::cuda
