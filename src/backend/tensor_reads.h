// Small reads of backend tensors into host vectors: routing ids and weights (the MoE dispatchers of src/dist), draft
// and greedy token ids (src/spec, src/runtime).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/model_ops.h"

namespace dsv4 {

// An int32 tensor's values (ModelOps::to_host copies float32; the int32 bits pass through it unchanged).
std::vector<int32_t> read_i32(ModelOps& ops, const Tensor& t);
std::vector<float> read_f32(ModelOps& ops, const Tensor& t);
// ModelOps::argmax_rows of x [N, V] (kNoArgmax where a row has no choice), read to the host: N ids, not N x V floats.
std::vector<int32_t> read_argmax_rows(ModelOps& ops, const Tensor& x);

}  // namespace dsv4
