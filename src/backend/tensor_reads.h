// Small reads of backend tensors into host vectors: routing ids and weights (the MoE dispatchers of src/dist), draft
// greedy and sampled token ids (src/spec, src/runtime).
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
// ModelOps::sample_rows of logits [N, V], read to the host: one id a draw (kNoSample where its row has no choice) and,
// when any draw asks for them, every draw's logprobs (meaningful where it asked and drew a token).
struct SampledRows {
    std::vector<int32_t> ids;
    std::vector<DrawLogprobs> logprobs;  // empty when no draw asked
    std::vector<ProbeMasses> probes;     // empty when no draw probed
};
SampledRows read_sampled_rows(ModelOps& ops, const Tensor& logits, const SampleRowsArgs& args);

}  // namespace dsv4
