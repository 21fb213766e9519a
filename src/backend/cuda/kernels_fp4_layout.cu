// FP4 weight codes moved into the backend's sign-split layout in place (backend/fp4_layout.h), once, as an upload's
// bytes land in device memory: a pass at memory speed, where the host would take seconds a gigabyte.
#include <algorithm>

#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

__global__ void fp4_to_sign_split_kernel(uint32_t* words, int64_t n_words) {
    pdl_begin();
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_words;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        words[i] = fp4_word_from_checkpoint(words[i]);
    }
}

}  // namespace

void launch_fp4_to_sign_split(cudaStream_t s, uint32_t* words, int64_t n_words) {
    if (n_words <= 0) return;
    constexpr int kThreads = 256;
    const auto blocks = static_cast<unsigned>(std::min<int64_t>(4096, (n_words + kThreads - 1) / kThreads));
    launch_kernel(fp4_to_sign_split_kernel, blocks, kThreads, 0, s, words, n_words);
}

}  // namespace dsv4::cuda
