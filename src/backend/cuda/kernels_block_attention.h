// DSpark's draft-block attention (ModelOps::block_attention, model-spec 3.2), kernels_block_attention.cu: each
// sequence's step rows attend to a.window ring rows before the sequence's first step position plus all of its step
// rows (a.kv), bidirectionally, with the sink; a.ring is the layer's ring. Its own header so that kernels.h, which
// every kernel file includes, does not change with it.
#pragma once

#include "backend/cuda/kernels.h"

namespace dsv4::cuda {

void launch_block_attention(cudaStream_t s, const StepMeta& m, const AttentionArgs& a);

}  // namespace dsv4::cuda
