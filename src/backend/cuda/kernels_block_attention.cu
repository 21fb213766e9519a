// DSpark's draft-block attention on the GPU (ModelOps::block_attention, model-spec 3.2): every query of a sequence
// attends to the ring rows of the `window` positions before the sequence's first step token and to all of the
// sequence's step rows (bidirectional), plus the sink. One warp per (token, head), the reference attention kernel's
// two passes (attention_rows.cuh); the draft block is a handful of rows per sequence.
#include <cfloat>

#include "backend/cuda/attention_rows.cuh"
#include "backend/cuda/kernels_block_attention.h"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

// Stored row of key j of a query of sequence `seq`: context ring rows first, then the step rows; null when the ring
// position would be negative (cannot happen for j < n_ctx) or the step row is outside the sequence.
__device__ inline const uint8_t* block_key_row(const StepMeta& m, const AttentionArgs& a, int seq, int j, int n_ctx) {
    const int64_t start = m.seq_start[seq];
    const int64_t bytes = a.format.bytes;
    if (j < n_ctx) {
        const int64_t p = start - n_ctx + j;
        if (p < 0) return nullptr;
        return a.ring + (static_cast<int64_t>(m.seq_slot[seq]) * a.ring_rows + p % a.ring_rows) * bytes;
    }
    const int i = j - n_ctx;
    if (i >= m.seq_n_tokens[seq]) return nullptr;
    return a.kv + (static_cast<int64_t>(m.seq_token_begin[seq]) + i) * bytes;
}

template <int D, typename Acc>
__global__ void block_attention_kernel(StepMeta m, AttentionArgs a) {
    pdl_begin();
    const int warp = threadIdx.x / 32;
    const int64_t th = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + warp;
    if (th >= static_cast<int64_t>(m.n_tokens) * a.heads) return;
    const int t = static_cast<int>(th / a.heads), h = static_cast<int>(th % a.heads);
    const int seq = m.seq_of_token[t];
    const int n_ctx = static_cast<int>(min64(a.window, m.seq_start[seq]));
    attend_two_pass<D, Acc>(a, th, h, n_ctx + m.seq_n_tokens[seq],
                            [&](int j) { return block_key_row(m, a, seq, j, n_ctx); });
}

template <typename Acc>
void launch_block_attention_acc(cudaStream_t s, const StepMeta& m, const AttentionArgs& a, unsigned blocks) {
    switch (a.format.dtype) {
        case kRowBf16:
            launch_kernel(block_attention_kernel<kRowBf16, Acc>, blocks, 128, 0, s, m, a);
            break;
        case kRowFp8:
            launch_kernel(block_attention_kernel<kRowFp8, Acc>, blocks, 128, 0, s, m, a);
            break;
        default:
            launch_kernel(block_attention_kernel<kRowF32, Acc>, blocks, 128, 0, s, m, a);
            break;
    }
}

}  // namespace

void launch_block_attention(cudaStream_t s, const StepMeta& m, const AttentionArgs& a) {
    const int64_t rows = static_cast<int64_t>(m.n_tokens) * a.heads;
    if (rows == 0) return;
    if (a.reference) {
        launch_block_attention_acc<double>(s, m, a, blocks_for(rows, 4));
    } else {
        launch_block_attention_acc<float>(s, m, a, blocks_for(rows, 4));
    }
}

}  // namespace dsv4::cuda
